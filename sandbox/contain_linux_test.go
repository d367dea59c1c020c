//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
func withContainment(r *testSandbox, c *containment) {
	r.containOnce.Do(func() { r.contain = c })
}

// asSubreaper plays a host without cgroups: the test process becomes a
// child subreaper, as detectContainment would make the node.
func asSubreaper(t *testing.T, r *testSandbox) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	withContainment(r, &containment{maxProcs: DefaultMaxProcs, subreaper: true})
}

// needCgroup skips unless the Sandbox found a cgroup to put calls in.
func needCgroup(t *testing.T, r *testSandbox) {
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
	{"error", "exit 1", func(err error) bool { var e *exitError; return errors.As(err, &e) && e.Status == 1 }},
	{"timeout", "sleep 1000", func(err error) bool { return errors.Is(err, errTimeout) }},
}

func runOrphanCases(t *testing.T, r *testSandbox, wantGone bool) {
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
			_, err := r.run(ctx, tool{Cmd: orphanScript(tc.end), Cwd: dir})
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
	r := newTestSandbox(t, nil)
	needCgroup(t, r)
	runOrphanCases(t, r, true)
}

func TestRun_NoOrphans_Subreaper(t *testing.T) {
	r := newTestSandbox(t, nil)
	asSubreaper(t, r)
	runOrphanCases(t, r, true)
}

func TestRun_NoOrphans_Control(t *testing.T) {
	// Without a cgroup or a subreaper, killing the process group misses a
	// process that left it: the orphan survives.
	r := newTestSandbox(t, nil)
	withContainment(r, nil)
	runOrphanCases(t, r, false)
}

