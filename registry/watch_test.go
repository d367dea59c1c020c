package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watched runs watchDir on dir in the background and records, at each
// onChange, the tools ScanTools finds.
type watched struct {
	t   *testing.T
	dir string

	mu      sync.Mutex
	calls   int
	tools   map[string]DirTool
	running int // onChange calls in progress, to catch concurrency
	overlap bool
}

const testDebounce = 40 * time.Millisecond

func startWatch(t *testing.T, dir string) *watched {
	t.Helper()
	return startWatchWith(t, dir, t.Logf, watchHooks{})
}

func startWatchWith(t *testing.T, dir string, logf func(string, ...any), h watchHooks) *watched {
	t.Helper()
	w := &watched{t: t, dir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		h.ready = func() { close(ready) }
		done <- watchDir(ctx, dir, testDebounce, logf, w.onChange, h)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WatchDir returned %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("WatchDir did not return after its context was cancelled")
		}
		if w.overlap {
			t.Error("onChange ran concurrently with itself")
		}
	})
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch was not established")
	}
	return w
}

func (w *watched) onChange() {
	w.mu.Lock()
	w.running++
	if w.running > 1 {
		w.overlap = true
	}
	w.mu.Unlock()
	tools, _, err := ScanTools(w.dir)
	if err != nil {
		w.t.Errorf("ScanTools: %v", err)
	}
	w.mu.Lock()
	w.calls++
	w.tools = tools
	w.running--
	w.mu.Unlock()
}

func (w *watched) state() (calls int, names []string, tools map[string]DirTool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n := range w.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	return w.calls, names, w.tools
}

// waitTools waits until the last scan found exactly names.
func (w *watched) waitTools(names ...string) {
	w.t.Helper()
	waitFor(w.t, 5*time.Second, fmt.Sprintf("tools %q", names), func() bool {
		_, got, _ := w.state()
		return slices.Equal(got, names)
	})
}

func TestWatchDir_AddChangeRemove(t *testing.T) {
	dir := t.TempDir()
	w := startWatch(t, dir)

	writeFile(t, dir, "a.meta", `{"description": "one"}`, 0o644)
	w.waitTools("a")

	writeFile(t, dir, "a.meta", `{"description": "two"}`, 0o644)
	waitFor(t, 5*time.Second, "the changed description", func() bool {
		_, _, tools := w.state()
		return tools["a"].Parsed != nil && tools["a"].Parsed.Description == "two"
	})

	// An executable appearing beside it, and its x bit going away.
	exe := writeFile(t, dir, "a", "#!/bin/sh\n", 0o755)
	waitFor(t, 5*time.Second, "the executable", func() bool {
		_, _, tools := w.state()
		return tools["a"].Exec != ""
	})
	if err := os.Chmod(exe, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the chmod", func() bool {
		_, _, tools := w.state()
		return tools["a"].Exec == ""
	})

	writeFile(t, dir, "b.meta", `{}`, 0o644)
	w.waitTools("a", "b")
	if err := os.Remove(filepath.Join(dir, "a.meta")); err != nil {
		t.Fatal(err)
	}
	w.waitTools("b")
	if err := os.Rename(filepath.Join(dir, "b.meta"), filepath.Join(dir, "c.meta")); err != nil {
		t.Fatal(err)
	}
	w.waitTools("c")
}

// A host whose inotify instances are spent (fs.inotify.max_user_instances,
// 128 by default, shared by every program of the user) still has its
// tools directory followed: WatchDir says why and reads it periodically.
func TestWatchDir_PollsWithoutInotify(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "tools")
	writeFile(t, dir, "x.meta", `{}`, 0o644)
	var logged sync.Map
	logf := func(f string, a ...any) { logged.Store(fmt.Sprintf(f, a...), true) }
	w := startWatchWith(t, dir, logf, watchHooks{
		newWatcher: func() (*fsnotify.Watcher, error) { return nil, syscall.EMFILE },
		pollEvery:  testDebounce,
	})
	found := false
	logged.Range(func(k, _ any) bool {
		found = found || strings.Contains(k.(string), "cannot watch with inotify (too many open files")
		return true
	})
	if !found {
		t.Error("the fallback to polling was not logged")
	}
	writeFile(t, dir, "y.meta", `{}`, 0o644)
	w.waitTools("x", "y")
	writeFile(t, dir, "y.meta", `{"description":"longer now"}`, 0o644)
	waitFor(t, 5*time.Second, "the changed tool", func() bool {
		_, _, tools := w.state()
		return strings.Contains(string(tools["y"].Meta), "longer now")
	})
	if err := os.Remove(filepath.Join(dir, "x.meta")); err != nil {
		t.Fatal(err)
	}
	w.waitTools("y")
	// The directory goes away and comes back.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	w.waitTools()
	writeFile(t, dir, "z.meta", `{}`, 0o644)
	w.waitTools("z")
}

