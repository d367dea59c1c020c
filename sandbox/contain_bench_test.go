//go:build linux

package sandbox

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkRunContain prices each way of holding a call's processes, side
// by side: every iteration makes the same sandboxed call of /bin/true once
// in each way, in turn, so that a busy host slows them all alike. The
// ways: only the process group killed (none, the baseline); a cgroup v2
// killed with cgroup.kill (v2); a v1 pids cgroup, for the process limit
// (v1pids); both (cgroup, what a hybrid host gets); the node as child
// subreaper sweeping its orphans after each call (subreaper). It reports
// ms per call of each, and each one's ratio to none.
func BenchmarkRunContain(b *testing.B) {
	probe := newTestSandbox(b, nil)
	found := probe.containment()
	type way struct {
		name string
		c    *containment
	}
	ways := []way{{"none", nil}}
	if found.v2 != "" {
		ways = append(ways, way{"v2", &containment{maxProcs: DefaultMaxProcs, v2: found.v2, v2Pids: found.v2Pids}})
	}
	if found.v1 != "" {
		ways = append(ways, way{"v1pids", &containment{maxProcs: DefaultMaxProcs, v1: found.v1}})
	}
	if found.v2 != "" || found.v1 != "" {
		ways = append(ways, way{"cgroup", found})
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err == nil {
		b.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
		ways = append(ways, way{"subreaper", &containment{maxProcs: DefaultMaxProcs, subreaper: true}})
	}
	runners := make([]*testSandbox, len(ways))
	for i, w := range ways {
		r := newTestSandbox(b, nil)
		withContainment(r, w.c)
		b.Cleanup(func() {
			if r.contain != nil && r.contain != found {
				_ = r.contain.close() // its pooled call cgroups
			}
			r.contain = nil // the probe's cgroups are removed once, by the probe
		})
		runners[i] = r
	}
	inv := tool{Exec: "/bin/true", Args: benchArgs}
	ctx := context.Background()
	spent := make([]time.Duration, len(ways))
	n := 0
	for b.Loop() {
		for i, r := range runners {
			start := time.Now()
			if _, err := r.run(ctx, inv); err != nil {
				b.Fatalf("%s: %v", ways[i].name, err)
			}
			spent[i] += time.Since(start)
		}
		n++
	}
	for i, w := range ways {
		b.ReportMetric(float64(spent[i].Microseconds())/1000/float64(n), "ms/call-"+w.name)
		if i > 0 {
			b.ReportMetric(float64(spent[i])/float64(spent[0]), "x-"+w.name)
		}
	}
}

// BenchmarkContainOverhead is what each way adds to a call without the
// call: making, killing and removing an empty call cgroup (v2, v1pids,
// cgroup), and the subreaper's sweep finding no orphan (subreaper).
func BenchmarkContainOverhead(b *testing.B) {
	probe := newTestSandbox(b, nil)
	found := probe.containment()
	for _, w := range []struct {
		name string
		c    *containment
	}{
		{"v2", &containment{maxProcs: DefaultMaxProcs, v2: found.v2, v2Pids: found.v2Pids}},
		{"v1pids", &containment{maxProcs: DefaultMaxProcs, v1: found.v1}},
		{"cgroup", found},
	} {
		b.Run(w.name, func(b *testing.B) {
			if w.c.v2 == "" && w.c.v1 == "" {
				b.Skip("not on this host")
			}
			for b.Loop() {
				g, err := w.c.newCall()
				if err != nil {
					b.Fatal(err)
				}
				g.kill()
				g.finish()
			}
		})
	}
	b.Run("subreaper", func(b *testing.B) {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			b.Skip(err)
		}
		defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		for b.Loop() {
			sweepOrphans(true, pipeGrace)
		}
	})
}
