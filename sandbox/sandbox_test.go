package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRun_Sandbox(t *testing.T) {
	r := newTestSandbox(t, nil)
	yolo := newTestSandbox(t, func(c *testConfig) { c.Off = true })
	cwd := t.TempDir()
	elsewhere := t.TempDir()
	home := t.TempDir()
	write := func(dir string) string { return fmt.Sprintf(`echo hi > %q/f && cat %q/f`, dir, dir) }
	tests := []struct {
		name   string
		runner *testSandbox
		scope  string
		cmd    string
		cwd    string
		ok     bool
	}{
		{name: "scratch writable", runner: r, cmd: `echo hi > "$TMPDIR/f" && mkdir "$TMPDIR/d" && mv "$TMPDIR/f" "$TMPDIR/d/g" && cat "$TMPDIR/d/g"`, ok: true},
		{name: "scratch is cwd without a session cwd", runner: r, cmd: `echo hi > f && cat f`, ok: true},
		{name: "session cwd writable", runner: r, cmd: write(cwd), cwd: cwd, ok: true},
		{name: "session cwd read-only for scope read", runner: r, scope: "read", cmd: write(cwd), cwd: cwd},
		{name: "scope read may still read cwd", runner: r, scope: "read", cmd: `ls . >/dev/null && cat /etc/passwd >/dev/null`, cwd: cwd, ok: true},
		{name: "scope read may write scratch", runner: r, scope: "read", cmd: `echo hi > "$TMPDIR/f"`, cwd: cwd, ok: true},
		{name: "elsewhere denied", runner: r, cmd: write(elsewhere)},
		{name: "elsewhere denied with a cwd", runner: r, cmd: write(elsewhere), cwd: cwd},
		{name: "home denied", runner: r, cmd: write(home)},
		{name: "mkdir elsewhere denied", runner: r, cmd: fmt.Sprintf("mkdir %q/d", elsewhere)},
		{name: "rm elsewhere denied", runner: r, cmd: fmt.Sprintf("rm %q", writeFile(t, elsewhere, "keep", "x", 0o644))},
		{name: "devices writable", runner: r, cmd: `echo hi > /dev/null && head -c 4 /dev/zero >/dev/null && head -c 4 /dev/urandom >/dev/null && echo hi >&2`, ok: true},
		{name: "stdout via /dev/stdout", runner: r, cmd: `echo hi > /dev/stdout`, ok: true},
		{name: "yolo writes elsewhere", runner: yolo, cmd: write(elsewhere), ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.runner.run(context.Background(), tool{Cmd: tt.cmd, Cwd: tt.cwd, ReadOnly: tt.scope == "read"})
			if tt.ok && err != nil {
				t.Fatalf("denied: %v", err)
			}
			if !tt.ok {
				var ee *exitError
				if !errors.As(err, &ee) {
					t.Fatalf("allowed (out %q, err %v), want the write denied", out, err)
				}
				if !strings.Contains(ee.Stderr, "ermission denied") {
					t.Errorf("stderr %q does not say permission denied", ee.Stderr)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "keep")); err != nil {
		t.Errorf("a denied rm removed the file: %v", err)
	}
}

func TestRun_NoSandbox(t *testing.T) {
	saved := kernelSandbox
	kernelSandbox = func() (int, error) { return 0, fmt.Errorf("%w: this kernel has no Landlock support", ErrNoSandbox) }
	defer func() { kernelSandbox = saved }()
	r := newSandbox(Config{ScratchDir: t.TempDir()}) // not Off
	defer r.Close()
	_, err := r.run(context.Background(), tool{Cmd: "true"})
	if !errors.Is(err, ErrNoSandbox) || !strings.Contains(err.Error(), "-yolo") {
		t.Errorf("err = %v, want ErrNoSandbox mentioning -yolo", err)
	}
}

func TestRun_NoLeaks(t *testing.T) {
	r := newTestSandbox(t, func(c *testConfig) { c.Timeout = 300 * time.Millisecond; c.OutputCap = 100 })
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		// The sandbox keeps a descriptor per readable tree next to the
		// scratch directory, as many as the shared temporary directory
		// has entries at the moment: not a leak.
		return len(ents) - viewFDs(r)
	}
	run := func() {
		ctx := context.Background()
		_, _ = r.run(ctx, tool{Cmd: "cat"})
		_, _ = r.run(ctx, tool{Cmd: "exit 1"})
		_, _ = r.run(ctx, tool{Cmd: "sleep 30"})
		_, _ = r.run(ctx, tool{Cmd: "yes"})
		_, _ = r.run(ctx, tool{Cmd: "sleep 30 & true"})
		// A tool that does not read 1 MiB of arguments.
		_, _ = r.run(ctx, tool{Cmd: "true", Args: []byte(`{"x":"` + strings.Repeat("a", 1<<20) + `"}`)})
	}
	run() // warm up caches and lazily made runtime threads and files
	g0, f0 := goroutines(), fds()
	for range 3 {
		run()
	}
	waitFor(t, 5*time.Second, "goroutines and fds back to their count before the calls", func() bool {
		return goroutines() <= g0 && fds() <= f0
	})
	// The calls made ready ahead have theirs; no other may be left.
	waitFor(t, 5*time.Second, "no scratch directory left but those of calls made ready", func() bool {
		ready, _ := r.preparedScratch()
		entries, err := os.ReadDir(r.cfg.ScratchDir)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if !slices.Contains(ready, filepath.Join(r.cfg.ScratchDir, e.Name())) {
				return false
			}
		}
		return true
	})
	_ = r.Close()
	if entries, err := os.ReadDir(r.cfg.ScratchDir); err != nil || len(entries) != 0 {
		t.Errorf("scratch directories left after Close: %v %v", entries, err)
	}
}

