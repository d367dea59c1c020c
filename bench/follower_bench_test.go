package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// BenchmarkFollowerWrites measures writes through a follower against the
// same writes through the leader, on one three-node cluster per setting,
// and a three-member etcd's puts and deletes through a follower and
// through its leader, all in one run: 1 client, then 16, all on the one
// node. The writes: tool_load/tool_unload on the client's own agent
// (answered once the leader committed them; the follower's next agent
// read waits to have applied them), and agent/new in a session of the
// client's own (answered once the leader committed it too; a walk into
// the agent waits for it), whose 9P steps each report their mean time. The settings: the commit notice (the
// default) and the Barrier nudge it replaces (-raft-nudge-barrier); and,
// when TOOLNODE_BENCH_BASELINE names another toolnode binary, that
// binary's default: before and after in one run. Every leg also reports
// cpu-µs/write: the CPU (user and system, /proc/PID/stat) of all three
// processes of its cluster over the leg, per write.
func BenchmarkFollowerWrites(b *testing.B) {
	clients := []int{1, 16}
	type setting struct {
		name  string
		bin   string // "": this tree's binary
		flags []string
	}
	settings := []setting{
		{"notice", "", nil},
		{"barrier", "", []string{"-raft-nudge-barrier"}},
	}
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		settings = append(settings, setting{"baseline", bin, nil})
	}
	for _, s := range settings {
		b.Run("toolnode,"+s.name, func(b *testing.B) {
			c := newTCluster(b)
			if s.bin != "" {
				c.bin = s.bin
			}
			c.extra = s.flags
			order, admin := benchSession(b, startClusterOf(b, c, 3))
			sessions := 0
			for _, k := range clients {
				for i, where := range []string{"leader", "follower"} {
					ws := make([]writer, k)
					for j := range ws {
						w, err := newCtlWriter(order[i].p9, "bench", fmt.Sprintf("%s%d-%d", where, k, j), 60*time.Second)
						if err != nil {
							b.Fatal(err)
						}
						defer w.close()
						ws[j] = w
					}
					b.Run(fmt.Sprintf("load,clients=%d,%s", k, where), func(b *testing.B) {
						cpu := clusterCPU(b, c.procs())
						runWrites(b, ws)
						cpu.report(b)
					})
				}
				for i, where := range []string{"leader", "follower"} {
					ws := make([]writer, k)
					for j := range ws {
						conn, err := dial9(order[i].p9)
						if err != nil {
							b.Fatal(err)
						}
						defer conn.close()
						ws[j] = &agentNewWriter{conn: conn, admin: admin}
					}
					b.Run(fmt.Sprintf("agent-new,clients=%d,%s", k, where), func(b *testing.B) {
						// A fresh session per writer and round keeps the
						// sessions small: each new agent copies its
						// session's agent map.
						for _, w := range ws {
							sessions++
							if err := w.(*agentNewWriter).newSession(fmt.Sprintf("b%d", sessions)); err != nil {
								b.Fatal(err)
							}
							w.(*agentNewWriter).steps = [4]time.Duration{}
						}
						cpu := clusterCPU(b, c.procs())
						runWrites(b, ws)
						cpu.report(b)
						reportSteps(b, ws, b.N)
					})
				}
			}
		})
	}
	b.Run("etcd", func(b *testing.B) {
		ec := startEtcd(b, 3)
		order := ec.leaderFirst(b)
		hc := etcdHTTP()
		defer hc.CloseIdleConnections()
		for _, k := range clients {
			for i, where := range []string{"leader", "follower"} {
				ws := make([]writer, k)
				for j := range ws {
					ws[j] = warmEtcdWriter(b, hc, order[i], fmt.Sprintf("/bench/%s%d-%d/loaded/%s", where, k, j, benchTool))
				}
				b.Run(fmt.Sprintf("put,clients=%d,%s", k, where), func(b *testing.B) {
					cpu := clusterCPU(b, ec.procs)
					runWrites(b, ws)
					cpu.report(b)
				})
			}
		}
	})
}

// cpuMeter is the CPU of a set of processes since it was made.
type cpuMeter struct {
	procs  []*proc
	before int64
}

// clusterCPU starts measuring the CPU of procs.
func clusterCPU(b *testing.B, procs []*proc) *cpuMeter {
	m := &cpuMeter{procs: procs}
	m.before = m.ticks(b)
	return m
}

func (m *cpuMeter) ticks(b *testing.B) int64 {
	var sum int64
	for _, p := range m.procs {
		sum += int64(procTicks(b, p.cmd.Process.Pid))
	}
	return sum
}

