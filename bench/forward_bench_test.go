package bench

import (
	"fmt"
	"testing"
	"time"
)

// forwardSettings are the node's default (the commit notice, CommitTimeout
// 250 ms) and the same at hashicorp/raft's own CommitTimeout (50 ms).
var forwardSettings = []struct {
	name  string
	flags []string
}{
	{"notice,commit=250ms", nil},
	{"notice,commit=50ms", []string{"-raft-commit-timeout", "50ms"}},
}

// BenchmarkForwardedWrites measures one client writing (tool_load and
// tool_unload on its own agent) on the leader and one on a follower, on
// a three-node cluster per setting, so the follower/leader ratio of each
// setting comes from one cluster in one run.
func BenchmarkForwardedWrites(b *testing.B) {
	for _, s := range forwardSettings {
		b.Run(s.name, func(b *testing.B) {
			order, _ := benchSession(b, startClusterWith(b, 3, s.flags...))
			var ws []writer
			for i, n := range order[:2] {
				w, err := newCtlWriter(n.p9, "bench", fmt.Sprintf("a%d", i), 60*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				defer w.close()
				ws = append(ws, w)
			}
			b.Run("leader", func(b *testing.B) { runWrites(b, ws[:1]) })
			b.Run("follower", func(b *testing.B) { runWrites(b, ws[1:2]) })
			// Agent creation: its forwarding waits until the follower has
			// applied it, which is what the notice (or nudge) is for.
			for i, where := range []string{"leader", "follower"} {
				seq := 0 // across the runs b.Run makes
				b.Run("agent-new,"+where, func(b *testing.B) {
					conn, err := dial9(order[i].p9)
					if err != nil {
						b.Fatal(err)
					}
					defer conn.close()
					b.ResetTimer()
					for range b.N {
						seq++
						if _, err := conn.ask("session/bench/agent/new", fmt.Sprintf("name=%s%d", where, seq)); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkIdleCPU measures the CPU all node processes of an idle cluster
// use, in percent of one core, at the default CommitTimeout (250 ms), the
// library's 50 ms and 5 ms, for 3 and 10 nodes (5 voters). b.N
// is ignored beyond the first iteration: each sample is a 5 s window
// after the cluster settled. BenchmarkScale measures more, per process.
func BenchmarkIdleCPU(b *testing.B) {
	for _, size := range []int{3, 10} {
		for _, s := range []struct {
			name  string
			flags []string
		}{
			{"commit=250ms", nil},
			{"commit=50ms", []string{"-raft-commit-timeout", "50ms"}},
			{"commit=5ms", []string{"-raft-commit-timeout", "5ms"}},
		} {
			b.Run(fmt.Sprintf("nodes=%d,%s", size, s.name), func(b *testing.B) {
				c := startClusterWith(b, size, s.flags...)
				// A quiet window on purpose (the voters are in already): the
				// joins' catch-up work stays out of the measured CPU.
				time.Sleep(3 * time.Second)
				const window = 5 * time.Second
				b.ResetTimer()
				var pct float64
				for range b.N {
					before := cpuTicks(b, c)
					time.Sleep(window)
					pct = 100 * float64(cpuTicks(b, c)-before) / clockTicks / window.Seconds()
				}
				b.ReportMetric(pct, "%core")
			})
		}
	}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times (100 on
// Linux).
const clockTicks = 100

// cpuTicks sums utime and stime of every node process of c.
func cpuTicks(b *testing.B, c *tcluster) int64 {
	return int64(cpuTicksOf(b, c))
}

func cpuTicksOf(tb testing.TB, c *tcluster) uint64 { return procsTicks(tb, c.procs()) }

// procsTicks sums utime and stime of the processes ps.
func procsTicks(tb testing.TB, ps []*proc) uint64 {
	var sum uint64
	for _, p := range ps {
		sum += procTicks(tb, p.cmd.Process.Pid)
	}
	return sum
}

// procs are the node processes of c.
func (c *tcluster) procs() []*proc {
	ps := make([]*proc, len(c.nodes))
	for i, n := range c.nodes {
		ps[i] = n.p
	}
	return ps
}

// BenchmarkAgentReads measures one client reading an agent's loaded set
// (walk, open, read, clunk of session/S/agent/A/tools) on the leader,
// which answers from its own state, and on a follower, which first checks
// the leader's commit index (a ReadIndex round trip, shared by the reads
// of 10 ms).
func BenchmarkAgentReads(b *testing.B) {
	order, admin := benchSession(b, startCluster(b, 3))
	if _, err := admin.ask("session/bench/agent/new", "name=r"); err != nil {
		b.Fatal(err)
	}
	for _, where := range []struct {
		name string
		n    *tnode
	}{{"leader", order[0]}, {"follower", order[1]}} {
		b.Run(where.name, func(b *testing.B) {
			conn, err := dial9(where.n.p9)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.close()
			b.ResetTimer()
			for range b.N {
				if _, err := conn.read("session/bench/agent/r/tools"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchSession waits for c's three voters and makes session "bench"
// through the leader. It returns c's nodes leader first and an admin
// connection to the leader, closed when tb ends.
func benchSession(tb testing.TB, c *tcluster) ([]*tnode, *conn9) {
	tb.Helper()
	order := c.leaderFirst(c.waitVoters(c.nodes[0], 3, 60*time.Second))
	admin, err := dial9(order[0].p9)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(admin.close)
	if _, err := admin.ask("session/new", "name=bench"); err != nil {
		tb.Fatal(err)
	}
	return order, admin
}

// startClusterWith is startCluster with flags every node gets.
func startClusterWith(tb testing.TB, size int, flags ...string) *tcluster {
	tb.Helper()
	c := newTCluster(tb)
	c.extra = flags
	return startClusterOf(tb, c, size)
}
