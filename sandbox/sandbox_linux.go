//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Status reports whether this kernel can sandbox tools: the
// Landlock ABI version (≥ 1), or an error wrapping ErrNoSandbox whose text
// is a sentence saying why not.
func Status() (abi int, err error) {
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

// Access rights by kind of grant, before masking with what the kernel
// handles.
const (
	fileRWAccess = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate
	deviceAccess = llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev
	// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (Linux 5.11).
	closeRangeCloexec = 1 << 2
)

// handledFS is every filesystem right the kernel of Landlock ABI abi
// knows: all are handled, so what is not granted is denied. (Refer from
// ABI 2, truncate from 3, device ioctl from 5, connecting to pathname
// unix sockets from 9.)
func handledFS(abi int) uint64 {
	h := uint64(llsys.AccessFSMakeSym<<1 - 1) // the 13 rights of ABI 1
	if abi >= 2 {
		h |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		h |= llsys.AccessFSTruncate
	}
	if abi >= 5 {
		h |= llsys.AccessFSIoctlDev
	}
	if abi >= 9 {
		h |= llsys.AccessFSResolveUnix
	}
	return h
}

// scopes is what the kernel of Landlock ABI abi can scope to the
// sandbox's domain: signals and abstract unix sockets from ABI 6.
func scopes(abi int) uint64 {
	if abi >= 6 {
		return llsys.ScopeSignal | llsys.ScopeAbstractUnixSocket
	}
	return 0
}

// restrictThread applies the call's policy to the calling OS thread:
// read and execute everything but the protected trees (sb.view), read
// sb.ro, write only under sb.rw and to writableDevices; no signal to, no
// abstract unix socket of and no ptrace of a process outside the call;
// no descriptor of the node but those the tool is given. A session cwd
// that holds a protected path comes as a view in sb.trees, not in sb.rw
// or sb.ro. The thread must have passed prepareThread (no capabilities
// under a root node, no_new_privs). The caller
// must have locked its goroutine to the thread, start the tool from it,
// and let the thread die: the tool inherits the policy and cannot lift
// it. Restricting one thread instead of all (go-landlock's RestrictPaths
// confines every thread of the runtime) leaves the node itself free.
func restrictThread(sb *sandboxSpec) error {
	abi, err := Status()
	if err != nil {
		return err
	}
	handled := handledFS(abi)
	defer func() {
		for _, v := range sb.transient {
			v.close()
		}
	}()
	fd := sb.ruleset
	if !sb.prepared {
		if fd, _, err = newRuleset(sb, abi); err != nil {
			return err
		}
		defer syscall.Close(fd)
	}
	for _, p := range sb.rw {
		if err := addPathRule(fd, p, handled, fileRWAccess&handled, false); err != nil {
			return err
		}
	}
	for _, p := range sb.ro {
		if err := addPathRule(fd, p, roDirAccess, roFileAccess, true); err != nil {
			return err
		}
	}
	if err := llsys.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	if sb.noNet {
		if err := denyNetwork(abi); err != nil {
			return err
		}
		if err := denyMPTCP(); err != nil {
			return err
		}
	}
	return closeOnExec()
}

// newRuleset makes the Landlock ruleset of sb's grants that do not depend
// on the tool: the read view, the views of a cwd around a protected path,
// the scratch directory, the readable trees and the writable devices; restrictThread adds the
// rest (a cwd, the executable). It returns the ruleset and the walks of
// sb.view and sb.trees it was filled from, in that order (nil for a view
// not added), for isCurrent.
func newRuleset(sb *sandboxSpec, abi int) (fd int, walks []*fsRules, err error) {
	handled := handledFS(abi)
	scoped := scopes(abi)
	fd, err = llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: handled, Scoped: scoped}, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	fail := func(err error) (int, []*fsRules, error) {
		_ = syscall.Close(fd)
		return -1, nil, err
	}
	var w *fsRules
	if sb.view != nil {
		if w, err = addView(fd, sb.view, handled); err != nil {
			return fail(fmt.Errorf("listing what tools may read: %w", err))
		}
	}
	walks = append(walks, w)
	for _, v := range sb.trees {
		w, err := addView(fd, v, handled)
		if err != nil {
			return fail(fmt.Errorf("granting the working directory %s: %w", v.root, err))
		}
		walks = append(walks, w)
	}
	for _, v := range sb.transient {
		if _, err := addView(fd, v, handled); err != nil {
			return fail(fmt.Errorf("granting the working directory %s: %w", v.root, err))
		}
	}
	if sb.scratch != "" {
		if err := addPathRule(fd, sb.scratch, handled, fileRWAccess&handled, false); err != nil {
			return fail(err)
		}
	}
	for _, p := range sb.readable {
		if err := addPathRule(fd, p, roDirAccess, roFileAccess, true); err != nil {
			return fail(err)
		}
	}
	for _, p := range writableDevices {
		if err := addPathRule(fd, p, 0, deviceAccess&handled, true); err != nil {
			return fail(err)
		}
	}
	return fd, walks, nil
}