// report reports the CPU spent since the meter was made per iteration,
// in µs, as cpu-µs/write.
func (m *cpuMeter) report(b *testing.B) {
	us := float64(m.ticks(b)-m.before) * 1e6 / clockTicks
	b.ReportMetric(us/float64(b.N), "cpu-µs/write")
}

// agentNewWriter makes agents in its session through session/S/agent/new,
// each on a fid of its own, as 9p rdwr does: a walk and an open, the
// write, reads until one returns nothing, a clunk. It adds the time of
// each step to steps.
type agentNewWriter struct {
	conn    *conn9
	admin   *conn9 // makes the sessions, on the cluster of conn
	session string
	seq     int
	steps   [4]time.Duration // walk+open, write, read, clunk
}

func (w *agentNewWriter) write() error {
	w.seq++
	t0 := time.Now()
	fid, err := w.conn.fsys.Open("session/"+w.session+"/agent/new", plan9.ORDWR)
	if err != nil {
		return err
	}
	t1 := time.Now()
	if _, err := fid.WriteAt([]byte(fmt.Sprintf("name=a%d", w.seq)), 0); err != nil {
		fid.Close()
		return err
	}
	t2 := time.Now()
	_, err = readAll(fid)
	t3 := time.Now()
	fid.Close()
	t4 := time.Now()
	for i, d := range []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)} {
		w.steps[i] += d
	}
	return err
}

// reportSteps reports the mean time of each step of ws' writes since
// their steps were last zeroed, over n writes.
func reportSteps(b *testing.B, ws []writer, n int) {
	var sum [4]time.Duration
	for _, w := range ws {
		a := w.(*agentNewWriter)
		for i := range sum {
			sum[i] += a.steps[i]
		}
		a.steps = [4]time.Duration{}
	}
	for i, name := range []string{"open-µs", "write-µs", "read-µs", "clunk-µs"} {
		b.ReportMetric(float64(sum[i].Microseconds())/float64(n), name)
	}
}

func (w *agentNewWriter) close() { w.conn.close() }

// newSession makes session name through w.admin; w's agents go in it.
func (w *agentNewWriter) newSession(name string) error {
	w.session = name
	_, err := w.admin.ask("session/new", "name="+name)
	return err
}

