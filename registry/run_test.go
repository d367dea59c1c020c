package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolnode/toolnode/sandbox"
)

// newTestRunner returns a sandboxed runner (yolo false) whose scratch
// directories live in a test directory.
func newTestRunner(t testing.TB, mod func(*RunnerConfig)) *Runner {
	t.Helper()
	cfg := RunnerConfig{
		Timeout:    20 * time.Second,
		ScratchDir: filepath.Join(t.TempDir(), "scratch"),
		NodeName:   "node-a",
	}
	if mod != nil {
		mod(&cfg)
	}
	if !cfg.Yolo {
		if _, err := sandbox.Status(); err != nil {
			t.Skipf("no sandbox on this host: %v", err)
		}
	}
	r := NewRunner(cfg)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// shTool is the metadata of a tool run through cmd.
func shTool(cmd string) *Meta {
	return &Meta{Args: DefaultArgs, Tier: TierHot, OutputFormat: OutputText, Cmd: cmd}
}

func TestRun_StdinAndEnv(t *testing.T) {
	r := newTestRunner(t, func(c *RunnerConfig) {
		c.Env = []string{"PATH=/usr/bin:/bin", "KEEP=kept", "OLLIE_AGENT=stale", "TMPDIR=/stale"}
		c.ToolEnv = []string{"KEEP"}
	})
	args := []byte(`{"pattern": "a b", "n": 3}`)
	out, err := r.Run(context.Background(), Invocation{Tool: "echo", Meta: shTool("cat"), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, args) {
		t.Errorf("stdin = %q, want the arguments %q", out, args)
	}

	out, err = r.Run(context.Background(), Invocation{
		Tool:    "env",
		Meta:    shTool(`printf '%s|%s|%s|%s|%s|%s' "$OLLIE_SESSION_ID" "$OLLIE_AGENT" "$TOOLNODE_NODE" "$KEEP" "$TMPDIR" "$PWD"`),
		Session: "s1",
		Agent:   "a1",
	})
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(string(out), "|")
	if len(f) != 6 || f[0] != "s1" || f[1] != "a1" || f[2] != "node-a" || f[3] != "kept" {
		t.Fatalf("env = %q", out)
	}
	scratch, pwd := f[4], f[5]
	if filepath.Dir(scratch) != r.cfg.ScratchDir || pwd != scratch {
		t.Errorf("TMPDIR = %q and PWD = %q, want the same scratch directory under %q", scratch, pwd, r.cfg.ScratchDir)
	}
	// It is removed once the call has answered.
	waitFor(t, 5*time.Second, "the scratch directory "+scratch+" removed after the call", func() bool {
		_, err := os.Stat(scratch)
		return os.IsNotExist(err)
	})
}

func TestRun_ExitStatusAndStderrTail(t *testing.T) {
	r := newTestRunner(t, nil)
	_, err := r.Run(context.Background(), Invocation{Tool: "fail", Meta: shTool(`echo partial; echo "it broke" >&2; exit 3`)})
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want an *ExitError", err)
	}
	if ee.Status != 3 || ee.Stderr != "it broke" || ee.Tool != "fail" {
		t.Errorf("ExitError = %+v", ee)
	}
	if want := `tool "fail" exited with status 3: it broke`; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}

	// A long stderr: only the tail is kept, and it ends with the last line.
	_, err = r.Run(context.Background(), Invocation{Tool: "noisy",
		Meta: shTool(`i=0; while [ $i -lt 500 ]; do echo "line $i of noise" >&2; i=$((i+1)); done; echo LAST >&2; exit 1`)})
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want an *ExitError", err)
	}
	if len(ee.Stderr) > StderrTail || !strings.HasSuffix(ee.Stderr, "LAST") || strings.Contains(ee.Stderr, "line 0 ") {
		t.Errorf("stderr tail (%d bytes) = ...%q", len(ee.Stderr), ee.Stderr[max(0, len(ee.Stderr)-40):])
	}

	// Killed by a signal.
	_, err = r.Run(context.Background(), Invocation{Tool: "killed", Meta: shTool(`kill -TERM $$`)})
	if !errors.As(err, &ee) || ee.Signal != int(syscall.SIGTERM) || ee.Status != 128+int(syscall.SIGTERM) {
		t.Errorf("err = %v, want killed by SIGTERM", err)
	}
}

