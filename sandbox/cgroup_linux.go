//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupSeq numbers the sandboxes of this process, so that several nodes in
// one process (tests) get cgroups of their own.
var cgroupSeq atomic.Int64

// callSeq numbers the call cgroups of this process: unique even among
// containments that share a parent (benchmarks pricing each way), now
// that a call's cgroups outlive it in the pool.
var callSeq atomic.Int64

// detectContainment finds the strongest way this host offers to hold a
// call's processes:
//
//   - a cgroup v2 per call, created under the node's own cgroup, which the
//     tool is cloned into (clone3 CLONE_INTO_CGROUP) and which is killed
//     whole with cgroup.kill (Linux 5.14) when the call ends; its pids.max
//     limits the call's processes where the pids controller can be enabled;
//   - else, or in addition for the limit, a cgroup of the v1 pids hierarchy
//     (hybrid hosts): the thread that forks the tool joins it, so the tool
//     starts inside; pids.max limits the call, and the call is killed by
//     killing its members until none is left;
//   - else the node becomes a child subreaper and kills, when a call ends,
//     the orphans it inherited and their descendants; without a pids
//     controller there is then no process limit, and Protections says so.
func detectContainment(maxProcs int) *containment {
	c := &containment{maxProcs: maxProcs}
	seq := cgroupSeq.Add(1)
	name := fmt.Sprintf("toolnode-%d-%d", os.Getpid(), seq)

	v2, v1, err := ownCgroups()
	if err != nil {
		c.missing = append(c.missing, "cgroup: "+err.Error())
	}
	removeStale(v2)
	removeStale(v1)
	if v2 != "" {
		dir := filepath.Join(v2, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.missing = append(c.missing, fmt.Sprintf("cgroup v2: cannot create %s: %v", dir, err))
		} else if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			_ = os.Remove(dir)
			c.missing = append(c.missing, "cgroup v2: no cgroup.kill (Linux 5.14 or later is needed)")
		} else if err := probeCloneInto(dir); err != nil {
			_ = os.Remove(dir)
			c.missing = append(c.missing, fmt.Sprintf("cgroup v2: cannot start a process inside a cgroup (clone3): %v", err))
		} else {
			c.v2 = dir
			// The pids controller reaches the call cgroups only when it is
			// enabled in the node's cgroup and in ours; the first fails
			// when the node's cgroup holds processes and is not the root.
			_ = os.WriteFile(filepath.Join(v2, "cgroup.subtree_control"), []byte("+pids"), 0)
			if hasController(dir, "pids") && os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids"), 0) == nil {
				c.v2Pids = true
			}
		}
	}
	if !c.v2Pids && v1 != "" {
		dir := filepath.Join(v1, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.missing = append(c.missing, fmt.Sprintf("cgroup v1 pids: cannot create %s: %v", dir, err))
		} else {
			c.v1 = dir
		}
	}
	if c.v2 == "" && c.v1 == "" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			c.missing = append(c.missing, fmt.Sprintf("child subreaper: %v", err))
		} else {
			c.subreaper = true
		}
	}
	return c
}

// removeStale kills and removes the cgroups left under parent by a node
// process that is gone (it was killed before it could remove them): the
// processes of its calls die with it after all.
func removeStale(parent string) {
	if parent == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, "toolnode-*-*"))
	for _, dir := range dirs {
		pid, err := strconv.Atoi(strings.Split(filepath.Base(dir), "-")[1])
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // a live process's, or not ours to judge
		}
		calls, _ := filepath.Glob(filepath.Join(dir, "call-*"))
		for _, call := range calls {
			g := &callGroup{v2fd: -1}
			if _, err := os.Stat(filepath.Join(call, "cgroup.kill")); err == nil {
				g.v2 = call
			} else {
				g.v1 = call
			}
			g.kill()
			g.finish()
		}
		_ = os.Remove(dir)
	}
}

