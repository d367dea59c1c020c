//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// kernelLeg is one way of running the same exec, for BenchmarkSandboxKernel:
// which of the sandbox's kernel-side protections the tool starts under.
type kernelLeg struct {
	name string
	cg   string // "": none; "fresh": new cgroups each exec; "reused": the same ones, emptied
	v2   bool   // the v2 cgroup (clone3 CLONE_INTO_CGROUP)
	v1   bool   // the v1 pids cgroup (the forking thread joins it)
	nnp  bool   // no_new_privs
	caps bool   // capabilities dropped (only as root)
	ll   string // "": no Landlock; "root": one read rule on /; "view": the node's read view
	// Landlock scoping of signals and abstract unix sockets (with ll).
	scoped bool

	reused   *callGroup // the cgroups a "reused" leg keeps
	samples  [][4]time.Duration
	rmCPU    []time.Duration // the cgroups' removal, CPU of the thread doing it
	rmWall   []time.Duration
	rulesets map[string]int
}

// BenchmarkSandboxKernel prices each kernel-side protection of a sandboxed
// call on its own: the same fork+exec+wait of /bin/true (the arguments on
// its standard input, from a locked thread of its own that ends after the
// exec, as a call's) under nothing, under each protection alone, and
// under all of them, every leg in every iteration in a rotating order so
// that all see the same load. What is made ahead in a Sandbox (cgroups, the
// thread's cgroup join, the ruleset) is made outside the timed part; the
// timed part is what stays on a call's path: landlock_restrict_self, the
// fork (cmd.Start), and the tool's run until it exited. Each leg reports
// medians: its whole (LEG-µs), its fork and run, the tool's own CPU time
// (utime+stime of the child, LEG-cpu-µs), the forking thread's CPU time in
// cmd.Start (LEG-forkcpu-µs), and the median per-iteration difference from
// the plain leg (LEG-added-µs); legs with fresh cgroups report their
// removal (rm-µs, rm-cpu-µs: wall and CPU of rmdir once empty).
func BenchmarkSandboxKernel(b *testing.B) {
	abi, err := Status()
	if err != nil {
		b.Skip(err)
	}
	c := detectContainment(64)
	b.Cleanup(func() { _ = c.close() })
	if c.v2 == "" && c.v1 == "" {
		b.Skip("no cgroup to run in")
	}
	view := newFSView(nodeLayout(b))
	b.Cleanup(view.close)
	scratch := b.TempDir()
	root := os.Geteuid() == 0

	legs := []*kernelLeg{
		{name: "plain"},
		{name: "cg_fresh", cg: "fresh", v2: c.v2 != "", v1: c.v1 != ""},
		{name: "cg2_fresh", cg: "fresh", v2: c.v2 != ""},
		{name: "cg1_fresh", cg: "fresh", v1: c.v1 != ""},
		{name: "cg_reused", cg: "reused", v2: c.v2 != "", v1: c.v1 != ""},
		{name: "nnp", nnp: true},
		{name: "caps", nnp: true, caps: root},
		{name: "ll_root", nnp: true, ll: "root"},
		{name: "ll_root_scoped", nnp: true, ll: "root", scoped: true},
		{name: "ll_view", nnp: true, ll: "view"},
		{name: "ll_view_scoped", nnp: true, ll: "view", scoped: true},
		{name: "all_fresh", cg: "fresh", v2: c.v2 != "", v1: c.v1 != "", nnp: true, caps: root, ll: "view", scoped: true},
		{name: "all_reused", cg: "reused", v2: c.v2 != "", v1: c.v1 != "", nnp: true, caps: root, ll: "view", scoped: true},
	}
	// ruleset is the node's ruleset (newRuleset) for ll_view_scoped and
	// the all_ legs; the other legs' are built here as variants of it:
	// without scoping, and with one read rule on / for the read view.
	ruleset := func(l *kernelLeg) int {
		if l.ll == "view" && l.scoped {
			fd, _, err := newRuleset(&sandboxSpec{view: view, scratch: scratch}, abi)
			if err != nil {
				b.Fatal(err)
			}
			return fd
		}
		handled, scoped := handledFS(abi), scopes(abi)
		if !l.scoped {
			scoped = 0
		}
		fd, err := llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: handled, Scoped: scoped}, 0)
		if err != nil {
			b.Fatal(err)
		}
		if l.ll == "root" {
			err = addPathRule(fd, "/", roDirAccess, 0, false)
		} else {
			_, err = addView(fd, view, handled)
		}
		if err == nil {
			err = addPathRule(fd, scratch, handled, fileRWAccess&handled, false)
		}
		for _, p := range writableDevices {
			if err == nil {
				err = addPathRule(fd, p, 0, deviceAccess&handled, true)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		return fd
	}
	for _, l := range legs {
		if l.cg == "reused" {
			if l.reused, err = c.newCall(); err != nil {
				b.Fatal(err)
			}
			l.reused = l.reused.only(l.v2, l.v1)
			g := l.reused
			b.Cleanup(func() { g.finish() })
		}
	}
	iter := 0
	for b.Loop() {
		for k := range legs {
			l := legs[(k+iter)%len(legs)]
			l.samples = append(l.samples, kernelExec(b, c, l, ruleset))
		}
		iter++
	}
	med := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Nanoseconds()) / 1e3
	}
	col := func(l *kernelLeg, i int) []time.Duration {
		var d []time.Duration
		for _, s := range l.samples {
			d = append(d, s[i])
		}
		return d
	}
	total := func(s [4]time.Duration) time.Duration { return s[0] + s[1] }
	plain := legs[0]
	for _, l := range legs {
		var all, added []time.Duration
		for i, s := range l.samples {
			all = append(all, total(s))
			added = append(added, total(s)-total(plain.samples[i]))
		}
		b.ReportMetric(med(all), l.name+"-µs")
		b.ReportMetric(med(col(l, 0)), l.name+"-fork-µs")
		b.ReportMetric(med(col(l, 1)), l.name+"-run-µs")
		b.ReportMetric(med(col(l, 2)), l.name+"-cpu-µs")
		b.ReportMetric(med(col(l, 3)), l.name+"-forkcpu-µs")
		if l != plain {
			b.ReportMetric(med(added), l.name+"-added-µs")
		}
		if len(l.rmWall) > 0 {
			b.ReportMetric(med(l.rmWall), l.name+"-rm-µs")
			b.ReportMetric(med(l.rmCPU), l.name+"-rm-cpu-µs")
		}
	}
}

