package registry

import (
	"os/exec"
	"runtime"
)

// startSandboxed starts cmd confined by Landlock: read and execute
// everywhere, write only under rw and to a few character devices.
//
// Landlock confines a thread and everything it starts, and no program can
// lift it. So the policy is applied to a fresh OS thread of the node, that
// thread forks and execs the tool (Go forks on the calling thread), and
// then the thread ends: the goroutine never unlocks it, so the runtime
// destroys it when the goroutine returns and no other goroutine ever runs
// confined. Nothing but the tool is restricted, and no second program
// starts on the call's path: re-executing the node as a launcher cost
// about 10 ms a call, most of it the package initialisation of the node
// binary, where this costs a thread and three system calls.
func startSandboxed(cmd *exec.Cmd, rw []string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the confined thread must die with this goroutine.
		if err := restrictThread(rw); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