func goroutines() int { return runtime.NumGoroutine() }

func TestRun_MissingExecutable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	for _, yolo := range []bool{false, true} {
		r := newTestSandbox(t, func(c *testConfig) { c.Off = yolo })
		_, err := r.run(context.Background(), tool{Exec: missing})
		if err == nil || !strings.Contains(err.Error(), "cannot start "+missing) {
			t.Errorf("yolo=%v, missing executable: %v", yolo, err)
		}
	}
}

// The sandbox confines only the tool: after many sandboxed calls, from
// many goroutines at once, the node itself can still write anywhere.
func TestRun_SandboxConfinesOnlyTheTool(t *testing.T) {
	r := newTestSandbox(t, nil)
	free := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.run(context.Background(), tool{Cmd: "true"}); err != nil {
				t.Error(err)
			}
			p := filepath.Join(free, fmt.Sprint("node-", i))
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Errorf("the node lost write access after sandboxed calls: %v", err)
			}
		}()
	}
	wg.Wait()
	// And a tool started after all that is still confined.
	out := filepath.Join(free, "tool")
	_, err := r.run(context.Background(), tool{Cmd: "echo x > " + out})
	if err == nil {
		t.Fatal("a sandboxed tool wrote outside its directories")
	}
}

func TestSandboxStatus(t *testing.T) {
	abi, err := Status()
	if err != nil {
		if !errors.Is(err, ErrNoSandbox) {
			t.Errorf("Status error %v does not wrap ErrNoSandbox", err)
		}
		t.Skipf("no Landlock here: %v", err)
	}
	if abi < 1 {
		t.Errorf("abi = %d with no error", abi)
	}
}

// A closed Sandbox holds no descriptor: the read view's hundreds (one per
// rule) go with it, or a process that makes and closes nodes (a test
// binary) runs out.
func TestRun_CloseReleasesDescriptors(t *testing.T) {
	if _, err := Status(); err != nil {
		t.Skip(err)
	}
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	dir := t.TempDir()
	inv := tool{Cmd: "true"}
	// Once, so that the runtime's lazily made threads and files exist.
	warm := newSandbox(Config{ScratchDir: filepath.Join(dir, "warm")})
	if _, err := warm.run(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	f0 := count()
	r := newSandbox(Config{ScratchDir: filepath.Join(dir, "scratch"), Protected: []string{filepath.Join(dir, "data")}})
	if _, err := r.run(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
	held := count() - f0
	if held < 10 {
		t.Fatalf("an open Sandbox holds %d descriptors; the view should hold one per rule", held)
	}
	r.Close()
	waitFor(t, 5*time.Second, "the descriptors of a closed Sandbox released", func() bool { return count() <= f0 })
}
