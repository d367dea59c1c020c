//go:build linux

// The binary's own 9P client verb by verb, and the node's log: one
// format (log/slog records), and a clean stop that logs no ERROR.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testcluster"
)

// cliResult is what one run of the client printed and its exit status.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLIResult runs the binary as a client and returns what it printed
// and its exit status, whatever that is.
func runCLIResult(t *testing.T, e *env, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = e.clientEnv(t)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("toolnode %q: %v", args, err)
	}
	return cliResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// cliFails runs the client, which must exit 1 and print exactly one line
// on stderr, "toolnode 9p: PREFIX...", holding every one of subs.
func cliFails(t *testing.T, e *env, stdin, prefix string, subs []string, args ...string) cliResult {
	t.Helper()
	r := runCLIResult(t, e, stdin, args...)
	if r.code != 1 {
		t.Errorf("toolnode %q: exit status %d, want 1 (stderr %q)", args, r.code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("toolnode %q: stderr %q, want exactly one line", args, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "toolnode 9p: "+prefix) {
		t.Errorf("toolnode %q: stderr %q, want it to start %q", args, r.stderr, "toolnode 9p: "+prefix)
	}
	for _, s := range subs {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("toolnode %q: stderr %q does not say %q", args, r.stderr, s)
		}
	}
	return r
}

// cliOK runs the client, which must exit 0 with nothing on stderr, and
// returns its standard output.
func cliOK(t *testing.T, e *env, stdin string, args ...string) string {
	t.Helper()
	r := runCLIResult(t, e, stdin, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("toolnode %q: exit status %d, stderr %q; want 0 and nothing", args, r.code, r.stderr)
	}
	return r.stdout
}

// lsLong is a line of `toolnode 9p ls -l`, as of plan9port's `9p ls -l`:
// mode, type M, dev 0, uid, gid, length, mtime, name.
var lsLong = regexp.MustCompile(`^[-d][-l][-r][-w][-x][-r][-w][-x][-r][-w][-x] M 0 \S+ +\S+ +\d+ [A-Z][a-z]{2} [ 1-3]\d ( \d{4}|\d\d:\d\d) (\S+)$`)

func TestCLIVerbs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node := e.start(t)
	addr := e.p9
	idxHas := func(name string, want bool) {
		t.Helper()
		testcluster.Until(t, 10*time.Second, fmt.Sprintf("t/idx lists %s: %v", name, want), func() (bool, string) {
			idx := cliOK(t, e, "", "9p", addr, "read", "t/idx")
			return strings.Contains("\n"+idx, "\n"+name+"\t") == want, idx
		})
	}

	t.Run("ls", func(t *testing.T) {
		if got := cliOK(t, e, "", "9p", addr, "ls", "/"); got != "a/\ncluster/\nevents\nm/\nnode\nsession/\nt/\ntoken/\ntools\ntrust/\nv/\n" {
			t.Errorf("ls / = %q", got)
		}
		var names []string
		for _, line := range lines(cliOK(t, e, "", "9p", "-a", addr, "ls", "-l", "/")) {
			m := lsLong.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("ls -l / line %q is not MODE UID GID LENGTH MTIME NAME", line)
				continue
			}
			names = append(names, m[2])
		}
		if got := strings.Join(names, " "); got != "a cluster events m node session t token tools trust v" {
			t.Errorf("ls -l / names = %q", got)
		}
		if got := cliOK(t, e, "", "9p", addr, "ls", "-l", "t/echo.meta"); !lsLong.MatchString(strings.TrimSuffix(got, "\n")) || !strings.HasSuffix(got, " echo.meta\n") {
			t.Errorf("ls -l t/echo.meta = %q", got)
		}
	})

	t.Run("as_plan9port", func(t *testing.T) {
		// plan9port's 9p, when installed, prints the same.
		p9, err := exec.LookPath("9p")
		if err != nil {
			t.Skip("plan9port's 9p is not in PATH")
		}
		host, port, _ := strings.Cut(addr, ":")
		for _, args := range [][]string{{"ls", "-l", "t"}, {"ls", "-l", "/"}, {"ls", "-l", "t/echo.meta"}, {"stat", "t/idx"}, {"ls", "a"}} {
			cmd := exec.Command(p9, append([]string{"-a", "tcp!" + host + "!" + port}, args...)...)
			cmd.Env = e.childEnv()
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("9p %q: %v", args, err)
			}
			if got := cliOK(t, e, "", append([]string{"9p", addr}, args...)...); got != string(want) {
				t.Errorf("toolnode 9p %q:\n%s\nplan9port's 9p:\n%s", args, got, want)
			}
		}
	})

	t.Run("stat", func(t *testing.T) {
		got := cliOK(t, e, "", "9p", addr, "stat", "t/idx")
		// Plan 9's %D, as plan9port's `9p stat` prints it.
		if !regexp.MustCompile(`^'idx' '\S+' '\S+' '\S*' q \([0-9a-f]{16} \d+ \) m 0444 at \d+ mt \d+ l \d+ t \d+ d \d+\n$`).MatchString(got) {
			t.Errorf("stat t/idx = %q, not Plan 9's %%D", got)
		}
		for _, want := range []string{"'idx' ", " m 0444 ", " mt ", " l "} {
			if !strings.Contains(got, want) {
				t.Errorf("stat t/idx = %q: no %q", got, want)
			}
		}
		if strings.Count(got, "\n") != 1 {
			t.Errorf("stat t/idx = %q, want one line", got)
		}
		cliFails(t, e, "", "stat /t/nope: ", nil, "9p", addr, "stat", "t/nope")
	})

	t.Run("write_creates_in_t", func(t *testing.T) {
		meta := `{"description": "made by toolnode 9p write"}` + "\n"
		cliOK(t, e, "#!/bin/sh\necho hello from cli_hello\n", "9p", addr, "write", "t/cli_hello")
		cliOK(t, e, meta, "9p", addr, "write", "t/cli_hello.meta")
		idxHas("cli_hello", true)
		if got := cliOK(t, e, "", "9p", addr, "read", "t/cli_hello.meta"); got != meta {
			t.Errorf("read t/cli_hello.meta = %q, want %q", got, meta)
		}
		if got := cliOK(t, e, "", "call", "-a", addr, "cli_hello"); got != "hello from cli_hello\n" {
			t.Errorf("call cli_hello = %q", got)
		}
		// Written again, the file is there: opened and truncated.
		meta2 := `{"description": "rewritten"}` + "\n"
		cliOK(t, e, meta2, "9p", addr, "write", "/t/cli_hello.meta")
		if got := cliOK(t, e, "", "9p", addr, "read", "t/cli_hello.meta"); got != meta2 {
			t.Errorf("read t/cli_hello.meta after a rewrite = %q, want %q", got, meta2)
		}
	})

	t.Run("legacy_noted", func(t *testing.T) {
		cliOK(t, e, `{"description": "old style", "cmd": "echo old", "bypass": true}`, "9p", addr, "write", "t/cli_legacy.meta")
		node.waitLog(t, 5*time.Second, "cli_legacy.meta", "legacy field bypass ignored")
		cliOK(t, e, "", "9p", addr, "rm", "t/cli_legacy.meta")
	})

	t.Run("write_creates_in_a", func(t *testing.T) {
		prof := `{"description": "a profile made by toolnode 9p write", "autoLoad": ["echo"]}` + "\n"
		cliOK(t, e, prof, "9p", addr, "write", "a/cli.json")
		if got := cliOK(t, e, "", "9p", addr, "read", "a/cli.json"); got != prof {
			t.Errorf("read a/cli.json = %q, want %q", got, prof)
		}
		if !strings.Contains(cliOK(t, e, "", "9p", addr, "ls", "a"), "cli.json\n") {
			t.Error("ls a does not list cli.json")
		}
	})

	t.Run("errors_once", func(t *testing.T) {
		// Refused at close: JSON that never completes. The error is the
		// node's, once, and nothing is published.
		cliFails(t, e, `{"description": "never closed"`, "write /t/cli_bad.meta: ", []string{"incomplete"}, "9p", addr, "write", "t/cli_bad.meta")
		// Refused at the write: not JSON whatever follows.
		cliFails(t, e, "{bad", "write /t/cli_bad.meta: ", []string{"JSON"}, "9p", addr, "write", "t/cli_bad.meta")
		idxHas("cli_bad", false)
		// A file there that refuses the open is not created over.
		cliFails(t, e, "x\n", "write /t/idx: ", []string{"read-only"}, "9p", addr, "write", "t/idx")
		cliFails(t, e, "", "read /nope: ", nil, "9p", addr, "read", "nope")
		cliFails(t, e, "", "rm /t/cli_nope.meta: ", nil, "9p", addr, "rm", "t/cli_nope.meta")
		cliFails(t, e, "", "unknown verb", nil, "9p", addr, "frob", "t")
		cliFails(t, e, "", "cannot reach a node", nil, "9p", "127.0.0.1:1", "read", "node")
		// A bad flag: the flag package's message and usage, once; status 2.
		if r := runCLIResult(t, e, "", "9p", "-x", "ls", "/"); r.code != 2 || strings.Count(r.stderr, "flag provided but not defined: -x") != 1 {
			t.Errorf("toolnode 9p -x: exit status %d, stderr %q; want 2 and the error once", r.code, r.stderr)
		}
		// rdwr stops at its first failure: the answers before it are
		// printed, the error once.
		r := cliFails(t, e, "name=cli_dup\nname=cli_dup\nname=never\n", "rdwr /session/new: ", []string{"already exists"}, "9p", addr, "rdwr", "session/new")
		if r.stdout != "cli_dup\n" {
			t.Errorf("rdwr session/new stdout = %q, want the first answer only", r.stdout)
		}
		cliOK(t, e, "kill\n", "9p", addr, "write", "session/cli_dup/ctl")
	})

	t.Run("create_rm", func(t *testing.T) {
		cliOK(t, e, "", "9p", addr, "create", "t/cli_pending.meta")
		cliOK(t, e, `{"description": "created, then written"}`, "9p", addr, "write", "t/cli_pending.meta")
		idxHas("cli_pending", true)
		cliOK(t, e, "", "9p", addr, "rm", "t/cli_pending.meta")
		cliOK(t, e, "", "9p", addr, "rm", "t/cli_hello.meta")
		idxHas("cli_pending", false)
		idxHas("cli_hello", false)
	})

	node.stop(t)
	checkLog(t, "e2e", node.log.String())
	if !strings.Contains(node.log.String(), "tools: watching and publishing "+e.tools) {
		t.Errorf("the start log does not name the watched tools directory %s", e.tools)
	}
}

