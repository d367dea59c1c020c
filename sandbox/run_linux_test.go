//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRun_ReapsOrphansAsSubreaper(t *testing.T) {
	// As PID 1 in a container (or a child subreaper) the node inherits the
	// tool's orphans; Run must reap them, not leave zombies.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	r := newTestSandbox(t, nil)
	dir := t.TempDir()
	for _, cmd := range []string{
		`sleep 300 & echo $! > child; echo done`,          // exits, leaving a child
		`(sleep 300 & echo $! > child; wait) & sleep 300`, // grandchild, killed by timeout
	} {
		_ = os.Remove(filepath.Join(dir, "child"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = r.run(ctx, tool{Cmd: cmd, Cwd: dir})
		cancel()
		pid := readPid(t, filepath.Join(dir, "child"))
		waitFor(t, 5*time.Second, fmt.Sprintf("the orphan %d to be reaped", pid), func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err)
		})
	}
}

// viewFDs is how many descriptors r's sandbox holds for its read rules,
// its calls made ready and its call cgroups kept for reuse.
func viewFDs(r *testSandbox) int {
	_, prepared := r.preparedScratch()  // a ruleset and a cgroup per call made ready
	if c := r.containment(); c != nil { // and the call cgroups kept for reuse
		c.poolMu.Lock()
		for _, g := range c.pool {
			prepared += g.fds()
		}
		c.poolMu.Unlock()
	}
	if r.view == nil {
		return prepared
	}
	r.view.mu.RLock()
	defer r.view.mu.RUnlock()
	if r.view.rules == nil {
		return prepared
	}
	return len(r.view.rules.rules) + prepared
}

func ptraceSeize(pid int) error { return unix.PtraceSeize(pid) }

// connectMPTCP connects an MPTCP socket to a TCP listener at addr
// (IPv4 HOST:PORT); MPTCP falls back to TCP with a plain TCP peer.
func connectMPTCP(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP)
	if err != nil {
		return fmt.Errorf("socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return fmt.Errorf("connect over MPTCP: %w", err)
	}
	return nil
}

// A call after the first takes one made ready ahead, and it grants what
// one made on the call's path would; when the layout changes beside a
// protected path, the ones made ready are thrown away, and the call sees
// the change.
func TestRun_PreparedCalls(t *testing.T) {
	data, keys, _ := dataFixture(t)
	r := newTestSandbox(t, func(c *testConfig) { c.Protected = []string{data, filepath.Join(keys, "node.key")} })
	cmd := fmt.Sprintf(`echo hi > "$TMPDIR/f" && cat "$TMPDIR/f" /etc/passwd >/dev/null && ! cat %q 2>/dev/null`, filepath.Join(data, "peers.json"))
	run := func() {
		t.Helper()
		if out, err := r.run(context.Background(), tool{Cmd: cmd}); err != nil {
			t.Fatalf("(%q, %v)", out, err)
		}
	}
	run()
	// A directory on the way to a protected path that changes (the
	// shared temporary directory, while other tests run) rightly throws
	// the calls made ready away; a few tries ride over that.
	for try := 1; ; try++ {
		waitFor(t, 5*time.Second, "calls made ready", func() bool { dirs, _ := r.preparedScratch(); return len(dirs) > 0 })
		taken := r.prep.taken.Load()
		run()
		if r.prep.taken.Load() == taken+1 {
			break
		}
		if try == 5 {
			t.Fatalf("no call took a call made ready (taken %d, missed %d)", r.prep.taken.Load(), r.prep.missed.Load())
		}
	}
	waitFor(t, 5*time.Second, "calls made ready", func() bool { dirs, _ := r.preparedScratch(); return len(dirs) > 0 })
	missed := r.prep.missed.Load()
	writeFile(t, filepath.Join(keys, "new"), "f", "fresh", 0o644)
	out, err := r.run(context.Background(), tool{Cmd: fmt.Sprintf("cat %q", filepath.Join(keys, "new", "f"))})
	if err != nil || string(out) != "fresh" {
		t.Fatalf("a directory made beside a protected path: (%q, %v)", out, err)
	}
	if r.prep.missed.Load() != missed+1 {
		t.Errorf("the calls made ready before the change were used")
	}
}

// TestFSView_Grants: a read rule is left out only for a path the view
// grants already, never for one in or around a protected tree, nor for a
// link that leads into one.
func TestFSView_Grants(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	exe := filepath.Join(data, "exec", "tool")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "bin")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(outside, "link")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	v := newFSView([]string{data})
	defer v.close()
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/bin/sh", true},
		{outside, true},
		{exe, false},                      // inside the protected tree
		{data, false},                     // the protected tree itself
		{root, false},                     // on the way to it: not granted by the view
		{"/", false},                      // likewise
		{link, false},                     // leads into it
		{filepath.Join(root, "x"), false}, // missing: not known
	} {
		if got := v.grants(c.path); got != c.want {
			t.Errorf("grants(%s) = %v, want %v", c.path, got, c.want)
		}
	}
}
