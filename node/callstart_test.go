package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// A write of the call file answers once the call's checks pass and the
// tool runs while the client sends its read (p9.CallStarter): what is
// known at the write still fails the write, a read waits for the tool's
// end, a clunk waits for it (so a write then a clunk runs the tool whole),
// and the end of the connection kills the tool, sandbox on.
func TestNode_CallWriteAnswersBeforeTheRun(t *testing.T) {
	root := t.TempDir()
	data, tools, agents, work := filepath.Join(root, "data"), filepath.Join(root, "tools"), filepath.Join(root, "agents"), filepath.Join(root, "work")
	for _, d := range []string{tools, agents, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTool(t, tools, "greet", `{"description":"greets","args":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}`,
		"#!/bin/sh\ncat\n")
	writeTool(t, tools, "fails", `{"description":"exits 3"}`, "#!/bin/sh\necho broken >&2\nexit 3\n")
	// wait writes its pid, then runs until the file "go" appears in its cwd.
	writeTool(t, tools, "wait", `{"description":"waits for go"}`,
		"#!/bin/sh\necho $$ >pid.tmp && mv pid.tmp pid\nwhile [ ! -e go ]; do sleep 0.01; done\necho went\n")
	n := startNode(t, data, tools, agents)
	fsys := mount(t, n.P9Addr())
	mustAsk(t, fsys, "session/new", "name=s cwd="+work)
	mustAsk(t, fsys, "session/s/agent/new", "name=a")
	mustAsk(t, fsys, "session/s/agent/a/tools", "greet\nfails\nwait\n")
	const path = "session/s/agent/a/call"

	open := func() *callFid {
		t.Helper()
		fid, err := fsys.Open(path, plan9.ORDWR)
		if err != nil {
			t.Fatal(err)
		}
		return &callFid{fid}
	}

	// Known at the write: the schema, an unloaded or unknown tool.
	fid := open()
	for req, want := range map[string]string{
		`greet {"name":1}`: "string",
		`greet {}`:         "name",
		`nosuch {}`:        "no tool",
	} {
		if _, err := fid.WriteAt([]byte(req), 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("write %q: %v, want an error about %q", req, err, want)
		}
	}
	// Known only when it has run: the write succeeds, the read fails.
	if _, err := fid.WriteAt([]byte("fails"), 0); err != nil {
		t.Fatalf("write of a tool that fails when run: %v", err)
	}
	if _, err := fid.ReadAt(make([]byte, 64), 0); err == nil || !strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("read of a failed run: %v", err)
	}
	if _, err := fid.WriteAt([]byte(`greet {"name":"x"}`), 0); err != nil {
		t.Fatal(err)
	}
	if out := fid.readAll(t); out != `{"name":"x"}` {
		t.Fatalf("greet after a failed run: %q", out)
	}
	fid.Close()

	// A read before the end waits for it.
	fid = open()
	if _, err := fid.WriteAt([]byte("wait"), 0); err != nil {
		t.Fatal(err)
	}
	pid := waitToolPid(t, work)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := fid.ReadAt(buf, 0)
		if err != nil && n == 0 {
			got <- "error: " + err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	select {
	case s := <-got:
		t.Fatalf("the read returned %q while the tool ran", s)
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "went\n" {
			t.Fatalf("read after the end: %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read did not return after the tool ended")
	}
	waitFor(t, "the ended tool reaped", 5*time.Second, func() bool { return pidGone(pid) })
	fid.Close()

	// A write then a clunk (`echo wait > call` through a mount) runs the
	// tool to its end: the clunk waits for it.
	os.Remove(filepath.Join(work, "go"))
	os.Remove(filepath.Join(work, "pid"))
	fid = open()
	if _, err := fid.WriteAt([]byte("wait"), 0); err != nil {
		t.Fatal(err)
	}
	pid = waitToolPid(t, work)
	clunked := make(chan error, 1)
	go func() { clunked <- fid.Close() }()
	select {
	case err := <-clunked:
		t.Fatalf("the clunk returned (%v) while the tool ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	if pidGone(pid) {
		t.Fatalf("tool %d gone before it was let go", pid)
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-clunked:
		if err != nil {
			t.Fatalf("the clunk of a call that succeeded: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the clunk did not return after the tool ended")
	}

	// A connection that ends before the tool does kills it.
	os.Remove(filepath.Join(work, "go"))
	os.Remove(filepath.Join(work, "pid"))
	conn, err := client.Dial("tcp", n.P9Addr())
	if err != nil {
		t.Fatal(err)
	}
	fs2, err := conn.Attach(nil, "tester", "")
	if err != nil {
		t.Fatal(err)
	}
	fid2, err := fs2.Open(path, plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid2.WriteAt([]byte("wait"), 0); err != nil {
		t.Fatal(err)
	}
	pid = waitToolPid(t, work)
	if pidGone(pid) {
		t.Fatalf("tool %d not running before the connection ended", pid)
	}
	conn.Close()
	waitFor(t, "the tool of an ended connection killed", 10*time.Second, func() bool { return pidGone(pid) })
}

// callFid adds readAll to a fid.
type callFid struct{ *client.Fid }

func (f *callFid) readAll(t *testing.T) string {
	t.Helper()
	var out []byte
	buf := make([]byte, 8192)
	for {
		n, err := f.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if n == 0 || err != nil {
			if err != nil && !strings.Contains(err.Error(), "EOF") {
				t.Fatalf("read: %v", err)
			}
			return string(out)
		}
	}
}

// waitToolPid waits for the wait tool's pid file in dir.
func waitToolPid(t *testing.T, dir string) int {
	t.Helper()
	var pid int
	waitFor(t, "the tool's pid", 10*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// pidGone reports whether pid no longer exists (nor as a zombie).
func pidGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}
