//go:build linux

package registry

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkRunContain prices each way of holding a call's processes, side
// by side in one run: the same sandboxed call of /bin/true with only its
// process group killed (none, the baseline), in a cgroup v2 killed with
// cgroup.kill (v2), with a v1 pids cgroup for the process limit (v1pids),
// with both (cgroup, what a hybrid host gets), and as a child subreaper
// that sweeps its orphans after each call (subreaper).
func BenchmarkRunContain(b *testing.B) {
	probe := newTestRunner(b, nil)
	found := probe.containment()
	cases := []struct {
		name string
		c    func() *containment
		ok   bool
	}{
		{"none", func() *containment { return nil }, true},
		{"v2", func() *containment {
			return &containment{maxProcs: DefaultMaxProcs, v2: found.v2, v2Pids: found.v2Pids}
		}, found.v2 != ""},
		{"v1pids", func() *containment { return &containment{maxProcs: DefaultMaxProcs, v1: found.v1} }, found.v1 != ""},
		{"cgroup", func() *containment { return found }, found.v2 != "" || found.v1 != ""},
		{"subreaper", func() *containment { return &containment{maxProcs: DefaultMaxProcs, subreaper: true} }, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if !tc.ok {
				b.Skip("not on this host")
			}
			if tc.name == "subreaper" {
				if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
					b.Skip(err)
				}
				defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
			}
			r := newTestRunner(b, nil)
			withContainment(r, tc.c())
			b.Cleanup(func() { r.contain = nil }) // the probe's cgroups are removed once, by the probe

			benchRun(b, r)
		})
	}
}
