package calls

import (
	"golang.org/x/sys/unix"
)

// kernelFS names the kernel's own filesystems, whose files are
// interfaces rather than data: a writable cwd on one of them would let a
// tool move itself out of its call's cgroup (cgroup.procs), write kernel
// settings (/proc/sys, /sys) or reach devices. DESIGN §7 grants a call
// write to its session's cwd, so such a cwd is refused whatever its path
// (a bind mount of /sys/fs/cgroup elsewhere included).
var kernelFS = map[int64]string{
	unix.PROC_SUPER_MAGIC:    "proc",
	unix.SYSFS_MAGIC:         "sysfs",
	unix.CGROUP_SUPER_MAGIC:  "cgroup",
	unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.DEBUGFS_MAGIC:       "debugfs",
	unix.TRACEFS_MAGIC:       "tracefs",
	unix.SECURITYFS_MAGIC:    "securityfs",
	unix.BPF_FS_MAGIC:        "bpf",
	unix.DEVPTS_SUPER_MAGIC:  "devpts",
	unix.SELINUX_MAGIC:       "selinuxfs",
	unix.SMACK_MAGIC:         "smackfs",
	unix.PSTOREFS_MAGIC:      "pstore",
	unix.EFIVARFS_MAGIC:      "efivarfs",
	unix.HUGETLBFS_MAGIC:     "hugetlbfs",
	unix.NSFS_MAGIC:          "nsfs",
	unix.BINFMTFS_MAGIC:      "binfmt_misc",
	unix.AUTOFS_SUPER_MAGIC:  "autofs",
}

// kernelFSOf names the kernel filesystem dir lies on, or "" when it lies
// on an ordinary one (or cannot be told: the other rules still hold).
func kernelFSOf(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return ""
	}
	return kernelFS[int64(st.Type)]
}