func TestRun_SchemaRejectsBeforeRunning(t *testing.T) {
	r := newTestRunner(t, nil)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	meta := shTool("touch " + marker)
	meta.Args = []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	tests := []struct {
		name, args, want string
	}{
		{name: "missing property", args: `{}`, want: "missing property 'n'"},
		{name: "wrong type", args: `{"n": "x"}`, want: "got string, want integer"},
		{name: "not an object", args: `[1]`, want: "one JSON object"},
		{name: "not JSON", args: `{`, want: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), Invocation{Tool: "mark", Meta: meta, Args: []byte(tt.args), Cwd: dir})
			if !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `tool "mark"`) {
				t.Fatalf("err = %v, want ErrInvalidArgs naming the tool and containing %q", err, tt.want)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Fatal("the tool ran although its arguments were invalid")
			}
		})
	}
	if _, err := r.Run(context.Background(), Invocation{Tool: "mark", Meta: meta, Args: []byte(`{"n": 1}`), Cwd: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("valid arguments: the tool did not run: %v", err)
	}
	// Empty arguments are {}.
	if _, err := r.Run(context.Background(), Invocation{Tool: "mark", Meta: shTool("true")}); err != nil {
		t.Errorf("no arguments: %v", err)
	}
}

func TestRun_JSONOutput(t *testing.T) {
	r := newTestRunner(t, nil)
	meta := shTool(`echo '{"ok": true}'`)
	meta.OutputFormat = OutputJSON
	out, err := r.Run(context.Background(), Invocation{Tool: "j", Meta: meta})
	if err != nil || string(out) != "{\"ok\": true}\n" {
		t.Errorf("valid JSON: (%q, %v)", out, err)
	}
	for _, cmd := range []string{`echo 'not json'`, `true`, `echo '{"a":1}{"b":2}'`} {
		meta := shTool(cmd)
		meta.OutputFormat = OutputJSON
		if _, err := r.Run(context.Background(), Invocation{Tool: "j", Meta: meta}); !errors.Is(err, ErrBadOutput) {
			t.Errorf("%s: err = %v, want ErrBadOutput", cmd, err)
		}
	}
	// A text tool may print anything.
	if _, err := r.Run(context.Background(), Invocation{Tool: "t", Meta: shTool(`echo 'not json'`)}); err != nil {
		t.Error(err)
	}
}

// processGone reports whether pid has exited (a zombie counts as gone: it
// runs no more, and its reaping is its new parent's business).
func processGone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// readPid waits for a pid file written by a tool.
func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 5*time.Second, "the pid file", func() bool {
		data, err := os.ReadFile(path)
		if err != nil || !bytes.HasSuffix(data, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	return pid
}

func TestRun_TimeoutKillsProcessGroup(t *testing.T) {
	r := newTestRunner(t, func(c *RunnerConfig) { c.Timeout = 700 * time.Millisecond })
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	// The tool starts a child that would outlive it, then hangs.
	meta := shTool(`sleep 300 & echo $! > child; wait`)
	start := time.Now()
	_, err := r.Run(context.Background(), Invocation{Tool: "hang", Meta: meta, Cwd: dir})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), `tool "hang"`) || !strings.Contains(err.Error(), "process group was killed") {
		t.Errorf("error text %q", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call took %s with a 700ms timeout", took)
	}
	pid := readPid(t, pidFile)
	waitFor(t, 5*time.Second, fmt.Sprintf("the child sleep (pid %d) to be killed", pid), func() bool { return processGone(pid) })

	// The caller's deadline counts too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r2 := newTestRunner(t, nil)
	if _, err := r2.Run(ctx, Invocation{Tool: "hang", Meta: shTool("sleep 300")}); !errors.Is(err, ErrTimeout) {
		t.Errorf("ctx deadline: err = %v, want ErrTimeout", err)
	}
}

func TestRun_LeftoverChildrenKilledAfterExit(t *testing.T) {
	r := newTestRunner(t, nil)
	dir := t.TempDir()
	// The tool exits at once, leaving a child that holds its stdout open.
	out, err := r.Run(context.Background(), Invocation{Tool: "bg", Meta: shTool(`sleep 300 & echo $! > child; echo done`), Cwd: dir})
	if err != nil || string(out) != "done\n" {
		t.Fatalf("(%q, %v)", out, err)
	}
	pid := readPid(t, filepath.Join(dir, "child"))
	waitFor(t, 5*time.Second, "the leftover child to be killed", func() bool { return processGone(pid) })
}