func TestWatchDir_DirAppearsLater(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "tools")
	w := startWatch(t, dir)

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a call for the new directory", func() bool {
		calls, _, _ := w.state()
		return calls >= 1
	})
	writeFile(t, dir, "x.meta", `{}`, 0o644)
	w.waitTools("x")

	// The directory goes away (the tools with it), and comes back.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	w.waitTools()
	writeFile(t, dir, "y.meta", `{}`, 0o644)
	w.waitTools("y")
	writeFile(t, dir, "z.meta", `{}`, 0o644)
	w.waitTools("y", "z")
}

func TestWatchDir_ParentAppearsLater(t *testing.T) {
	// Neither the directory nor its parent exist: WatchDir polls.
	dir := filepath.Join(t.TempDir(), "config", "tools")
	w := startWatch(t, dir)
	writeFile(t, dir, "x.meta", `{}`, 0o644)
	w.waitTools("x")
	writeFile(t, dir, "y.meta", `{}`, 0o644)
	w.waitTools("x", "y")
}

func TestWatchDir_FloodGivesFewCalls(t *testing.T) {
	dir := t.TempDir()
	w := startWatch(t, dir)
	start := time.Now()
	const n = 300
	for i := range n {
		writeFile(t, dir, fmt.Sprintf("t%03d.meta", i), `{}`, 0o644)
	}
	elapsed := time.Since(start)
	waitFor(t, 10*time.Second, "all the files", func() bool {
		_, names, _ := w.state()
		return len(names) == n
	})
	calls, _, _ := w.state()
	// One call per burst, plus one per max-delay period the burst lasted.
	allowed := 2 + int(elapsed/(time.Duration(watchMaxDelayFactor)*testDebounce))
	if calls > allowed {
		t.Errorf("%d files written in %s gave %d calls, want at most %d", n, elapsed, calls, allowed)
	}
}

func TestWatchDir_EditorRenameSave(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "x.meta", `{"description": "v0"}`, 0o644)
	w := startWatch(t, dir)
	start := time.Now()
	const saves = 10
	for i := 1; i <= saves; i++ {
		// The way vim (backupcopy=no) and many editors save: write a
		// temporary file, then rename it over the original.
		tmp := writeFile(t, dir, ".x.meta.swp", fmt.Sprintf(`{"description": "v%d"}`, i), 0o644)
		if err := os.Rename(tmp, filepath.Join(dir, "x.meta")); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	waitFor(t, 5*time.Second, "the last save", func() bool {
		_, _, tools := w.state()
		return tools["x"].Parsed != nil && tools["x"].Parsed.Description == fmt.Sprintf("v%d", saves)
	})
	calls, _, _ := w.state()
	allowed := 2 + int(elapsed/(time.Duration(watchMaxDelayFactor)*testDebounce))
	if calls > allowed {
		t.Errorf("%d saves in %s gave %d calls, want at most %d", saves, elapsed, calls, allowed)
	}
}

func TestWatchDir_NoCallWithoutChange(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "x.meta", `{}`, 0o644)
	w := startWatch(t, dir)
	// A change in a subdirectory is not a change of dir's entries... but
	// creating the subdirectory is; after that, nothing.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the call for the new subdirectory", func() bool {
		calls, _, _ := w.state()
		return calls == 1
	})
	writeFile(t, sub, "deep.meta", `{}`, 0o644)
	// Give a wrong call every chance to happen, then check none did. This
	// waits for an absence, so it is a bounded wait, not a poll.
	deadline := time.Now().Add(10 * testDebounce)
	for time.Now().Before(deadline) {
		if calls, _, _ := w.state(); calls != 1 {
			t.Fatalf("%d calls, want 1: a file in a subdirectory changed nothing", calls)
		}
		time.Sleep(testDebounce / 4)
	}
}

func TestWatchDir_ReturnsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchDir(ctx, t.TempDir(), time.Millisecond, nil, func() {}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchDir = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchDir did not return")
	}
}

func TestWatchDir_NotADirectory(t *testing.T) {
	parent := t.TempDir()
	path := writeFile(t, parent, "tools", "a file", 0o644)
	var logged sync.Map
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	calls := 0
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = watchDir(ctx, path, testDebounce, func(f string, a ...any) { logged.Store(fmt.Sprintf(f, a...), true) },
			func() { mu.Lock(); calls++; mu.Unlock() }, watchHooks{ready: func() { close(ready) }})
	}()
	<-ready
	found := false
	logged.Range(func(k, _ any) bool { found = found || strings.Contains(k.(string), "not a directory"); return true })
	if !found {
		t.Error("a file where the directory should be was not logged")
	}
	// Replace the file by a directory: WatchDir picks it up.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "x.meta", `{}`, 0o644)
	waitFor(t, 5*time.Second, "a call once the directory exists", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls >= 1
	})
	cancel()
	<-done
}
