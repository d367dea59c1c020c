//go:build linux

package registry

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// SandboxStatus reports whether this kernel can sandbox tools: the
// Landlock ABI version (≥ 1), or an error wrapping ErrNoSandbox whose text
// is a sentence saying why not.
func SandboxStatus() (abi int, err error) {
	abi, err = llsys.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return 0, fmt.Errorf("%w: this kernel has no Landlock support (it is older than Linux 5.13 or built without CONFIG_SECURITY_LANDLOCK)", ErrNoSandbox)
	case errors.Is(err, syscall.EOPNOTSUPP):
		return 0, fmt.Errorf("%w: Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)", ErrNoSandbox)
	case err != nil:
		return 0, fmt.Errorf("%w: cannot query the Landlock ABI version: %v", ErrNoSandbox, err)
	case abi < 1:
		return abi, fmt.Errorf("%w: the kernel reports Landlock ABI version %d", ErrNoSandbox, abi)
	}
	return abi, nil
}

// writableDevices are the device files every tool may open for writing:
// the sinks and sources programs expect to use freely.
var writableDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom"}

// restrictThread applies the tool policy to the calling OS thread: read
// and execute everywhere, write only under rw and to writableDevices. The
// caller must have locked its goroutine to the thread, start the tool from
// it, and let the thread die: the tool inherits the policy and cannot lift
// it. Restricting one thread instead of all (go-landlock's RestrictPaths
// confines every thread of the runtime) leaves the node itself free.
func restrictThread(rw []string) error {
	abi, err := SandboxStatus()
	if err != nil {
		// BestEffort would "succeed" without restricting anything here:
		// refuse instead of running unsandboxed.
		return err
	}
	rwRule := landlock.RWDirs(rw...)
	if abi >= 2 {
		// Let tools move files between their own directories. (Asking for
		// refer on an ABI 1 kernel would make BestEffort drop the whole
		// sandbox, hence the check.)
		rwRule = rwRule.WithRefer()
	}
	fd, flags, err := landlock.V5.BestEffort().NewRulesetFD(
		landlock.RODirs("/"),
		rwRule,
		landlock.RWFiles(writableDevices...).WithIoctlDev().IgnoreIfMissing(),
	)
	if err != nil {
		return err
	}
	if fd < 0 {
		return fmt.Errorf("%w: Landlock reported nothing to enforce", ErrNoSandbox)
	}
	defer syscall.Close(fd)
	// Landlock requires no_new_privs (or CAP_SYS_ADMIN); it is per thread,
	// and inherited across execve.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