// BenchmarkFollowerWritesInterleaved is BenchmarkFollowerWrites with
// its legs interleaved, so that all see the same load on a busy machine:
// each iteration makes writes of every leg in turn, agent/new and
// tool_load/tool_unload through a toolnode follower and through its
// leader, a put or delete through an etcd follower and through its
// leader (skipped without etcd), and, when TOOLNODE_BENCH_BASELINE names
// another toolnode binary, agent/new through a follower and the leader of
// a cluster of that binary. With clients=1 an iteration is one write of
// each leg; with clients=16 it is a burst of each leg's 16 clients
// writing at once, fwdBurst writes each, timed from the first write's
// start to the last one's end. It reports each leg's writes/s and the
// ratios the goals name, and for the agent/new and etcd legs the CPU
// time of the leg's cluster (all three processes, from
// /proc/PID/task/*/schedstat around each burst) per write, and how many
// times its threads were put on a CPU per write.
func BenchmarkFollowerWritesInterleaved(b *testing.B) {
	const maxClients = 16
	type leg struct {
		name   string
		ws     []writer
		procs  []*proc // the processes of its cluster
		d, cpu time.Duration
		wakes  int64
	}
	var legs []*leg
	add := func(name string, procs []*proc, ws []writer) {
		for _, w := range ws {
			b.Cleanup(w.close)
		}
		legs = append(legs, &leg{name: name, procs: procs, ws: ws})
	}
	agentNew := func(prefix string, c *tcluster, order []*tnode, admin *conn9) {
		for i, where := range []string{"leader", "follower"} {
			ws := make([]writer, maxClients)
			for j := range ws {
				conn, err := dial9(order[i].p9)
				if err != nil {
					b.Fatal(err)
				}
				ws[j] = &agentNewWriter{conn: conn, admin: admin}
			}
			add(prefix+"agent-new,"+where, c.procs(), ws)
		}
	}
	tc := startClusterWith(b, 3)
	order, admin := benchSession(b, tc)
	agentNew("", tc, order, admin)
	for i, where := range []string{"leader", "follower"} {
		ws := make([]writer, maxClients)
		for j := range ws {
			w, err := newCtlWriter(order[i].p9, "bench", fmt.Sprintf("il-%s-%d", where, j), 60*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			ws[j] = w
		}
		add("load,"+where, tc.procs(), ws)
	}
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		c := newTCluster(b)
		c.bin = bin
		order, admin := benchSession(b, startClusterOf(b, c, 3))
		agentNew("baseline,", c, order, admin)
	}
	if _, err := exec.LookPath("etcd"); err == nil {
		ec := startEtcd(b, 3)
		order := ec.leaderFirst(b)
		hc := etcdHTTP()
		b.Cleanup(hc.CloseIdleConnections)
		for i, where := range []string{"leader", "follower"} {
			ws := make([]writer, maxClients)
			for j := range ws {
				ws[j] = warmEtcdWriter(b, hc, order[i], fmt.Sprintf("/bench/il-%s-%d/loaded/%s", where, j, benchTool))
			}
			add("etcd,"+where, ec.procs, ws)
		}
	}
	sessions := 0
	for _, clients := range []int{1, maxClients} {
		burst := 1
		if clients > 1 {
			burst = fwdBurst
		}
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			for _, l := range legs {
				l.d, l.cpu, l.wakes = 0, 0, 0
				for _, w := range l.ws[:clients] {
					if a, ok := w.(*agentNewWriter); ok {
						// A fresh session per writer and round, as in
						// BenchmarkFollowerWrites.
						sessions++
						if err := a.newSession(fmt.Sprintf("il%d", sessions)); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ResetTimer()
			for range b.N {
				for _, l := range legs {
					cpu0, wakes0 := procsSched(b, l.procs)
					d, err := writeBurst(l.ws[:clients], burst)
					if err != nil {
						b.Fatalf("%s: %v", l.name, err)
					}
					cpu1, wakes1 := procsSched(b, l.procs)
					l.d += d
					l.cpu += cpu1 - cpu0
					l.wakes += wakes1 - wakes0
				}
			}
			b.StopTimer()
			rate := map[string]float64{}
			cpu := map[string]float64{}
			writes := float64(b.N * clients * burst)
			for _, l := range legs {
				rate[l.name] = writes / l.d.Seconds()
				b.ReportMetric(rate[l.name], l.name+"-writes/s")
				if strings.Contains(l.name, "agent-new") || strings.HasPrefix(l.name, "etcd") {
					cpu[l.name] = float64(l.cpu.Microseconds()) / writes
					b.ReportMetric(cpu[l.name], l.name+"-cpu-µs/write")
					b.ReportMetric(float64(l.wakes)/writes, l.name+"-wakeups/write")
				}
			}
			if cpu["agent-new,follower"] > 0 && cpu["baseline,agent-new,follower"] > 0 {
				b.ReportMetric(cpu["agent-new,follower"]/cpu["baseline,agent-new,follower"], "agent-new-follower-cpu/baseline")
			}
			ratio := func(name, a, c string) {
				if rate[a] > 0 && rate[c] > 0 {
					b.ReportMetric(rate[a]/rate[c], name)
				}
			}
			ratio("agent-new-follower/leader", "agent-new,follower", "agent-new,leader")
			ratio("agent-new-follower/etcd-follower", "agent-new,follower", "etcd,follower")
			ratio("load-follower/leader", "load,follower", "load,leader")
			ratio("load-follower/etcd-follower", "load,follower", "etcd,follower")
			ratio("agent-new-follower/baseline", "agent-new,follower", "baseline,agent-new,follower")
			ratio("baseline-agent-new-follower/etcd-follower", "baseline,agent-new,follower", "etcd,follower")
			ratio("baseline-agent-new-follower/leader", "baseline,agent-new,follower", "baseline,agent-new,leader")
		})
	}
}

// procsSched sums the CPU time and the times put on a CPU of the threads
// of procs (/proc/PID/task/*/schedstat).
func procsSched(b *testing.B, procs []*proc) (time.Duration, int64) {
	var cpu time.Duration
	var wakes int64
	for _, p := range procs {
		run, n, err := schedstat(p.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		cpu += run
		wakes += n
	}
	return cpu, wakes
}

// fwdBurst is how many writes each of BenchmarkFollowerWritesInterleaved's
// 16 clients makes in one leg's burst.
const fwdBurst = 4

// writeBurst has each of ws make n writes, all at once (one alone in this
// goroutine), and returns the time from the start to the last one's end.
func writeBurst(ws []writer, n int) (time.Duration, error) {
	start := time.Now()
	if len(ws) == 1 {
		for range n {
			if err := ws[0].write(); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if errs[i] = w.write(); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}
