//go:build !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

// waitReaps tells whether waitLeader reaps the process (then cmd.Wait
// must not be called again).
const waitReaps = true

// waitLeader blocks until cmd's process has exited, and reaps it.
func waitLeader(cmd *exec.Cmd) {
	_ = cmd.Wait() // the status is read from ProcessState
}

// procAttr puts the tool in a process group of its own.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
