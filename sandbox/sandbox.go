package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Config configures a Sandbox. Zero values take the defaults.
type Config struct {
	// Off runs tools unconfined: no Landlock, no cgroup, no process
	// limit; only the process group is killed (-yolo).
	Off        bool
	ScratchDir string // parent of the per-call scratch directories; default os.TempDir()
	MaxProcs   int    // processes one call may have at once, where a pids controller exists; default DefaultMaxProcs

	// Protected are trees and files a sandboxed tool may not read (the
	// node's data directory, its key and certificate files); ScratchDir is
	// always among them, so a call sees its own scratch directory only.
	Protected []string
	// Readable are trees a sandboxed tool may read and execute even when
	// they lie in a protected one (a tools directory inside the data
	// directory, as -examples makes it).
	Readable []string
}

// Sandbox starts the processes of tool calls, each confined (unless
// Config.Off) and held until none of it is left. It is safe for
// concurrent use.
type Sandbox struct {
	cfg  Config
	view *fsView // what sandboxed tools may read; nil when Off

	treesMu sync.Mutex
	trees   map[treeKey]*fsView // views of cwds around protected paths; guarded by treesMu

	readyOnce sync.Once
	readyErr  error

	containOnce sync.Once
	contain     *containment // nil when Off

	prep prepState // calls made ready ahead (prepare_linux.go)
}

// New returns a Sandbox for cfg, with defaults filled in.
func New(cfg Config) *Sandbox {
	if cfg.MaxProcs <= 0 {
		cfg.MaxProcs = DefaultMaxProcs
	}
	if cfg.ScratchDir == "" {
		cfg.ScratchDir = os.TempDir()
	}
	if abs, err := filepath.Abs(cfg.ScratchDir); err == nil {
		cfg.ScratchDir = abs
	}
	s := &Sandbox{cfg: cfg}
	if !cfg.Off {
		s.view = newFSView(append(slices.Clone(cfg.Protected), cfg.ScratchDir))
	}
	return s
}

// ScratchDir is the parent of the calls' scratch directories, absolute.
func (s *Sandbox) ScratchDir() string { return s.cfg.ScratchDir }

// Call is one process to start for a tool call.
type Call struct {
	Argv []string // Argv[0] is an absolute path
	// Dir is the session's working directory, absolute; "": the call's
	// scratch directory.
	Dir      string
	ReadOnly bool     // Dir may be read but not written (a session of scope "read")
	Network  bool     // the tool may open TCP and UDP sockets ("network": true)
	Env      []string // the environment; Run adds TMPDIR, the call's scratch directory
	Stdin    []byte
	// OutputCap is how many bytes of standard output are kept; past it
	// the call's processes are killed.
	OutputCap int64
}

// Result is what became of a call's process.
type Result struct {
	Stdout     []byte
	StderrTail string // the last StderrTail bytes of its standard error, trimmed
	Status     int    // exit status; 128+N when killed by signal N
	Signal     int    // the signal that ended it, 0 if it exited
	OverCap    bool   // standard output went over Call.OutputCap; the call was killed
	Killed     error  // ctx's error when the call was killed for ctx
}