func TestRun_SubreaperSparesRunningCalls(t *testing.T) {
	// The sweep after a call must neither kill another call's tool nor
	// steal os/exec's wait for it.
	r := newTestSandbox(t, nil)
	asSubreaper(t, r)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 4 {
		wg.Go(func() {
			out, err := r.run(context.Background(), tool{Cmd: "sleep 1; echo slow" + strconv.Itoa(i)})
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
				_, err = r.run(context.Background(), tool{Cmd: orphanScript("echo ok"), Cwd: dir})
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
	r := newTestSandbox(t, func(c *testConfig) { c.MaxProcs = limit })
	if c := r.containment(); c == nil || (!c.v2Pids && c.v1 == "") {
		t.Skipf("no pids controller for calls on this host: %v", r.Protections())
	}
	dir := t.TempDir()
	_, err := r.run(context.Background(), tool{Cmd: floodScript, Cwd: dir})
	var ee *exitError
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
	// The Sandbox still serves.
	if out, err := r.run(context.Background(), tool{Cmd: "echo ok"}); err != nil || string(out) != "ok\n" {
		t.Errorf("after the flood: (%q, %v)", out, err)
	}

	t.Run("control", func(t *testing.T) {
		r := newTestSandbox(t, func(c *testConfig) { c.MaxProcs = limit; c.Timeout = 2 * time.Minute })
		withContainment(r, nil)
		dir := t.TempDir()
		out, err := r.run(context.Background(), tool{Cmd: floodScript, Cwd: dir})
		if err != nil || string(out) != "60\n" {
			t.Errorf("without a limit: (%q, %v), want all 60 started", out, err)
		}
		for _, pid := range countPids(t, filepath.Join(dir, "pids")) {
			waitFor(t, 5*time.Second, "the flood to be killed", func() bool { return processGone(pid) })
		}
	})
}

func TestSandbox_Protections(t *testing.T) {
	r := newTestSandbox(t, nil)
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
	y := newTestSandbox(t, func(c *testConfig) { c.Off = true })
	if got := strings.Join(y.Protections(), "; "); !strings.Contains(got, "-yolo") {
		t.Errorf("Yolo Protections() = %q", got)
	}
}

func TestSandbox_CloseRemovesCgroups(t *testing.T) {
	r := newTestSandbox(t, nil)
	needCgroup(t, r)
	if _, err := r.run(context.Background(), tool{Cmd: "echo ok"}); err != nil {
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
	// in them; the next Sandbox on the host kills and removes them.
	probe := newTestSandbox(t, nil)
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
	r := newTestSandbox(t, nil)
	r.containment()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale cgroup %s is still there: %v", stale, err)
	}
	waitFor(t, 5*time.Second, "the stale call's process to be killed", func() bool { return processGone(p.Pid) })
}

// startIn starts argv as a tool is started: by a thread of its own that
// joined g's cgroups and ends once the process started.
func startIn(t *testing.T, g *callGroup, argv ...string) *exec.Cmd {
	t.Helper()
	started := make(chan *exec.Cmd, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends here
		if err := g.join(); err != nil {
			t.Error(err)
			started <- nil
			return
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		g.setAttr(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			t.Error(err)
			cmd = nil
		}
		started <- cmd
	}()
	cmd := <-started
	if cmd == nil {
		t.FailNow()
	}
	return cmd
}

func pooled(c *containment) int {
	c.poolMu.Lock()
	defer c.poolMu.Unlock()
	return len(c.pool)
}

// TestCgroupRecycle: a call's cgroups are pooled for a later call only once
// nothing of the call is left in them, with their process limit set again;
// cgroups that held a leftover (killed) are removed instead.
// TestCgroupJoin: the thread that will fork a call's tool joins the
// call's v1 pids cgroup by writing "0" (itself), and only that thread:
// the node's other threads stay where they were.
func TestCgroupJoin(t *testing.T) {
	c := detectContainment(8)
	t.Cleanup(func() { _ = c.close() })
	if c.v1 == "" {
		t.Skipf("no v1 pids cgroup for calls on this host: %v", c.describe())
	}
	g, err := c.newCall()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.finish)
	joined := make(chan int)
	release := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := g.join(); err != nil {
			errc <- err
			return
		}
		joined <- unix.Gettid()
		<-release
	}()
	var tid int
	select {
	case err := <-errc:
		t.Fatal(err)
	case tid = <-joined:
	}
	members := cgroupPids(g.v1, "tasks")
	close(release)
	if !slices.Equal(members, []int{tid}) {
		t.Errorf("tasks of the call's v1 cgroup = %v, want only the joining thread %d", members, tid)
	}
	// It leaves with its thread.
	waitFor(t, 5*time.Second, "the thread to leave the cgroup", func() bool { return len(cgroupPids(g.v1, "tasks")) == 0 })
}

func TestCgroupRecycle(t *testing.T) {
	const limit = 8
	c := detectContainment(limit)
	t.Cleanup(func() { _ = c.close() })
	if c.v2 == "" && c.v1 == "" {
		t.Skipf("no cgroup for calls on this host: %v", c.describe())
	}

	t.Run("clean", func(t *testing.T) {
		g, err := c.newCall()
		if err != nil {
			t.Fatal(err)
		}
		cmd := startIn(t, g, "/bin/true")
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		// A limit changed meanwhile is set again.
		limits := map[string]int{}
		if c.v2Pids {
			limits[filepath.Join(g.v2, "pids.max")] = limit
		}
		if g.v1 != "" {
			limits[filepath.Join(g.v1, "pids.max")] = limit + 1 // and the forking thread
		}
		for f := range limits {
			if err := os.WriteFile(f, []byte("3"), 0); err != nil {
				t.Fatal(err)
			}
		}
		c.recycle(g)
		if n := pooled(c); n != 1 {
			t.Fatalf("%d cgroups pooled, want 1", n)
		}
		again, err := c.newCall()
		if err != nil {
			t.Fatal(err)
		}
		if again != g {
			t.Fatal("the next call did not get the pooled cgroups")
		}
		if !again.empty() || again.killed {
			t.Error("the reused cgroups are not empty")
		}
		for f, want := range limits {
			if got, _ := os.ReadFile(f); strings.TrimSpace(string(got)) != strconv.Itoa(want) {
				t.Errorf("%s = %q after reuse, want %d", f, got, want)
			}
		}
		c.recycle(again)
	})

	t.Run("leftover", func(t *testing.T) {
		before := pooled(c)
		g, err := c.newCall()
		if err != nil {
			t.Fatal(err)
		}
		cmd := startIn(t, g, "sleep", "1000")
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		if g.empty() {
			t.Fatal("control: cgroups with a process in them count as empty")
		}
		c.recycle(g)
		<-waited
		if !processGone(cmd.Process.Pid) {
			t.Errorf("the call's process %d outlived its cgroups", cmd.Process.Pid)
		}
		if n := pooled(c); n != before-1 {
			t.Errorf("%d cgroups pooled, want %d: killed cgroups were kept", n, before-1)
		}
		for _, dir := range []string{g.v2, g.v1} {
			if _, err := os.Stat(dir); dir != "" && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was not removed: %v", dir, err)
			}
		}
	})

	t.Run("thread", func(t *testing.T) {
		g, err := c.newCall()
		if err != nil {
			t.Fatal(err)
		}
		defer c.recycle(g)
		if g.v1 == "" {
			t.Skip("no v1 cgroup: threads are not placed")
		}
		// A thread of the node still in the v1 cgroup (a call's forking
		// thread not yet ended) keeps it from being reused, and is not
		// killed for it.
		hold := make(chan struct{})
		joined := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			joined <- g.join()
			<-hold
		}()
		if err := <-joined; err != nil {
			t.Fatal(err)
		}
		if g.drain(50 * time.Millisecond) {
			t.Error("cgroups holding a thread were drained")
		}
		close(hold)
		waitFor(t, 5*time.Second, "the thread to leave the cgroup", g.empty)
	})
}

