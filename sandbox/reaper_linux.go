//go:build linux

package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The leaders of running calls: the processes a Sandbox started and
// os/exec will wait for. A sweep of orphans must neither kill them nor
// steal their wait, so it holds startMu exclusively, and a start holds it
// shared from before the fork until the leader is recorded.
var (
	startMu   sync.RWMutex
	leadersMu sync.Mutex
	leaders   = map[int]bool{}
)

func beginStart() { startMu.RLock() }

// endStart records pid (0: the start failed) as a leader and lets sweeps
// run again.
func endStart(pid int) {
	if pid > 0 {
		leadersMu.Lock()
		leaders[pid] = true
		leadersMu.Unlock()
	}
	startMu.RUnlock()
}

// leaderReaped forgets pid once os/exec has reaped it.
func leaderReaped(pid int) {
	leadersMu.Lock()
	delete(leaders, pid)
	leadersMu.Unlock()
}

// isReaper reports whether orphans are re-parented to this process: it is
// PID 1 (a container) or a child subreaper.
func isReaper() bool {
	if os.Getpid() == 1 {
		return true
	}
	// PR_GET_CHILD_SUBREAPER stores the flag through its second argument.
	var flag int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&flag)), 0, 0, 0)
	return err == nil && flag != 0
}

// sweepOrphans deals with the processes re-parented to this process that
// no call is waiting for: with kill (the subreaper fallback, where they
// are what is left of ended calls) it kills them and all their
// descendants; it reaps those that have exited. It returns when none is
// left, or after within. It does nothing unless this process is a reaper.
func sweepOrphans(kill bool, within time.Duration) {
	if !isReaper() {
		return
	}
	startMu.Lock()
	defer startMu.Unlock()
	deadline := time.Now().Add(within)
	for {
		leadersMu.Lock()
		var orphans []int
		for _, pid := range children(os.Getpid()) {
			if !leaders[pid] && (kill || isZombie(pid)) {
				orphans = append(orphans, pid)
			}
		}
		leadersMu.Unlock()
		if len(orphans) == 0 {
			return
		}
		if kill {
			queue := append([]int(nil), orphans...)
			for len(queue) > 0 {
				pid := queue[0]
				queue = append(queue[1:], children(pid)...)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		for _, pid := range orphans {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// children lists the children of process pid, from the children files of
// its threads (CONFIG_PROC_CHILDREN, on in every distribution kernel), or
// else from a scan of every process.
func children(pid int) []int {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) && len(tasks) > 0 {
			return childrenByScan(pid)
		}
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func childrenByScan(ppid int) []int {
	var out []int
	for pid, p := range scanProcs() {
		if p.ppid == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// isZombie reports whether pid has exited and awaits its reaping.
func isZombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

type procInfo struct {
	ppid   int
	zombie bool
}

// scanProcs reads the parent and state of every process.
func scanProcs() map[int]procInfo {
	out := map[int]procInfo{}
	d, err := os.Open("/proc")
	if err != nil {
		return out
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// PID (COMM) STATE PPID ...; COMM may hold anything but ends at
		// the last parenthesis.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		out[pid] = procInfo{ppid: ppid, zombie: f[0] == "Z"}
	}
	return out
}