// Run starts c's process and returns once it and every process it
// started are gone.
//
// The process gets a scratch directory of its own, made for the call (or
// ahead of it) and removed after it, as TMPDIR and, without Dir, as its
// working directory; c.Stdin on standard input; descriptors 0-2, and 3: the call's side channel (lines.go), only. It
// leads a process group of its own, in a cgroup of its own where the host
// has one. Unless Off it is confined by Landlock: it reads and executes
// everything but the protected trees (its executable and Dir included,
// wherever they are), writes the scratch directory and Dir (unless
// ReadOnly) and the usual devices, and, without Network, opens no TCP or
// UDP socket and no MPTCP socket. Going past the output cap or ctx being
// done kills the whole call (Result.OverCap, Result.Killed); when the
// leader exits, what is left of the call is killed too.
//
// An error is for a call that could not start (its scratch directory, its
// cgroup, its thread, the sandbox, the exec); nothing of it is left then.
func (s *Sandbox) Run(ctx context.Context, c Call) (Result, error) {
	var sb *sandboxSpec // nil: not sandboxed
	var pre *prepared   // the call made ready ahead, if one was
	if !s.cfg.Off {
		sb = &sandboxSpec{view: s.view, readable: s.cfg.Readable, noNet: !c.Network}
		// The executable needs a rule of its own only where the view
		// does not already grant it (inside a protected tree).
		if !s.view.grants(c.Argv[0]) {
			sb.ro = append(sb.ro, c.Argv[0])
		}
		if c.Dir != "" {
			s.grantCwd(sb, c.Dir, !c.ReadOnly)
		}
		pre = s.takePrepared(sb)
	}
	// What can wait until the call has answered is done after it, in the
	// background: removing the scratch directory and the cgroups.
	var after []func()
	defer func() { s.afterCall(after) }()
	scratch := ""
	if pre != nil {
		scratch = pre.scratch
		defer pre.closeRuleset()
	} else {
		var err error
		if err = os.MkdirAll(s.cfg.ScratchDir, 0o700); err == nil {
			scratch, err = os.MkdirTemp(s.cfg.ScratchDir, "call-")
		}
		if err != nil {
			return Result{}, fmt.Errorf("scratch directory: %w", err)
		}
		if sb != nil {
			sb.scratch = scratch
		}
	}
	after = append(after, func() { removeAll(scratch) })
	dir := c.Dir
	if dir == "" {
		dir = scratch
	}
	var started func()
	if sb != nil {
		// The next calls are made ready after this one has answered
		// (below), not beside its tool: on a host with few cores that
		// work takes a core the tool or the caller needs. Only when no
		// call of this kind is left ready (calls running at once) does
		// it start now, for the calls already on their way.
		started = func() { s.refill(sb, true) }
	}
	res, err := runProcess(ctx, proc{
		argv:    c.Argv,
		dir:     dir,
		env:     append(c.Env[:len(c.Env):len(c.Env)], "TMPDIR="+scratch),
		stdin:   c.Stdin,
		outCap:  c.OutputCap,
		sb:      sb,
		cg:      s.containment(),
		group:   pre.callGroup(),
		thread:  pre.callThread(),
		started: started,
		after:   func(f func()) { after = append(after, f) },
	})
	if sb != nil {
		// After the cgroups are taken back, so that the call made ready
		// takes them from the pool rather than making new ones.
		after = append(after, func() { s.refill(sb, false) })
	}
	if err != nil {
		return Result{}, fmt.Errorf("cannot start %s: %w", c.Argv[0], err)
	}
	return res, nil
}

// afterCall does the work of a call that could wait until it answered, in
// order, in the background; Close waits for it.
func (s *Sandbox) afterCall(work []func()) {
	if len(work) == 0 {
		return
	}
	run := func() {
		for _, f := range work {
			f()
		}
	}
	if !s.background(run) {
		run()
	}
}

// containment finds, at the first call, how this host can hold a call's
// processes (see detectContainment); nil when Off.
func (s *Sandbox) containment() *containment {
	s.containOnce.Do(func() {
		if !s.cfg.Off {
			s.contain = detectContainment(s.cfg.MaxProcs)
		}
	})
	return s.contain
}

// Close removes what the Sandbox made on the host (its cgroups, the calls
// made ready) once the work left after calls is done. Calls still running
// are not waited for.
func (s *Sandbox) Close() error {
	s.closePrepared()
	// The read view and the cwd views hold a descriptor per rule (a
	// node's hundreds): a process that makes and closes Sandboxes, a test
	// binary's nodes, would otherwise run out of descriptors.
	if s.view != nil {
		s.view.close()
	}
	s.treesMu.Lock()
	for k, v := range s.trees {
		v.close()
		delete(s.trees, k)
	}
	s.treesMu.Unlock()
	s.containOnce.Do(func() {}) // none made after Close
	if s.contain == nil {
		return nil
	}
	return s.contain.close()
}

// kernelSandbox is Status; tests replace it to play a kernel without
// Landlock.
var kernelSandbox = Status

// Ready reports whether confined calls can run (always, when Off),
// checking the kernel once; its error wraps ErrNoSandbox.
func (s *Sandbox) Ready() error {
	if s.cfg.Off {
		return nil
	}
	s.readyOnce.Do(func() {
		if _, err := kernelSandbox(); err != nil {
			s.readyErr = fmt.Errorf("cannot run tools: %w; use -yolo to run them unsandboxed", err)
		}
	})
	return s.readyErr
}

// removeAll removes a scratch directory, first making writable any
// directory the tool made read-only.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// sandboxSpec is what one call's tool may touch under the sandbox.
type sandboxSpec struct {
	view    *fsView  // read and execute: everything but the protected trees
	scratch string   // read and write: its scratch directory
	rw      []string // read and write: its session's cwd
	ro      []string // read even when protected: its executable, a cwd of scope read
	// readable are read even when protected, for every call alike
	// (Config.Readable): granted with the ruleset made ahead.
	readable []string
	// trees are granted by their views: a cwd around a protected path.
	// The views of transient are closed once applied.
	trees, transient []*fsView

	// ruleset, when prepared, is a Landlock ruleset made ahead of the
	// call (see prepare_linux.go) that already grants view, trees,
	// scratch, readable and the writable devices; rw and ro are added to
	// it on the call's thread. The Run that took it closes it.
	ruleset  int
	prepared bool

	// noNet: the tool lacks "network": true, so it opens no TCP
	// connection and binds no TCP port (a Landlock layer of its own,
	// ABI 4+; see netLayer).
	noNet bool
}
