package registry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Timing of WatchDir.
var (
	// watchPollEvery is how often a missing directory is looked for when
	// its parent cannot be watched either.
	watchPollEvery = 500 * time.Millisecond
	// watchMaxDelayFactor bounds how long a stream of events that never
	// settles can delay onChange: at most this many debounce periods after
	// the first event of a burst.
	watchMaxDelayFactor = 10
	// watchFallbackEvery is how often a directory is read again when no
	// inotify instance can be had (the host's fs.inotify.max_user_instances
	// is spent): a second, so that a change still reaches the cluster
	// promptly, at the price of waking the process each second.
	watchFallbackEvery = time.Second
)

// WatchDir calls onChange after changes in dir settle for debounce: the
// creation, write, removal, rename or chmod of any entry (not of entries
// of subdirectories). onChange is called from WatchDir's own goroutine,
// never concurrently; a slow onChange delays, and coalesces, later calls.
// A burst of events (an editor saving by rename, a copy of many files)
// gives one call; a stream that never settles gives one call per
// watchMaxDelayFactor debounce periods.
//
// If dir does not exist (or disappears), WatchDir waits for it to appear,
// watching its parent and polling, and then calls onChange. No call is
// made at start when dir exists: the caller scans it itself. Errors from
// fsnotify are logged through logf (nil: dropped), not returned. When no
// inotify instance can be had (the host's limit is spent by other
// programs), WatchDir says so through logf and reads dir every
// watchFallbackEvery instead, calling onChange when its entries changed.
// WatchDir returns nil when ctx is done.
func WatchDir(ctx context.Context, dir string, debounce time.Duration, logf func(format string, args ...any), onChange func()) error {
	return watchDir(ctx, dir, debounce, logf, onChange, watchHooks{})
}

// watchHooks are watchDir's hooks for tests.
type watchHooks struct {
	// ready, if not nil, is called once the first watch (of dir, or of
	// its parent, or the first read when polling) is in place, so that
	// changes made after it are seen.
	ready func()
	// newWatcher replaces fsnotify.NewWatcher; pollEvery replaces
	// watchFallbackEvery.
	newWatcher func() (*fsnotify.Watcher, error)
	pollEvery  time.Duration
}

func watchDir(ctx context.Context, dir string, debounce time.Duration, logf func(format string, args ...any), onChange func(), h watchHooks) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if debounce <= 0 {
		debounce = time.Millisecond
	}
	if h.newWatcher == nil {
		h.newWatcher = fsnotify.NewWatcher
	}
	if h.pollEvery <= 0 {
		h.pollEvery = watchFallbackEvery
	}
	ready := h.ready
	w, err := h.newWatcher()
	if err != nil {
		logf("watch %s: cannot watch with inotify (%v; is fs.inotify.max_user_instances spent?): reading the directory every %v instead", dir, err, h.pollEvery)
		pollDir(ctx, filepath.Clean(dir), h.pollEvery, onChange, ready)
		return nil
	}
	defer w.Close()

	dw := &dirWatch{w: w, dir: filepath.Clean(dir), logf: logf}
	dw.parent = filepath.Dir(dw.dir)
	if !dw.watch() {
		dw.wait()
	}
	if ready != nil {
		ready()
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var pending bool
	var burstStart time.Time
	maxDelay := time.Duration(watchMaxDelayFactor) * debounce
	changed := func() {
		now := time.Now()
		if !pending {
			pending, burstStart = true, now
		}
		fire := now.Add(debounce)
		if limit := burstStart.Add(maxDelay); fire.After(limit) {
			fire = limit
		}
		timer.Reset(time.Until(fire))
	}

	// The poll only serves a directory not watched yet; while it is
	// watched its channel is nil, so the ticker never wakes the process
	// (a timer nobody waits on is not run).
	poll := time.NewTicker(watchPollEvery)
	defer poll.Stop()
	for {
		var pollC <-chan time.Time
		if !dw.watching {
			pollC = poll.C
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
			pending = false
			onChange()
		case <-pollC:
			if !dw.watching && dw.watch() {
				changed()
			}
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if dw.handle(ev) {
				changed()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				logf("watch %s: event queue overflowed; rescanning", dw.dir)
				changed()
				continue
			}
			logf("watch %s: %v", dw.dir, err)
		}
	}
}

// dirWatch tracks whether the directory itself is watched or awaited.
type dirWatch struct {
	w           *fsnotify.Watcher
	dir, parent string
	logf        func(string, ...any)
	watching    bool // dir is watched
	onParent    bool // parent is watched, waiting for dir to appear
	notDir      bool // dir exists but is not a directory (logged once)
}

// watch starts watching dir when it is a directory, and stops watching
// the parent. It reports whether dir is now watched.
func (d *dirWatch) watch() bool {
	fi, err := os.Stat(d.dir)
	if err != nil {
		return false
	}
	if !fi.IsDir() {
		if !d.notDir {
			d.logf("watch %s: not a directory; waiting for a directory there", d.dir)
			d.notDir = true
		}
		return false
	}
	d.notDir = false
	if err := d.w.Add(d.dir); err != nil {
		d.logf("watch %s: %v", d.dir, err)
		return false
	}
	d.watching = true
	if d.onParent {
		_ = d.w.Remove(d.parent) // the parent may be gone; nothing to undo then
		d.onParent = false
	}
	return true
}

// wait marks dir as awaited and watches its parent if it can.
func (d *dirWatch) wait() {
	d.watching = false
	if d.onParent || d.parent == d.dir {
		return
	}
	if err := d.w.Add(d.parent); err == nil {
		d.onParent = true
	}
}

// handle digests one event and reports whether it is a change of dir's
// contents (or of its existence).
func (d *dirWatch) handle(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	if name == d.dir {
		if ev.Op.Has(fsnotify.Remove) || ev.Op.Has(fsnotify.Rename) {
			// dir itself went away (or was replaced): rewatch or wait.
			if d.watching {
				_ = d.w.Remove(d.dir) // inotify may have dropped it already
				d.watching = false
			}
			if !d.watch() {
				d.wait()
			}
			return true
		}
		if !d.watching && d.watch() {
			return true // dir appeared under the watched parent
		}
		return d.watching
	}
	if !d.watching {
		return false // a sibling of dir changed in the parent
	}
	return filepath.Dir(name) == d.dir
}

// pollDir calls onChange whenever a read of dir, every period, finds its
// entries changed: one added, removed, or changed in size, mode or
// modification time, or dir itself appearing or going away.
func pollDir(ctx context.Context, dir string, period time.Duration, onChange, ready func()) {
	last := dirState(dir)
	if ready != nil {
		ready()
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := dirState(dir); now != last {
			last = now
			onChange()
		}
	}
}

// dirState is a digest of dir's entries as pollDir compares them, or ""
// when dir cannot be read.
func dirState(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintln(h, "dir")
	for _, e := range ents { // sorted by name
		fi, err := e.Info()
		if err != nil {
			continue // gone since the read: the next read tells
		}
		fmt.Fprintf(h, "%q %d %v %d\n", e.Name(), fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
	}
	return string(h.Sum(nil))
}