// only is g without the cgroups not wanted; the cgroups left out are
// removed.
func (g *callGroup) only(v2, v1 bool) *callGroup {
	drop := &callGroup{v2fd: -1}
	if !v2 && g.v2 != "" {
		drop.v2, drop.v2fd, drop.events = g.v2, g.v2fd, g.events
		g.v2, g.v2fd, g.events = "", -1, nil
	}
	if !v1 && g.v1 != "" {
		drop.v1, drop.cur1 = g.v1, g.cur1
		g.v1, g.cur1 = "", nil
	}
	drop.finish()
	return g
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// kernelExec runs /bin/true once as leg l says, and returns the fork's
// wall time, the tool's run to its exit, its CPU time, and the forking
// thread's CPU time in the fork.
func kernelExec(b *testing.B, c *containment, l *kernelLeg, ruleset func(*kernelLeg) int) (s [4]time.Duration) {
	// Ahead of the call, untimed: cgroups, ruleset, the thread joined.
	g := l.reused
	if l.cg == "fresh" {
		var err error
		if g, err = c.newCall(); err != nil {
			b.Fatal(err)
		}
		g = g.only(l.v2, l.v1)
	}
	fd := -1
	if l.ll != "" {
		fd = ruleset(l)
		defer unix.Close(fd)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	_, _ = inW.Write(benchArgs)
	_ = inW.Close()
	defer inR.Close()

	type result struct {
		s   [4]time.Duration
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		r.err = func() error {
			if err := g.join(); err != nil {
				return err
			}
			if l.caps {
				if err := dropCapabilities(); err != nil {
					return err
				}
			}
			if l.nnp {
				if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
					return err
				}
			}
			cmd := exec.Command("/bin/true")
			cmd.Stdin = inR
			cmd.SysProcAttr = procAttr()
			g.setAttr(cmd.SysProcAttr)
			t0 := time.Now()
			c0 := threadCPU()
			if fd >= 0 {
				if err := llsys.LandlockRestrictSelf(fd, 0); err != nil {
					return err
				}
			}
			if err := cmd.Start(); err != nil {
				return err
			}
			r.s[3] = threadCPU() - c0
			t1 := time.Now()
			waitLeader(cmd)
			t2 := time.Now()
			if err := cmd.Wait(); err != nil {
				return err
			}
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			r.s[0], r.s[1] = t1.Sub(t0), t2.Sub(t1)
			r.s[2] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			return nil
		}()
		done <- r
	}()
	r := <-done
	if r.err != nil {
		b.Fatal(r.err)
	}
	// After the call, untimed: wait until the thread has left the v1
	// cgroup, then remove fresh cgroups (timed on their own).
	if g != nil && g.v1 != "" {
		deadline := time.Now().Add(5 * time.Second)
		for len(cgroupPids(g.v1, "tasks")) > 0 {
			if time.Now().After(deadline) {
				b.Fatal("the forking thread did not leave the v1 cgroup")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	if g != nil && g.v2 != "" {
		deadline := time.Now().Add(5 * time.Second)
		for g.populated() {
			if time.Now().After(deadline) {
				b.Fatal("the v2 cgroup stayed populated")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	if l.cg == "fresh" {
		runtime.LockOSThread()
		t0, c0 := time.Now(), threadCPU()
		g.finish()
		l.rmCPU = append(l.rmCPU, threadCPU()-c0)
		l.rmWall = append(l.rmWall, time.Since(t0))
		runtime.UnlockOSThread()
	}
	return r.s
}
