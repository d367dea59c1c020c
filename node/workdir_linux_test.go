package node

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSession_CwdOnKernelFS(t *testing.T) {
	// A cwd is granted writable to the session's tools, so a cwd on a
	// kernel filesystem would hand them kernel interfaces: on cgroupfs a
	// tool, even without capabilities, can write its pid into the root
	// cgroup's cgroup.procs (root's, mode 644), out of its call's cgroup
	// and out of reach of the kill that ends the call.
	n, _ := procNode(t, nil, nil)
	for _, tc := range []struct{ cwd, want string }{
		{"/proc/self", "on the kernel's proc filesystem"},
		{"/sys/fs/cgroup", "on the kernel's sysfs filesystem"},
		{"/dev", "on the kernel's device filesystem"},
	} {
		if _, err := n.NewSession("name=s cwd=" + tc.cwd); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cwd=%s: err = %v, want %q", tc.cwd, err, tc.want)
		}
	}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if _, err := n.NewSession("name=shm cwd=/dev/shm"); err != nil {
			t.Errorf("cwd=/dev/shm (an ordinary tmpfs): %v", err)
		}
	}

	// The same hierarchy mounted elsewhere is told by its type.
	if os.Geteuid() != 0 {
		t.Skip("mounting cgroup2 needs root")
	}
	mnt := t.TempDir()
	if err := unix.Mount("none", mnt, "cgroup2", 0, ""); err != nil {
		t.Skipf("cgroup2 cannot be mounted here: %v", err)
	}
	t.Cleanup(func() {
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	if _, err := n.NewSession("name=cg cwd=" + mnt); err == nil || !strings.Contains(err.Error(), "on the kernel's cgroup2 filesystem") {
		t.Errorf("cwd on a cgroup2 mount: err = %v", err)
	}

	t.Run("control", func(t *testing.T) {
		// With the rule off, a sandboxed tool leaves its call's cgroup.
		refuseKernelFS = false
		t.Cleanup(func() { refuseKernelFS = true })
		n, _ := procNode(t, nil, map[string]string{
			"escape": `{"cmd":"grep '^0::' /proc/self/cgroup; echo $$ > cgroup.procs && grep '^0::' /proc/self/cgroup"}`,
		})
		out, err := callIn(t, n, "s", mnt, "escape")
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 2 {
			t.Fatalf("the escape did not work with the rule off: (%q, %v)", out, err)
		}
		if lines[0] == "0::/" {
			t.Skip("calls do not run in a cgroup v2 of their own here")
		}
		if lines[1] != "0::/" {
			t.Fatalf("the tool stayed in %s with the rule off, want 0::/", lines[1])
		}
	})
}
