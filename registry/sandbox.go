package registry

import (
	"os/exec"
	"runtime"
)

// sandboxSpec is what one call's tool may touch under the sandbox.
type sandboxSpec struct {
	view *fsView  // read and execute: everything but the protected trees
	rw   []string // read and write: its scratch directory, its session's cwd
	ro   []string // read even when protected: its executable, a cwd of scope read
	// trees are granted by their views: a cwd around a protected path.
	// The views of transient are closed once applied.
	trees, transient []*fsView

	ablation // protections left out, for benchmarks measuring each one
}

// ablation leaves protections out of the sandbox. Only benchmarks set it,
// to price each protection; a Runner's is always zero.
type ablation struct {
	noView    bool // read everything, protected trees included
	noScopes  bool // no signal and abstract unix socket scoping
	noCloexec bool // leave the node's descriptors as they are
	noCapDrop bool // a tool of a node run as root keeps root's capabilities
}

// startOnThread starts cmd from an OS thread of its own, locked to a
// goroutine that lives until release is called, once the tool has been
// reaped. With sb non-nil the tool is confined by Landlock (see
// restrictThread).
//
// Landlock confines a thread and everything it starts, and no program can
// lift it. So the policy is applied to that thread, the thread forks and
// execs the tool (Go forks on the calling thread), and when released the
// thread ends: the goroutine never unlocks it, so the runtime destroys it
// and no other goroutine ever runs confined. Nothing but the tool is
// restricted, and no second program starts on the call's path:
// re-executing the node as a launcher cost about 10 ms a call, most of it
// the node binary's package initialisation, where this costs a thread and
// three system calls.
//
// The thread lives as long as the tool for a second reason: the tool gets
// its parent-death signal (SIGKILL, see proc_linux.go) when the thread
// that started it ends, so a tool never outlives its node, and never dies
// early because the thread that forked it went away.
//
// onThread, when not nil, runs on that thread before it is confined, and
// the undo it returns (if any) right after the fork: the call's cgroup
// placement, see callGroup.onThread.
func startOnThread(cmd *exec.Cmd, sb *sandboxSpec, onThread func() (undo func(), err error)) (release func(), err error) {
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: a confined thread must die with this goroutine.
		var undo func()
		if onThread != nil {
			var err error
			if undo, err = onThread(); err != nil {
				errc <- err
				return
			}
		}
		if sb != nil {
			if err := restrictThread(sb); err != nil {
				errc <- err
				return
			}
		}
		err := cmd.Start()
		if undo != nil {
			undo()
		}
		if err != nil {
			errc <- err
			return
		}
		errc <- nil
		<-done
	}()
	if err := <-errc; err != nil {
		return nil, err
	}
	return func() { close(done) }, nil
}

// The main goroutine keeps the process's first thread. A goroutine of
// startOnThread that happened to run there would confine that thread for
// good: the runtime cannot end the first thread, so it parks it, and the
// kernel judges signals, ptrace and /proc/PID of the node by that thread,
// the thread group leader. The tool of that call would then share the
// node's domain and could read and signal the node. Locked here, in an
// init function, main runs on the first thread and no other goroutine
// ever does.
func init() { runtime.LockOSThread() }