// probeCloneInto starts /bin/true inside a new cgroup under parent, as
// every call will be started: clone3 may be missing (before Linux 5.7) or
// refused by a seccomp filter (some container runtimes), and calls must
// not all fail for it. Without /bin/true there is nothing to probe with.
func probeCloneInto(parent string) error {
	dir := filepath.Join(parent, "probe")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	defer os.Remove(dir)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := os.Stat("/bin/true"); err != nil {
		return nil
	}
	// A sweep of orphans must not reap it before its wait (reaper_linux.go).
	startMu.RLock()
	defer startMu.RUnlock()
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	return cmd.Run()
}

// callGroup is the cgroup (or cgroups) of one call.
type callGroup struct {
	v2   string // cgroup v2 directory, "" none
	v2fd int    // open on v2, for CLONE_INTO_CGROUP; -1 none
	v1   string // v1 pids cgroup directory, "" none

	// Opened with the cgroups, so that ending a call reads them with one
	// system call each (no open, no lookup of the path); nil: read by
	// path. (Not v1's cgroup.procs: an open one keeps serving the list it
	// first read while it is read again within a second.)
	events *os.File // v2 cgroup.events
	cur1   *os.File // v1 pids.current
	cur2   *os.File // v2 pids.current, when its pids controller is on
	reuses int      // calls held before this one
	// killed: cgroup.kill was written. Such a cgroup is never reused:
	// the kernel then kills every process cloned into it afterwards
	// (TestCgroupKilledNotReused shows it).
	killed bool
}

// newCall returns the cgroups of one call, with its process limit: a pair
// that held an earlier call and is empty again (see recycle), else new
// ones.
func (c *containment) newCall() (*callGroup, error) {
	if c == nil || (c.v2 == "" && c.v1 == "") {
		return nil, nil
	}
	c.poolMu.Lock()
	if n := len(c.pool); n > 0 {
		g := c.pool[n-1]
		c.pool = c.pool[:n-1]
		c.poolMu.Unlock()
		return g, nil
	}
	c.poolMu.Unlock()
	seq := callSeq.Add(1)
	g := &callGroup{v2fd: -1}
	if c.v2 != "" {
		dir := filepath.Join(c.v2, "call-"+strconv.FormatInt(seq, 10))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup of the call: %w", err)
		}
		g.v2 = dir
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			g.finish()
			return nil, fmt.Errorf("cgroup of the call: %w", err)
		}
		g.v2fd = fd
		g.events, _ = os.Open(filepath.Join(dir, "cgroup.events"))
		if c.v2Pids {
			if g.cur2, err = os.Open(filepath.Join(dir, "pids.current")); err != nil {
				g.finish()
				return nil, fmt.Errorf("process limit of the call: %w", err)
			}
		}
	}
	if c.v1 != "" {
		dir := filepath.Join(c.v1, "call-"+strconv.FormatInt(seq, 10))
		if err := os.Mkdir(dir, 0o755); err != nil {
			g.finish()
			return nil, fmt.Errorf("process limit of the call: %w", err)
		}
		g.v1 = dir
		var err error
		if g.cur1, err = os.Open(filepath.Join(dir, "pids.current")); err != nil {
			g.finish()
			return nil, fmt.Errorf("process limit of the call: %w", err)
		}
	}
	if err := g.setLimit(c); err != nil {
		g.finish()
		return nil, fmt.Errorf("process limit of the call: %w", err)
	}
	return g, nil
}

// setLimit writes the call's process limit to pids.max.
func (g *callGroup) setLimit(c *containment) error {
	limit := max(c.maxProcs, 2)
	if g.v2 != "" && c.v2Pids {
		if err := os.WriteFile(filepath.Join(g.v2, "pids.max"), []byte(strconv.Itoa(limit)), 0); err != nil {
			return err
		}
	}
	if g.v1 != "" {
		// The node's thread that forks the tool counts in the v1 cgroup.
		if err := os.WriteFile(filepath.Join(g.v1, "pids.max"), []byte(strconv.Itoa(limit+1)), 0); err != nil {
			return err
		}
	}
	return nil
}

