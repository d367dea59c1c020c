package sandbox

import (
	"os/exec"
	"runtime"
)

// callThread is an OS thread of its own for one call: it starts the tool
// and ends after it. With a sandbox the tool is confined by Landlock (see
// restrictThread).
//
// Landlock confines a thread and everything it starts, and no program can
// lift it. So the policy is applied to that thread, the thread forks and
// execs the tool (Go forks on the calling thread), and when released the
// thread ends: its goroutine never unlocks it, so the runtime destroys it
// and no other goroutine ever runs confined. Nothing but the tool is
// restricted, and no second program starts on the call's path:
// re-executing the node as a launcher cost about 10 ms a call, most of it
// the node binary's package initialisation, where this costs a thread and
// a few system calls.
//
// The thread lives as long as the tool for a second reason: the tool gets
// its parent-death signal (SIGKILL, see proc_linux.go) when the thread
// that started it ends, so a tool never outlives its node, and never dies
// early because the thread that forked it went away.
//
// A thread is made (newCallThread) before its call's tool is known, either
// on the call's path or ahead of the call (prepare_linux.go): what does not
// depend on the tool is done then — the call's cgroup placement, and under
// the sandbox the capabilities dropped and no_new_privs — and the rest
// when the call hands its tool over (start): the rules of its cwd and
// executable, landlock_restrict_self, the fork.
type callThread struct {
	jobs chan threadJob // one job, or closed: the thread is not used
}

type threadJob struct {
	cmd  *exec.Cmd
	sb   *sandboxSpec
	errc chan error    // the start's outcome
	done chan struct{} // closed when the tool has been reaped
}

// newCallThread starts a thread for one call and returns once it is ready.
// It first joins the call's cgroups that place threads (group.join). With
// sandboxed, the thread then drops what the tool must not have (see
// prepareThread).
func newCallThread(sandboxed bool, group *callGroup) (*callThread, error) {
	t := &callThread{jobs: make(chan threadJob, 1)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: a confined thread must die with this goroutine.
		err := func() error {
			if err := group.join(); err != nil {
				return err
			}
			if sandboxed {
				return prepareThread()
			}
			return nil
		}()
		ready <- err
		job, ok := <-t.jobs
		if err != nil || !ok {
			return
		}
		if job.sb != nil {
			err = restrictThread(job.sb)
		}
		if err == nil {
			err = job.cmd.Start()
		}
		job.errc <- err
		if err == nil {
			<-job.done
		}
	}()
	if err := <-ready; err != nil {
		close(t.jobs)
		return nil, err
	}
	return t, nil
}

// start starts cmd on the thread, confined by sb when not nil (the thread
// must have been made sandboxed then). release, once the tool has been
// reaped, lets the thread end.
func (t *callThread) start(cmd *exec.Cmd, sb *sandboxSpec) (release func(), err error) {
	job := threadJob{cmd: cmd, sb: sb, errc: make(chan error, 1), done: make(chan struct{})}
	t.jobs <- job
	if err := <-job.errc; err != nil {
		return nil, err
	}
	return func() { close(job.done) }, nil
}

// discard ends a thread that started nothing.
func (t *callThread) discard() { close(t.jobs) }

// The main goroutine keeps the process's first thread. A goroutine of
// newCallThread that happened to run there would confine that thread for
// good: the runtime cannot end the first thread, so it parks it, and the
// kernel judges signals, ptrace and /proc/PID of the node by that thread,
// the thread group leader. The tool of that call would then share the
// node's domain and could read and signal the node. Locked here, in an
// init function, main runs on the first thread and no other goroutine
// ever does.
func init() { runtime.LockOSThread() }
