//go:build linux

package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRun_ReapsOrphansAsSubreaper(t *testing.T) {
	// As PID 1 in a container (or a child subreaper) the node inherits the
	// tool's orphans; Run must reap them, not leave zombies.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	r := newTestRunner(t, nil)
	dir := t.TempDir()
	for _, cmd := range []string{
		`sleep 300 & echo $! > child; echo done`,          // exits, leaving a child
		`(sleep 300 & echo $! > child; wait) & sleep 300`, // grandchild, killed by timeout
	} {
		_ = os.Remove(filepath.Join(dir, "child"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = r.Run(ctx, Invocation{Tool: "orphans", Meta: shTool(cmd), Cwd: dir})
		cancel()
		pid := readPid(t, filepath.Join(dir, "child"))
		waitFor(t, 5*time.Second, fmt.Sprintf("the orphan %d to be reaped", pid), func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err)
		})
	}
}

// viewFDs is how many descriptors r's sandbox holds for its read rules.
func viewFDs(r *Runner) int {
	if r.view == nil {
		return 0
	}
	r.view.mu.RLock()
	defer r.view.mu.RUnlock()
	if r.view.rules == nil {
		return 0
	}
	return len(r.view.rules.rules)
}

func ptraceSeize(pid int) error { return unix.PtraceSeize(pid) }