func TestRun_Cancel(t *testing.T) {
	r := newTestRunner(t, nil)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, Invocation{Tool: "hang", Meta: shTool(`echo $$ > pid; sleep 300`), Cwd: dir})
		errc <- err
	}()
	pid := readPid(t, filepath.Join(dir, "pid"))
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	waitFor(t, 5*time.Second, "the tool to be killed", func() bool { return processGone(pid) })
}

func TestRun_OutputCap(t *testing.T) {
	r := newTestRunner(t, func(c *RunnerConfig) { c.OutputCap = 1000 })
	_, err := r.Run(context.Background(), Invocation{Tool: "yes", Meta: shTool("yes")})
	if !errors.Is(err, ErrOutputCap) || !strings.Contains(err.Error(), "more than 1000 bytes") {
		t.Fatalf("err = %v, want ErrOutputCap", err)
	}
	out, err := r.Run(context.Background(), Invocation{Tool: "exact", Meta: shTool("head -c 1000 /dev/zero")})
	if err != nil || len(out) != 1000 {
		t.Errorf("exactly the cap: (%d bytes, %v)", len(out), err)
	}
	if _, err := r.Run(context.Background(), Invocation{Tool: "over", Meta: shTool("head -c 1001 /dev/zero")}); !errors.Is(err, ErrOutputCap) {
		t.Errorf("one byte over the cap: %v", err)
	}
}

func TestRun_CommandOrder(t *testing.T) {
	own := t.TempDir()
	onPath := t.TempDir()
	exe := writeFile(t, own, "order", "#!/bin/sh\necho own\n", 0o755)
	writeFile(t, onPath, "order", "#!/bin/sh\necho path\n", 0o755)
	writeFile(t, onPath, "plain", "#!/bin/sh\necho plain\n", 0o644)
	r := newTestRunner(t, func(c *RunnerConfig) {
		c.Env = []string{"PATH=/usr/bin:/bin"}
		c.ExtraPath = []string{onPath}
	})
	tests := []struct {
		name string
		inv  Invocation
		want string
		err  error
	}{
		{name: "own executable first", inv: Invocation{Tool: "order", Exec: exe, Meta: shTool("echo cmd")}, want: "own\n"},
		{name: "then cmd", inv: Invocation{Tool: "order", Meta: shTool("echo cmd")}, want: "cmd\n"},
		{name: "then PATH", inv: Invocation{Tool: "order", Meta: shTool("")}, want: "path\n"},
		{name: "system PATH", inv: Invocation{Tool: "true", Meta: shTool("")}, want: ""},
		{name: "not executable in PATH", inv: Invocation{Tool: "plain", Meta: shTool("")}, err: ErrNoCommand},
		{name: "nothing", inv: Invocation{Tool: "no-such-tool-anywhere", Meta: shTool("")}, err: ErrNoCommand},
		{name: "nil meta", inv: Invocation{Tool: "order"}, want: "path\n"},
		{name: "bad name", inv: Invocation{Tool: "../order"}, err: ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := r.Run(context.Background(), tt.inv)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("(%q, %v), want %q", out, err, tt.want)
			}
		})
	}
	// The tool sees the extra PATH too.
	out, err := r.Run(context.Background(), Invocation{Tool: "p", Meta: shTool(`echo "$PATH"`)})
	if err != nil || strings.TrimSpace(string(out)) != "/usr/bin:/bin:"+onPath {
		t.Errorf("PATH = (%q, %v)", out, err)
	}
	// ErrNoCommand names the tool and is a sentence.
	_, err = r.Run(context.Background(), Invocation{Tool: "nope", Meta: shTool("")})
	if err == nil || !strings.Contains(err.Error(), `tool "nope"`) || !strings.Contains(err.Error(), "not in PATH") {
		t.Errorf("ErrNoCommand text: %v", err)
	}
}

func TestRun_BadCwd(t *testing.T) {
	r := newTestRunner(t, nil)
	_, err := r.Run(context.Background(), Invocation{Tool: "x", Meta: shTool("true"), Cwd: filepath.Join(t.TempDir(), "absent")})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("err = %v", err)
	}
}
