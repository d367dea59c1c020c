//go:build linux

package sandbox

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitReaps tells whether waitLeader reaps the process (then cmd.Wait
// must not be called again).
const waitReaps = false

// waitLeader blocks until cmd's process has exited, without reaping it:
// while it is a zombie its pid, and so its process group id, cannot be
// reused, which makes killing the group afterwards safe.
func waitLeader(cmd *exec.Cmd) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// procAttr puts the tool in a process group of its own, so a timeout can
// kill all of it, and has the kernel kill it if the thread that started
// it ends: that thread lives until the tool is reaped, unless the node
// dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