// slogLine is a record of the text handler.
var slogLine = regexp.MustCompile(`^time=\S+ level=(DEBUG|INFO|WARN|ERROR) msg=`)

// checkLog checks that a node's whole output is slog text records, and
// that none is an ERROR.
func checkLog(t *testing.T, name, log string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		m := slogLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s: a log line that is not a slog record: %q", name, line)
			continue
		}
		n++
		if m[1] == "ERROR" {
			t.Errorf("%s: an ERROR in a clean run: %q", name, line)
		}
	}
	if n < 3 {
		t.Errorf("%s: %d log records, want at least start, serving and stop:\n%s", name, n, log)
	}
}

// TestE2E_Cluster_CleanStop: members of a three-node cluster stopped by
// SIGTERM, a follower first, then the leader (which hands over
// leadership), then the last, log no ERROR and nothing but slog records.
// One member starts with its tools directory missing: its log says so,
// and the directory is published once created.
func TestE2E_Cluster_CleanStop(t *testing.T) {
	t.Parallel()
	n1 := newCnode(t, "s1")
	n2 := newCnode(t, "s2").joining(n1)
	n3 := newCnode(t, "s3").joining(n1)
	if err := os.Remove(n3.e.tools); err != nil {
		t.Fatal(err)
	}
	nodes := []*cnode{n1, n2, n3}
	for _, n := range nodes {
		n.start(t)
	}
	waitFormed(t, 60*time.Second, nodes...)
	n3.p.waitLog(t, 5*time.Second, "tools: directory "+n3.e.tools+" does not exist", "published once it is created")

	if err := os.MkdirAll(n3.e.tools, 0o755); err != nil {
		t.Fatal(err)
	}
	// A legacy field is accepted, ignored, and noted in the log.
	legacy := `{"description": "published once its directory was created", "cmd": "echo late", "readOnly": true}` + "\n"
	if err := os.WriteFile(filepath.Join(n3.e.tools, "late_dir.meta"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 20*time.Second, "late_dir in s1's t/idx", func() (bool, string) {
		idx, err := read9(n1.e.p9, "t/idx")
		return err == nil && strings.Contains(idx, "late_dir\t"), idx
	})

	n3.p.waitLog(t, 5*time.Second, "late_dir.meta", "legacy field readOnly ignored")

	leader := currentLeader(t, nodes)
	follower := others(nodes, leader)[0]
	last := others(nodes, leader, follower)[0]
	for _, n := range []*cnode{follower, leader, last} {
		n.p.stop(t)
		if n != last {
			// The next one stops once the cluster has seen this one go.
			pollUntil(t, 20*time.Second, n.name+" gone from the members of "+last.name, func() (bool, string) {
				m, text, err := members9(last)
				return err == nil && m[n.name].state != "alive", text
			})
		}
	}
	for _, n := range nodes {
		checkLog(t, n.name, n.p.log.String())
	}
	if l := leader.p.log.String(); strings.Contains(l, "peer has newer term") {
		t.Logf("%s handed over leadership; Raft's note of it: %s", leader.name,
			regexp.MustCompile(`.*peer has newer term.*`).FindString(l))
	}
}