// TestCgroupKilledNotReused shows why a killed cgroup is never reused: a
// process cloned into a v2 cgroup after a cgroup.kill is killed at once.
func TestCgroupKilledNotReused(t *testing.T) {
	c := detectContainment(8)
	t.Cleanup(func() { _ = c.close() })
	if c.v2 == "" {
		t.Skip("no cgroup v2 for calls on this host")
	}
	g, err := c.newCall()
	if err != nil {
		t.Fatal(err)
	}
	defer g.finish()
	run := func() error {
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		g.setAttr(cmd.SysProcAttr)
		return cmd.Run()
	}
	if err := run(); err != nil {
		t.Fatalf("control: before any kill: %v", err)
	}
	if err := os.WriteFile(filepath.Join(g.v2, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := run(); err == nil {
		t.Log("this kernel lets a process start in a cgroup killed before; reusing one would be safe here")
	} else {
		t.Logf("after cgroup.kill: %v", err)
	}
}

// cgroupMount returns where the cgroup v2 hierarchy (v1: the pids one) is
// mounted, "" when it is not.
func cgroupMount(t *testing.T, v1 bool) string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		i := slices.Index(f, "-")
		if i < 5 || i+3 >= len(f) || f[3] != "/" {
			continue
		}
		if !v1 && f[i+1] == "cgroup2" || v1 && f[i+1] == "cgroup" && hasItem(f[i+3], "pids") {
			return f[4]
		}
	}
	return ""
}

// TestRun_ReusedCgroupCarriesNothing runs calls one after another,
// alternately leaving an orphan behind and leaving nothing, until one runs
// in cgroups an earlier call held: no process of an earlier call is in
// them, every earlier orphan is gone, and cgroups that held an orphan are
// never given to another call.
func TestRun_ReusedCgroupCarriesNothing(t *testing.T) {
	r := newTestSandbox(t, nil)
	needCgroup(t, r)
	v2, v1 := cgroupMount(t, false), cgroupMount(t, true)
	list := `cg2=$(sed -n 's/^0:://p' /proc/self/cgroup)
cg1=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup)
m=""
if [ -n "` + v2 + `" ] && [ -f "` + v2 + `$cg2/cgroup.procs" ]; then m="$m $(cat "` + v2 + `$cg2/cgroup.procs")"; fi
if [ -n "` + v1 + `" ] && [ -n "$cg1" ]; then m="$m $(cat "` + v1 + `$cg1/cgroup.procs")"; fi
echo "cgroups $cg2 $cg1"
echo "members" $m`
	clean := map[string]bool{}  // cgroups of calls that left nothing
	killed := map[string]bool{} // of calls that left an orphan
	var orphans []int
	reused := false
	for i := 0; i < 16 && !reused; i++ {
		dir := t.TempDir()
		leave := i%2 == 0
		script := list
		if leave {
			script = orphanScript(list)
		}
		out, err := r.run(context.Background(), tool{Cmd: script, Cwd: dir})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		var cgroups string
		var members []int
		for _, line := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(line, "cgroups "); ok {
				cgroups = s
			}
			if s, ok := strings.CutPrefix(line, "members"); ok {
				for _, f := range strings.Fields(s) {
					if pid, err := strconv.Atoi(f); err == nil {
						members = append(members, pid)
					}
				}
			}
		}
		if cgroups == "" || len(members) == 0 {
			t.Fatalf("call %d printed %q", i, out)
		}
		for _, pid := range orphans {
			if slices.Contains(members, pid) {
				t.Errorf("call %d (cgroups %s) shares them with %d, an earlier call's orphan", i, cgroups, pid)
			}
		}
		if killed[cgroups] {
			t.Errorf("call %d runs in cgroups %s, killed for an earlier call", i, cgroups)
		}
		reused = clean[cgroups]
		if leave {
			killed[cgroups] = true
			pid := readPid(t, filepath.Join(dir, "orphan"))
			if !slices.Contains(members, pid) {
				t.Errorf("call %d: its own orphan %d is not among the members %v: the listing proves nothing", i, pid, members)
			}
			orphans = append(orphans, pid)
			waitFor(t, 5*time.Second, fmt.Sprintf("the orphan %d to be gone", pid), func() bool { return processGone(pid) })
		} else {
			clean[cgroups] = true
		}
		r.idle() // the call's cgroups back in the pool
	}
	if !reused {
		t.Fatalf("no call ran in cgroups an earlier one held: %v", clean)
	}
}
