package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests run tools through a Sandbox as registry's Runner does: a
// call is a shell command or an executable, and one that does not exit 0
// is an error.

// testConfig is a Sandbox's Config and what each test call gets.
type testConfig struct {
	Config
	Timeout   time.Duration // limit of one call
	OutputCap int64         // default 4 MiB
	Env       []string      // the tool's environment, TMPDIR aside
}

// testSandbox is a Sandbox with its test calls' settings.
type testSandbox struct {
	*Sandbox
	tc testConfig
}

// newTestSandbox returns a confining sandbox (Off false) whose scratch
// directories live in a test directory, closed when the test ends.
func newTestSandbox(t testing.TB, mod func(*testConfig)) *testSandbox {
	t.Helper()
	tc := newSandbox(Config{}).tc
	tc.ScratchDir = filepath.Join(t.TempDir(), "scratch")
	if mod != nil {
		mod(&tc)
	}
	if !tc.Off {
		if _, err := Status(); err != nil {
			t.Skipf("no sandbox on this host: %v", err)
		}
	}
	s := &testSandbox{Sandbox: New(tc.Config), tc: tc}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newSandbox returns a Sandbox for cfg with the test calls' defaults; the
// caller closes it.
func newSandbox(cfg Config) *testSandbox {
	return &testSandbox{Sandbox: New(cfg), tc: testConfig{Config: cfg, Timeout: 20 * time.Second, OutputCap: 4 << 20, Env: toolEnv()}}
}

// tool is one test call: Cmd run through /bin/sh -c, else Exec.
type tool struct {
	Cmd, Exec string
	Cwd       string // "": the scratch directory
	ReadOnly  bool   // Cwd is not writable (scope read)
	Network   bool
	Args      []byte
}

// exitError is the error of a call whose tool did not exit 0.
type exitError struct {
	Status, Signal int
	Stderr         string
}

func (e *exitError) Error() string {
	return fmt.Sprintf("exit status %d (signal %d): %s", e.Status, e.Signal, e.Stderr)
}

// errTimeout is the error of a call killed at its time limit.
var errTimeout = errors.New("timed out")

// run runs tl and returns its standard output.
func (s *testSandbox) run(ctx context.Context, tl tool) ([]byte, error) {
	argv := []string{"/bin/sh", "-c", tl.Cmd, "tool"}
	if tl.Exec != "" {
		argv = []string{tl.Exec}
	}
	if err := s.Ready(); err != nil {
		return nil, err
	}
	args := tl.Args
	if len(args) == 0 {
		args = []byte("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, s.tc.Timeout)
	defer cancel()
	res, err := s.Run(ctx, Call{
		Argv: argv, Dir: tl.Cwd, ReadOnly: tl.ReadOnly, Network: tl.Network,
		Env: s.tc.Env, Stdin: args, OutputCap: s.tc.OutputCap,
	})
	switch {
	case err != nil:
		return nil, err
	case res.OverCap:
		return nil, fmt.Errorf("over the output cap")
	case errors.Is(res.Killed, context.DeadlineExceeded):
		return nil, errTimeout
	case res.Killed != nil:
		return nil, res.Killed
	case res.Status != 0:
		return nil, &exitError{Status: res.Status, Signal: res.Signal, Stderr: res.StderrTail}
	}
	return res.Stdout, nil
}

// writeFile writes a file under dir, creating parents.
func writeFile(t testing.TB, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// toolEnv is the node's environment as a sandboxed tool gets it.
func toolEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); EnvAllowed(k, nil) && k != "TMPDIR" {
			env = append(env, kv)
		}
	}
	return env
}

// benchArgs are a small call's arguments.
var benchArgs = []byte(`{"path": "/etc/hosts", "n": 3}`)

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

// benchRun makes the call of /bin/true again and again.
func benchRun(b *testing.B, r *testSandbox) {
	inv := tool{Exec: "/bin/true", Args: benchArgs}
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.run(ctx, inv); err != nil {
			b.Fatal(err)
		}
	}
}
