//go:build linux

package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// orphanScript starts a process that leaves the tool's session and process
// group (setsid) and is orphaned by a double fork, writes its pid to the
// file "orphan", then ends as end says.
func orphanScript(end string) string {
	return `setsid sh -c 'sleep 1000 & echo $! > orphan' </dev/null >/dev/null 2>&1 &
while [ ! -s orphan ]; do sleep 0.01; done
` + end
}

// withContainment makes r hold its calls' processes as c says (nil: only
// the process group is killed, the behaviour before cgroups).
func withContainment(r *Runner, c *containment) {
	r.containOnce.Do(func() { r.contain = c })
}

// asSubreaper plays a host without cgroups: the test process becomes a
// child subreaper, as detectContainment would make the node.
func asSubreaper(t *testing.T, r *Runner) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	withContainment(r, &containment{maxProcs: DefaultMaxProcs, subreaper: true})
}

// needCgroup skips unless the Runner found a cgroup to put calls in.
func needCgroup(t *testing.T, r *Runner) {
	t.Helper()
	if c := r.containment(); c == nil || (c.v2 == "" && c.v1 == "") {
		t.Skipf("no cgroup for calls on this host: %v", r.Protections())
	}
}

var orphanEnds = []struct {
	name, end string
	check     func(error) bool
}{
	{"success", "echo ok", func(err error) bool { return err == nil }},
	{"error", "exit 1", func(err error) bool { var e *ExitError; return errors.As(err, &e) && e.Status == 1 }},
	{"timeout", "sleep 1000", func(err error) bool { return errors.Is(err, ErrTimeout) }},
}

func runOrphanCases(t *testing.T, r *Runner, wantGone bool) {
	for _, tc := range orphanEnds {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Only the hanging tool should meet the deadline, even on a busy host.
			limit := time.Minute
			if tc.name == "timeout" {
				limit = 3 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			_, err := r.Run(ctx, Invocation{Tool: "orphan", Meta: shTool(orphanScript(tc.end)), Cwd: dir})
			if !tc.check(err) {
				t.Fatalf("Run: %v", err)
			}
			pid := readPid(t, filepath.Join(dir, "orphan"))
			if wantGone {
				waitFor(t, 5*time.Second, fmt.Sprintf("the orphan %d to be gone", pid), func() bool { return processGone(pid) })
				return
			}
			// The control: the orphan outlives the call.
			time.Sleep(300 * time.Millisecond)
			alive := !processGone(pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if !alive {
				t.Fatalf("control: the orphan %d is gone without the protection; the test proves nothing", pid)
			}
		})
	}
}

func TestRun_NoOrphans_Cgroup(t *testing.T) {
	r := newTestRunner(t, nil)
	needCgroup(t, r)
	runOrphanCases(t, r, true)
}

func TestRun_NoOrphans_Subreaper(t *testing.T) {
	r := newTestRunner(t, nil)
	asSubreaper(t, r)
	runOrphanCases(t, r, true)
}

func TestRun_NoOrphans_Control(t *testing.T) {
	// Without a cgroup or a subreaper, killing the process group misses a
	// process that left it: the orphan survives.
	r := newTestRunner(t, nil)
	withContainment(r, nil)
	runOrphanCases(t, r, false)
}