// Reuse of call cgroups. Making a cgroup (v2 and v1: two mkdirs, each
// creating the cgroup's files) and removing it cost more CPU than the rest
// of a call's containment, and a removal waits for the call's thread to
// leave the v1 cgroup. So a call's cgroups, once the call has answered,
// are emptied and kept for a later call: recycle waits until nothing of
// the call is left in them — no process in the v2 cgroup (populated 0)
// and none counted in either's pids.current (the forking thread has left
// the v1 cgroup; a zombie still counts) — then writes pids.max afresh and
// pools them. A pair not empty within cgroupDrain, or with a process
// alive in it, is killed again and removed, never reused, and so is one
// that had to be killed (cgroup.kill) when its call ended: the kernel
// kills every process cloned into a v2 cgroup that was ever killed. So
// only calls whose tool left nothing behind, most of them, give their
// cgroups back. The tool cannot
// have changed them otherwise: cgroupfs is not writable under the
// sandbox.
const (
	maxPooledCgroups = 16
	cgroupDrain      = 2 * time.Second
	// maxCgroupReuses bounds how many calls one pair holds, so that the
	// kernel's per-cgroup counters (pids.events, cgroup.stat) start again
	// from zero now and then.
	maxCgroupReuses = 1000
)

// recycle takes g back once its call has answered (see above). It runs
// after the answer, off the call's path.
func (c *containment) recycle(g *callGroup) {
	if g == nil {
		return
	}
	if c == nil || g.killed || !g.drain(cgroupDrain) || g.reuses+1 >= maxCgroupReuses || g.setLimit(c) != nil {
		g.kill() // whatever is left, once more
		g.finish()
		return
	}
	g.reuses++
	c.poolMu.Lock()
	if !c.poolClosed && len(c.pool) < maxPooledCgroups {
		c.pool = append(c.pool, g)
		g = nil
	}
	c.poolMu.Unlock()
	g.finish()
}

// drain waits, up to within, until g holds no process and counts none:
// the call's forking thread ends and its leader is reaped. It polls the
// counters alone (one pread each). A process alive in the v2 cgroup is a
// leftover: drain gives up at once, and g is not reused. It reports
// whether g is empty.
func (g *callGroup) drain(within time.Duration) bool {
	deadline := time.Now().Add(within)
	pause := 50 * time.Microsecond
	for !g.empty() {
		if g.v2 != "" && g.populated() || time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
	return true
}

// empty reports whether no process is in g's cgroups and none is counted
// in their pids.current (unknown counts as not empty).
func (g *callGroup) empty() bool {
	if g.v2 != "" && g.populated() {
		return false
	}
	if g.v1 != "" && readCount(g.cur1) != 0 {
		return false
	}
	return g.cur2 == nil || readCount(g.cur2) == 0
}

// readCount reads a pids.current; -1 unknown.
func readCount(f *os.File) int {
	if f == nil {
		return -1
	}
	var buf [32]byte
	n, _ := f.ReadAt(buf[:], 0)
	v, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return -1
	}
	return v
}

// populated reports whether a process of the call is alive in its v2
// cgroup ("populated 1" in cgroup.events; a process that has exited
// leaves it before its parent can see it exit). Unknown counts as alive.
func (g *callGroup) populated() bool {
	if g.events == nil {
		return true
	}
	var buf [128]byte
	n, err := g.events.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return true
	}
	return !strings.Contains(string(buf[:n]), "populated 0")
}

// fds is how many descriptors g holds.
func (g *callGroup) fds() int {
	n := 0
	if g == nil {
		return 0
	}
	if g.v2fd >= 0 {
		n++
	}
	for _, f := range []*os.File{g.events, g.cur1, g.cur2} {
		if f != nil {
			n++
		}
	}
	return n
}