// handledNet is every network right the kernel of Landlock ABI abi knows:
// TCP bind and connect from ABI 4, UDP bind and connect/send from 10.
func handledNet(abi int) uint64 {
	var h uint64
	if abi >= 4 {
		h |= llsys.AccessNetBindTCP | llsys.AccessNetConnectTCP
	}
	if abi >= 10 {
		h |= llsys.AccessNetBindUDP | llsys.AccessNetConnectSendUDP
	}
	return h
}

// netLayer is the ruleset that handles every network right and grants
// none: one ruleset, however many ports, made once and applied to the
// thread of each call of a tool without "network": true.
var netLayer struct {
	once sync.Once
	fd   int
	err  error
}

// denyNetwork adds netLayer to the calling thread's Landlock domain (a
// layer on top of the file rules: each layer must allow an access). A
// kernel below ABI 4 has no network rules; the node says so at start.
func denyNetwork(abi int) error {
	h := handledNet(abi)
	if h == 0 {
		return nil
	}
	netLayer.once.Do(func() {
		netLayer.fd, netLayer.err = llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessNet: h}, 0)
		if netLayer.err != nil {
			netLayer.err = fmt.Errorf("landlock_create_ruleset (network): %w", netLayer.err)
		}
	})
	if netLayer.err != nil {
		return netLayer.err
	}
	if err := llsys.LandlockRestrictSelf(netLayer.fd, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self (network): %w", err)
	}
	return nil
}

// prepareThread does on the calling thread what a tool's thread must do
// before it is confined, whatever the tool: under a root node it drops the
// capabilities, and it sets no_new_privs, which
// Landlock requires (or CAP_SYS_ADMIN); both are per thread and inherited
// across execve.
func prepareThread() error {
	if os.Geteuid() == 0 {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}

// addView adds the rules of v, masked with the rights the kernel handles,
// and returns the walk they came from.
func addView(rulesetFD int, v *fsView, handled uint64) (*fsRules, error) {
	walk, release, err := v.currentRules()
	if err != nil {
		return nil, err
	}
	defer release()
	for _, r := range walk.rules {
		if err := addRule(rulesetFD, r.fd, r.access&handled); err != nil {
			return nil, err
		}
	}
	return walk, nil
}

// addPathRule grants path: dirAccess beneath it when it is a directory,
// fileAccess when it is not. A missing path is an error unless
// ignoreMissing.
func addPathRule(rulesetFD int, path string, dirAccess, fileAccess uint64, ignoreMissing bool) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if ignoreMissing && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	access := fileAccess
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		access = dirAccess
	}
	if access == 0 {
		return nil
	}
	if err := addRule(rulesetFD, pfd, access); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func addRule(rulesetFD, pathFD int, access uint64) error {
	err := llsys.LandlockAddPathBeneathRule(rulesetFD, &llsys.PathBeneathAttr{AllowedAccess: access, ParentFd: pathFD}, 0)
	if err != nil {
		return fmt.Errorf("landlock_add_rule: %w", err)
	}
	return nil
}

