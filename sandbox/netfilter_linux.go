//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's TCP rules cover IPPROTO_TCP sockets only: an MPTCP socket
// (IPPROTO_MPTCP) connects to any TCP listener, falling back to plain
// TCP, and binds any port, whatever the ruleset says. So a tool without
// "network": true also gets a seccomp filter that refuses to make an
// MPTCP socket (EPROTONOSUPPORT, on which programs such as Go's net
// package fall back to TCP, which Landlock then refuses). A 32-bit
// program's socketcall(2), whose arguments a filter cannot read, is
// refused whole.

// ipprotoMPTCP is IPPROTO_MPTCP.
const ipprotoMPTCP = 262

// seccomp_data offsets: nr, arch, then six 64-bit arguments (the low
// half first on these little-endian machines).
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg2 = 16 + 2*8
)

// socketCalls is, per architecture the filter knows, the number of
// socket(2) (and of socketcall(2), -1 when the architecture has none).
type socketCalls struct {
	arch       uint32
	socket     uint32
	socketcall int64
}

// netFilterArches are the architectures a tool of this node may run as:
// the native one, and the 32-bit one a 64-bit kernel also runs.
func netFilterArches() ([]socketCalls, error) {
	switch runtime.GOARCH {
	case "amd64":
		return []socketCalls{
			{unix.AUDIT_ARCH_X86_64, unix.SYS_SOCKET, -1},
			{unix.AUDIT_ARCH_X86_64, unix.SYS_SOCKET | 0x40000000, -1}, // x32
			{unix.AUDIT_ARCH_I386, 359, 102},
		}, nil
	case "arm64":
		return []socketCalls{
			{unix.AUDIT_ARCH_AARCH64, unix.SYS_SOCKET, -1},
			{unix.AUDIT_ARCH_ARM, 281, -1},
		}, nil
	}
	return nil, fmt.Errorf("no MPTCP filter for %s", runtime.GOARCH)
}

// mptcpFilter is the BPF program: for each known architecture, refuse
// socket(_, _, IPPROTO_MPTCP) and socketcall; allow everything else.
func mptcpFilter() ([]unix.SockFilter, error) {
	arches, err := netFilterArches()
	if err != nil {
		return nil, err
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(k uint32, jt, jf uint8) unix.SockFilter { return unix.SockFilter{Code: jeq, Jt: jt, Jf: jf, K: k} }
	// Each architecture's block is 8 instructions; whatever it does not
	// deny jumps to the next block, and past the last one is allow. The
	// jump offsets count from the instruction after the jump.
	var prog []unix.SockFilter
	for _, a := range arches {
		call := uint32(0xffffffff) // no such call
		if a.socketcall >= 0 {
			call = uint32(a.socketcall)
		}
		prog = append(prog,
			stmt(ld, seccompArch),
			jump(a.arch, 0, 6), // another arch: the next block
			stmt(ld, seccompNr),
			jump(call, 3, 0),     // socketcall: deny
			jump(a.socket, 0, 3), // another call: the next block
			stmt(ld, seccompArg2),
			jump(ipprotoMPTCP, 0, 1), // another protocol: the next block
			stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPROTONOSUPPORT)),
		)
	}
	prog = append(prog, stmt(ret, unix.SECCOMP_RET_ALLOW))
	return prog, nil
}

// denyMPTCP installs the filter on the calling thread (inherited by the
// tool across fork and exec). no_new_privs must be set (prepareThread).
func denyMPTCP() error {
	prog, err := mptcpFilter()
	if err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0); err != nil {
		return fmt.Errorf("seccomp (MPTCP filter): %w", err)
	}
	return nil
}