// setAttr has the tool cloned straight into the call's v2 cgroup.
func (g *callGroup) setAttr(a *syscall.SysProcAttr) {
	if g != nil && g.v2fd >= 0 {
		a.UseCgroupFD = true
		a.CgroupFD = g.v2fd
	}
}

// join runs on the thread that forks the tool, before the fork: the
// thread joins the v1 pids cgroup (v1 places threads, not processes), so
// the tool is born in it and can never have run outside it. The thread
// stays in it until it ends, after the call (a call's thread is never the
// node's main thread, see thread.go): moving it back would be a second
// cgroup v1 migration, which waits for an RCU grace period, on the call's
// path. It counts as one of the cgroup's processes; pids.max allows for
// it.
//
// It writes "0", the writing thread, not its thread id: the kernel moves
// the thread named by an id under its global lock of thread groups
// (cgroup_threadgroup_rwsem), whose write side waits for an RCU grace
// period — expedited where rcu_expedited is set, an interrupt on every
// CPU, the one running another call's tool included — while holding
// cgroup_mutex, which that tool's clone into its cgroup needs. For the
// writer itself it skips that lock.
func (g *callGroup) join() error {
	if g == nil || g.v1 == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(g.v1, "tasks"), []byte("0"), 0); err != nil {
		return fmt.Errorf("process limit of the call: %w", err)
	}
	return nil
}

// kill kills every process of the call: at once with cgroup.kill, else by
// killing the members of the v1 cgroup until none is left (its pids.max
// bounds how many can be forked meanwhile).
func (g *callGroup) kill() {
	if g == nil {
		return
	}
	g.killV2()
	if g.v1 != "" {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			pids := cgroupPids(g.v1, "cgroup.procs")
			// The node's own forking thread belongs to the node's
			// process: it leaves with its goroutine.
			self := os.Getpid()
			n := 0
			for _, pid := range pids {
				if pid != self {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					n++
				}
			}
			if n == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// killExited is kill when the call's leader has exited and is not yet
// reaped: then the v1 cgroup counts exactly the forking thread and the
// leader unless something else is left, and one read of pids.current
// spares the listing of its members.
func (g *callGroup) killExited() {
	if g != nil && g.v1 != "" && readCount(g.cur1) == 2 {
		g.killV2()
		return
	}
	g.kill()
}

// killV2 kills what is alive in the v2 cgroup with cgroup.kill. An empty
// cgroup has nothing to kill: when the tool left nothing behind, as most
// do, the call is spared cgroup.kill (a write under the kernel's global
// cgroup lock).
func (g *callGroup) killV2() {
	if g.v2 != "" && g.populated() {
		g.killed = true
		_ = os.WriteFile(filepath.Join(g.v2, "cgroup.kill"), []byte("1"), 0)
	}
}

// cgroupPids reads a cgroup.procs or tasks file.
func cgroupPids(dir, file string) []int {
	data, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// finish removes the call's cgroups once they are empty (killed processes
// leave them within milliseconds; the forking thread leaves the v1 one
// when it ends, once released).
func (g *callGroup) finish() {
	if g == nil {
		return
	}
	if g.v2fd >= 0 {
		_ = unix.Close(g.v2fd)
		g.v2fd = -1
	}
	for _, f := range []**os.File{&g.events, &g.cur1, &g.cur2} {
		if *f != nil {
			_ = (*f).Close()
			*f = nil
		}
	}
	for _, dir := range []string{g.v2, g.v1} {
		if dir == "" {
			continue
		}
		deadline := time.Now().Add(2 * time.Second)
		for os.Remove(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}

	}
}

// close removes the sandbox's cgroups, the pooled call cgroups first;
// other call cgroups are gone already unless a call is still running.
func (c *containment) close() error {
	c.poolMu.Lock()
	pool := c.pool
	c.pool, c.poolClosed = nil, true
	c.poolMu.Unlock()
	for _, g := range pool {
		g.finish()
	}
	var errs []error
	for _, dir := range []string{c.v2, c.v1} {
		if dir != "" {
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