// dropCapabilities empties the capability bounding set of the calling
// thread (which the tool inherits) and its inheritable and ambient sets:
// a root process gets at execve the capabilities of its bounding set, so
// a tool of a node run as root starts as uid 0 with no capability — no
// reading others' files past their modes, no raw sockets, no module
// loading. The thread's own capabilities are left as they are; it ends
// with the call.
func dropCapabilities() error {
	for c := 0; c <= capLast(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// capLast is the highest capability this kernel knows, read once.
var capLast = sync.OnceValue(func() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63 // dropping one the kernel lacks is EINVAL, ignored
})

// closeOnExec marks every descriptor of the process above 2 close-on-exec,
// so that a descriptor the node (or whatever started it, or a library)
// opened without O_CLOEXEC does not reach the tool: the tool gets 0, 1
// and 2, which the fork dups into place. Marking, not closing, leaves the
// node's own use of them alone.
func closeOnExec() error {
	err := unix.CloseRange(3, ^uint(0), closeRangeCloexec)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: one fcntl per open descriptor.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("marking the node's descriptors close-on-exec: %v, %v", err, rerr)
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 2 {
			_, _ = unix.FcntlInt(uintptr(n), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
	return nil
}

// Info says what protects the tools of s, one part a string:
// the Landlock ABI, then each protection the kernel provides, then, as
// "missing: ...", each one it lacks. The node shows the parts joined on
// its node file's sandbox line and in its start log. With Config.Off it is the
// single part "off (-yolo)"; on a host that cannot sandbox,
// "unavailable: " and the reason.
func (s *Sandbox) Info() []string {
	if s.cfg.Off {
		return []string{"off (-yolo)"}
	}
	abi, err := kernelSandbox()
	if err != nil {
		return []string{"unavailable: " + err.Error()}
	}
	parts := []string{fmt.Sprintf("landlock ABI %d", abi)}
	if n, err := s.view.size(); err != nil {
		parts = append(parts, "files: cannot list what tools may read: "+err.Error())
	} else {
		parts = append(parts, fmt.Sprintf("files: read all but %d protected trees (%d rules), write scratch and cwd", len(s.view.protected), n))
	}
	parts = append(parts, "environment: allow-list")
	if scopes(abi) != 0 {
		parts = append(parts, "signals and abstract unix sockets scoped to the call")
	}
	parts = append(parts, "ptrace confined to the call", "descriptors: 0-2 only")
	if os.Geteuid() == 0 {
		parts = append(parts, "capabilities: none (the node runs as root)")
	}
	if handledFS(abi)&llsys.AccessFSResolveUnix != 0 {
		parts = append(parts, "pathname unix sockets: only under writable directories")
	}
	switch h := handledNet(abi); {
	case h&llsys.AccessNetBindUDP != 0:
		parts = append(parts, `network: no TCP or UDP without "network": true`)
	case h != 0:
		parts = append(parts, `network: no TCP connect or bind without "network": true (UDP not covered)`)
	default:
		parts = append(parts, fmt.Sprintf(`missing: network rules (Landlock ABI 4, kernel has %d): every tool reaches the network`, abi))
	}
	if scopes(abi) == 0 {
		parts = append(parts, fmt.Sprintf("missing: signal and abstract unix socket scoping (Landlock ABI 6, kernel has %d)", abi))
	}
	if handledFS(abi)&llsys.AccessFSResolveUnix == 0 {
		parts = append(parts, fmt.Sprintf("missing: pathname unix socket confinement (Landlock ABI 9, kernel has %d)", abi))
	}
	parts = append(parts, "missing: hidepid (other processes' /proc/PID/environ, cmdline and status stay readable)")
	return parts
}