func TestRun_SubreaperSparesRunningCalls(t *testing.T) {
	// The sweep after a call must neither kill another call's tool nor
	// steal os/exec's wait for it.
	r := newTestRunner(t, nil)
	asSubreaper(t, r)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 4 {
		wg.Go(func() {
			out, err := r.Run(context.Background(), Invocation{Tool: "slow", Meta: shTool("sleep 1; echo slow" + strconv.Itoa(i))})
			if err == nil && string(out) != "slow"+strconv.Itoa(i)+"\n" {
				err = fmt.Errorf("output %q", out)
			}
			errs <- err
		})
	}
	for range 8 {
		wg.Go(func() {
			dir, err := os.MkdirTemp(t.TempDir(), "")
			if err == nil {
				_, err = r.Run(context.Background(), Invocation{Tool: "orphan", Meta: shTool(orphanScript("echo ok")), Cwd: dir})
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// floodScript starts up to 60 sleeps, recording each one started.
const floodScript = `i=0
while [ $i -lt 60 ]; do sleep 1000 & echo $! >> pids; i=$((i+1)); done
echo $i`

func countPids(t *testing.T, path string) []int {
	t.Helper()
	data, _ := os.ReadFile(path)
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestRun_ProcessLimit(t *testing.T) {
	const limit = 20
	r := newTestRunner(t, func(c *RunnerConfig) { c.MaxProcs = limit })
	if c := r.containment(); c == nil || (!c.v2Pids && c.v1 == "") {
		t.Skipf("no pids controller for calls on this host: %v", r.Protections())
	}
	dir := t.TempDir()
	_, err := r.Run(context.Background(), Invocation{Tool: "flood", Meta: shTool(floodScript), Cwd: dir})
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.Contains(strings.ToLower(ee.Stderr), "fork") {
		t.Fatalf("err = %v, want the tool to fail to fork", err)
	}
	pids := countPids(t, filepath.Join(dir, "pids"))
	if len(pids) >= limit {
		t.Errorf("%d processes started under a limit of %d", len(pids), limit)
	}
	for _, pid := range pids {
		waitFor(t, 5*time.Second, "the flood to be killed", func() bool { return processGone(pid) })
	}
	// The Runner still serves.
	if out, err := r.Run(context.Background(), Invocation{Tool: "ok", Meta: shTool("echo ok")}); err != nil || string(out) != "ok\n" {
		t.Errorf("after the flood: (%q, %v)", out, err)
	}

	t.Run("control", func(t *testing.T) {
		r := newTestRunner(t, func(c *RunnerConfig) { c.MaxProcs = limit; c.Timeout = 2 * time.Minute })
		withContainment(r, nil)
		dir := t.TempDir()
		out, err := r.Run(context.Background(), Invocation{Tool: "flood", Meta: shTool(floodScript), Cwd: dir})
		if err != nil || string(out) != "60\n" {
			t.Errorf("without a limit: (%q, %v), want all 60 started", out, err)
		}
		for _, pid := range countPids(t, filepath.Join(dir, "pids")) {
			waitFor(t, 5*time.Second, "the flood to be killed", func() bool { return processGone(pid) })
		}
	})
}

func TestRunner_Protections(t *testing.T) {
	r := newTestRunner(t, nil)
	got := strings.Join(r.Protections(), "; ")
	for _, want := range []string{"landlock ABI", "uid "} {
		if !strings.Contains(got, want) {
			t.Errorf("Protections() = %q, want %q in it", got, want)
		}
	}
	if !strings.Contains(got, "cgroup") && !strings.Contains(got, "subreaper") && !strings.Contains(got, "not contained") {
		t.Errorf("Protections() = %q names no process containment", got)
	}
	if !strings.Contains(got, "pids.max") && !strings.Contains(got, "process limit missing") {
		t.Errorf("Protections() = %q says nothing of a process limit", got)
	}
	y := newTestRunner(t, func(c *RunnerConfig) { c.Yolo = true })
	if got := strings.Join(y.Protections(), "; "); !strings.Contains(got, "-yolo") {
		t.Errorf("Yolo Protections() = %q", got)
	}
}

func TestRunner_CloseRemovesCgroups(t *testing.T) {
	r := newTestRunner(t, nil)
	needCgroup(t, r)
	if _, err := r.Run(context.Background(), Invocation{Tool: "ok", Meta: shTool("echo ok")}); err != nil {
		t.Fatal(err)
	}
	c := r.containment()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{c.v2, c.v1} {
		if dir != "" {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s still exists after Close: %v", dir, err)
			}
		}
	}
}

func TestContainment_RemovesStaleCgroups(t *testing.T) {
	// A node killed outright leaves its call cgroups, and maybe processes
	// in them; the next Runner on the host kills and removes them.
	probe := newTestRunner(t, nil)
	needCgroup(t, probe)
	c := probe.containment()
	parent := filepath.Dir(c.v2)
	if c.v2 == "" {
		parent = filepath.Dir(c.v1)
	}
	dead := 4194000
	for syscall.Kill(dead, 0) == nil {
		dead++
	}
	stale := filepath.Join(parent, fmt.Sprintf("toolnode-%d-1", dead))
	call := filepath.Join(stale, "call-1")
	if err := os.MkdirAll(call, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(call); _ = os.Remove(stale) })
	sleeper := &os.ProcAttr{Files: []*os.File{nil, nil, nil}}
	p, err := os.StartProcess("/bin/sleep", []string{"sleep", "1000"}, sleeper)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
	if err := os.WriteFile(filepath.Join(call, "cgroup.procs"), []byte(strconv.Itoa(p.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t, nil)
	r.containment()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale cgroup %s is still there: %v", stale, err)
	}
	waitFor(t, 5*time.Second, "the stale call's process to be killed", func() bool { return processGone(p.Pid) })
}
