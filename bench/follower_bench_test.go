package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
// the agent waits for it), whose 9P steps each report their mean time. The settings: this tree's
// binary and, when TOOLNODE_BENCH_BASELINE names another toolnode binary,
// that binary's default: before and after in one run. Every leg also reports
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
	}
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		settings = append(settings, setting{"baseline", bin, nil})
	}
	for _, s := range settings {
		b.Run("toolnode,"+s.name, func(b *testing.B) {
			c := newTClusterOf(b, s.bin, s.flags)
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

func (m *cpuMeter) ticks(b *testing.B) int64 { return int64(procsTicks(b, m.procs)) }

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
// another toolnode binary, the same legs on a cluster of that binary
// (TOOLNODE_BENCH_BASELINE_ARGS adds flags to it; with
// TOOLNODE_BENCH_BASELINE naming this tree's binary, a setting of it).
// With clients=1 an iteration is one write of each leg; with clients=16
// it is a burst of each leg's 16 clients writing at once, fwdBurst
// writes each, timed from the first write's start to the last one's end.
// The legs run in a new order each iteration, so that no leg always
// follows the same one.
//
// The clusters compared carry the same load: three servers each, a
// toolnode cluster with no client node and nobody reading its events
// file, the etcd cluster with no watcher and no learner, etcd at its
// defaults; every write is one fsync'd commit acknowledged through the
// node the client talks to. One more toolnode cluster of this tree, the
// mixed one, has three servers and a client node (-voters 3), and
// agent/new legs through its leader, a follower and the client
// (mixed,agent-new,client: a non-leader that is no Raft server, as most
// nodes of a cluster of servers and clients are). (How soon a write is seen elsewhere, which
// needs a client node and readers of events, is BenchmarkWriteVisible.)
//
// It reports each leg's writes/s and the ratios the goals name; for
// every leg its cluster's CPU (user and system time of its processes,
// from /proc/PID/task/*/schedstat around each write or burst) per write,
// and how many times its threads were put on a CPU per write, and for a
// toolnode leg the same of each process (NAME-on-leader-...,
// -on-follower-, the one a follower leg writes through, -on-other-, and
// the mixed cluster's -on-client-); and the CPU all processes of each
// toolnode cluster spent per iteration (cpu-ms/iter: the mixed cluster
// runs only the agent/new legs). An agent/new
// leg also reports the client's mean time in each 9P step (NAME-open-µs:
// the walk and open, -write-µs, -read-µs, -clunk-µs), and each cluster
// how much longer a write through its follower took than one through its
// leader in the same iteration (agent-new-follower-extra-µs, the median).
// The hop sub-benchmark times the round trips a forward adds (see there).
func BenchmarkFollowerWritesInterleaved(b *testing.B) {
	const maxClients = 16
	type leg struct {
		name  string
		ws    []writer
		procs []*proc // the processes of its cluster
		// roles name procs, toolnode's leader first: each one's CPU and
		// wake-ups are reported too. nil: the sums alone (etcd).
		roles  []string
		d, cpu time.Duration
		wakes  int64
		each   []time.Duration // each iteration's time
		cpuOf  []time.Duration // by process
		wakeOf []int64
	}
	var legs []*leg
	add := func(name string, procs []*proc, ws []writer) {
		for _, w := range ws {
			b.Cleanup(w.close)
		}
		l := &leg{name: name, procs: procs, ws: ws}
		if !strings.HasPrefix(name, "etcd") {
			// The written-through node of a follower leg is the
			// follower; the other follower takes no part but Raft's;
			// a client (the mixed cluster's), in no Raft
			// configuration, is written through in its client leg and
			// follows a server's change stream in the others.
			l.roles = []string{"leader", "follower", "other", "client"}[:len(procs)]
		}
		legs = append(legs, l)
	}
	type clusterCPU struct {
		prefix string
		c      *tcluster
		ticks  uint64
	}
	var clusters []*clusterCPU
	var hopAddr string // this tree's cluster's follower, for the hop legs
	toolnode := func(prefix, bin string, mixed bool, flags ...string) {
		if mixed {
			flags = append(flags, "-voters", "3") // the fourth node is a client
		}
		c := newTClusterOf(b, bin, flags)
		startClusterOf(b, c, 3)
		var client *tnode
		if mixed {
			client = c.add("n4", []string{c.nodes[0].gossip})
			c.start(client)
			c.ready(client)
		}
		order, admin := benchSession(b, c)
		if prefix == "" {
			hopAddr = order[1].p9
		}
		procs := []*proc{order[0].p, order[1].p, order[2].p} // leader first
		wheres := []string{"leader", "follower"}
		if mixed {
			if order[3] != client {
				b.Fatalf("the client n4 is not last in the mixed cluster: %s", order[3].name)
			}
			procs = append(procs, client.p)
			wheres = append(wheres, "client")
		}
		for i, where := range wheres {
			via := order[i]
			if where == "client" {
				via = client
			}
			ws := make([]writer, maxClients)
			for j := range ws {
				conn, err := dial9(via.p9)
				if err != nil {
					b.Fatal(err)
				}
				ws[j] = &agentNewWriter{conn: conn, admin: admin}
			}
			add(prefix+"agent-new,"+where, procs, ws)
		}
		if mixed {
			clusters = append(clusters, &clusterCPU{prefix: prefix, c: c})
			return // its legs are the agent/new ones
		}
		for i, where := range []string{"leader", "follower"} {
			ws := make([]writer, maxClients)
			for j := range ws {
				w, err := newCtlWriter(order[i].p9, "bench", fmt.Sprintf("il-%s-%d", where, j), 60*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				ws[j] = w
			}
			add(prefix+"load,"+where, procs, ws)
		}
		clusters = append(clusters, &clusterCPU{prefix: prefix, c: c})
	}
	toolnode("", "", false)
	toolnode("mixed,", "", true)
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		toolnode("baseline,", bin, false, strings.Fields(os.Getenv("TOOLNODE_BENCH_BASELINE_ARGS"))...)
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
				l.d, l.cpu, l.wakes, l.each = 0, 0, 0, l.each[:0]
				l.cpuOf, l.wakeOf = make([]time.Duration, len(l.procs)), make([]int64, len(l.procs))
				for _, w := range l.ws[:clients] {
					if a, ok := w.(*agentNewWriter); ok {
						// A fresh session per writer and round, as in
						// BenchmarkFollowerWrites.
						sessions++
						if err := a.newSession(fmt.Sprintf("il%d", sessions)); err != nil {
							b.Fatal(err)
						}
						a.steps = [4]time.Duration{}
					}
				}
			}
			for _, cl := range clusters {
				cl.ticks = cpuTicksOf(b, cl.c)
			}
			// The legs run in a new order each iteration: a leg slows
			// the one after it (its cluster's work goes on after the
			// answer: the followers' apply, the commit notices, etcd's
			// own), and a cluster idle while the others wrote is slower
			// at its first write (its threads parked; on this VM a
			// wake-up costs ~1 ms), so no leg may always follow the same
			// one. (Turning the order, as before, kept each leg behind
			// the same one: the first toolnode cluster's leader leg
			// always came after etcd's, and ran at 0.81-0.87x the same
			// leg of an identical cluster.) The order is the same in
			// every run.
			rng := rand.New(rand.NewPCG(1, uint64(clients)))
			b.ResetTimer()
			for range b.N {
				for _, j := range rng.Perm(len(legs)) {
					l := legs[j]
					cpu0, wakes0 := procsSched(b, l.procs)
					d, err := writeBurst(l.ws[:clients], burst)
					if err != nil {
						b.Fatalf("%s: %v", l.name, err)
					}
					cpu1, wakes1 := procsSched(b, l.procs)
					l.d += d
					l.each = append(l.each, d)
					for i := range l.procs {
						l.cpu += cpu1[i] - cpu0[i]
						l.wakes += wakes1[i] - wakes0[i]
						l.cpuOf[i] += cpu1[i] - cpu0[i]
						l.wakeOf[i] += wakes1[i] - wakes0[i]
					}
				}
			}
			b.StopTimer()
			for _, cl := range clusters {
				ms := float64(cpuTicksOf(b, cl.c)-cl.ticks) * 1000 / clockTicks / float64(b.N)
				b.ReportMetric(ms, cl.prefix+"cpu-ms/iter")
			}
			rate := map[string]float64{}
			cpu := map[string]float64{}
			writes := float64(b.N * clients * burst)
			for _, l := range legs {
				rate[l.name] = writes / l.d.Seconds()
				b.ReportMetric(rate[l.name], l.name+"-writes/s")
				cpu[l.name] = float64(l.cpu.Microseconds()) / writes
				b.ReportMetric(cpu[l.name], l.name+"-cpu-µs/write")
				b.ReportMetric(float64(l.wakes)/writes, l.name+"-wakeups/write")
				for i, role := range l.roles {
					b.ReportMetric(float64(l.cpuOf[i].Microseconds())/writes, l.name+"-on-"+role+"-cpu-µs/write")
					b.ReportMetric(float64(l.wakeOf[i])/writes, l.name+"-on-"+role+"-wakeups/write")
				}
				if _, ok := l.ws[0].(*agentNewWriter); ok {
					// The client's time in each 9P step of an agent/new.
					var sum [4]time.Duration
					for _, w := range l.ws[:clients] {
						for i, d := range w.(*agentNewWriter).steps {
							sum[i] += d
						}
					}
					for i, step := range []string{"open", "write", "read", "clunk"} {
						b.ReportMetric(float64(sum[i].Microseconds())/writes, l.name+"-"+step+"-µs")
					}
				}
			}
			byName := map[string]*leg{}
			for _, l := range legs {
				byName[l.name] = l
			}
			// Each ratio twice: of the legs' rates over the round, and
			// (NAME-med) the median over the iterations of the ratio of
			// the two legs' times in the same iteration, which one stall
			// of the machine does not move.
			ratio := func(name, a, c string) {
				if rate[a] > 0 && rate[c] > 0 {
					b.ReportMetric(rate[a]/rate[c], name)
					b.ReportMetric(medianRatio(byName[c].each, byName[a].each), name+"-med")
				}
			}
			ratio("agent-new-follower/leader", "agent-new,follower", "agent-new,leader")
			ratio("mixed-agent-new-follower/leader", "mixed,agent-new,follower", "mixed,agent-new,leader")
			ratio("mixed-agent-new-client/leader", "mixed,agent-new,client", "mixed,agent-new,leader")
			ratio("mixed-agent-new-client/etcd-follower", "mixed,agent-new,client", "etcd,follower")
			ratio("agent-new-follower/etcd-follower", "agent-new,follower", "etcd,follower")
			ratio("etcd-follower/leader", "etcd,follower", "etcd,leader")
			ratio("load-follower/leader", "load,follower", "load,leader")
			ratio("load-follower/etcd-follower", "load,follower", "etcd,follower")
			ratio("agent-new-follower/baseline", "agent-new,follower", "baseline,agent-new,follower")
			ratio("agent-new-leader/baseline", "agent-new,leader", "baseline,agent-new,leader")
			ratio("load-follower/baseline", "load,follower", "baseline,load,follower")
			ratio("baseline-agent-new-follower/leader", "baseline,agent-new,follower", "baseline,agent-new,leader")
			ratio("baseline-agent-new-follower/etcd-follower", "baseline,agent-new,follower", "etcd,follower")
			if cpu["agent-new,follower"] > 0 && cpu["baseline,agent-new,follower"] > 0 {
				b.ReportMetric(cpu["agent-new,follower"]/cpu["baseline,agent-new,follower"], "agent-new-follower-cpu/baseline")
			}
			// What a write through a follower costs more than through
			// the leader, in time: the median over the iterations of
			// the difference of the two legs in the same iteration (per
			// write), beside the hop legs below.
			for _, p := range []string{"", "baseline,", "mixed,"} {
				for _, via := range []string{"follower", "client"} {
					if f, l := byName[p+"agent-new,"+via], byName[p+"agent-new,leader"]; f != nil && l != nil {
						b.ReportMetric(float64(medianDiff(f.each, l.each).Microseconds())/float64(clients*burst), p+"agent-new-"+via+"-extra-µs")
					}
				}
			}
		})
	}
	// The hop: one 9P round trip (a Tstat on an open fid) to this tree's
	// follower after the machine has been idle 2 ms, as a forwarded
	// write's request finds the leader and its answer the follower (each
	// idle while the other works), and one to the same node just after it
	// answered. A write through a follower makes two hops more than one
	// through the leader (its request to the leader, the answer back);
	// the idle legs say what two hops cost on this machine. The 2 ms
	// sleep is the idle gap measured, not a wait for anything.
	b.Run("hop", func(b *testing.B) {
		conn, err := dial9(hopAddr)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.close()
		fid, err := conn.fsys.Open("/", plan9.OREAD)
		if err != nil {
			b.Fatal(err)
		}
		defer fid.Close()
		var idle, busy []time.Duration
		b.ResetTimer()
		for range b.N {
			time.Sleep(2 * time.Millisecond) // pacing: each round starts from an idle connection
			for _, d := range []*[]time.Duration{&idle, &busy} {
				t := time.Now()
				if _, err := fid.Stat(); err != nil {
					b.Fatal(err)
				}
				*d = append(*d, time.Since(t))
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(median(idle).Microseconds()), "idle-rtt-µs")
		b.ReportMetric(float64(median(busy).Microseconds()), "busy-rtt-µs")
	})
}

// medianDiff is the median of a[i]-b[i].
func medianDiff(a, b []time.Duration) time.Duration {
	d := make([]time.Duration, 0, len(a))
	for i := range min(len(a), len(b)) {
		d = append(d, a[i]-b[i])
	}
	return median(d)
}

// medianRatio is the median of num[i]/den[i].
func medianRatio(num, den []time.Duration) float64 {
	r := make([]float64, 0, len(num))
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			r = append(r, float64(num[i])/float64(den[i]))
		}
	}
	return median(r)
}

// procsSched returns the CPU time and the times put on a CPU of the
// threads of each of procs (/proc/PID/task/*/schedstat).
func procsSched(b *testing.B, procs []*proc) ([]time.Duration, []int64) {
	cpu := make([]time.Duration, len(procs))
	wakes := make([]int64, len(procs))
	for i, p := range procs {
		var err error
		if cpu[i], wakes[i], err = schedstat(p.cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
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

// BenchmarkWriteVisible measures how soon a write made on the leader is
// seen elsewhere: each iteration makes, on each cluster in turn, a
// tool_load or tool_unload through the leader, then times until the
// events file of a follower (one that neither forwarded nor was asked)
// and of a client (a fourth node, -voters 3) shows it (visible-*-ms,
// from the start of the write). The clusters: this tree's binary; with
// TOOLNODE_BENCH_BASELINE another binary (TOOLNODE_BENCH_BASELINE_ARGS
// adds flags to it). It also reports the CPU
// each cluster's four processes spent per iteration.
func BenchmarkWriteVisible(b *testing.B) {
	type cluster struct {
		prefix string
		c      *tcluster
		w      *visibleWriter
		ticks  uint64
	}
	var clusters []*cluster
	toolnode := func(prefix, bin string, flags ...string) {
		c := newTClusterOf(b, bin, append([]string{"-voters", "3"}, flags...)) // the fourth node is a client
		order, _ := benchSession(b, startClusterOf(b, c, 3))
		w, err := newVisibleWriter(c, order)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(w.close)
		w.prefix = prefix
		clusters = append(clusters, &cluster{prefix: prefix, c: c, w: w})
	}
	toolnode("", "")
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		toolnode("baseline,", bin, strings.Fields(os.Getenv("TOOLNODE_BENCH_BASELINE_ARGS"))...)
	}
	for _, cl := range clusters {
		cl.w.seen = [2]time.Duration{}
		cl.ticks = cpuTicksOf(b, cl.c)
	}
	b.ResetTimer()
	for i := range b.N {
		for k := range clusters {
			cl := clusters[(i+k)%len(clusters)]
			if err := cl.w.write(); err != nil {
				b.Fatalf("%svisible: %v", cl.prefix, err)
			}
		}
	}
	b.StopTimer()
	seen := map[string]float64{}
	for _, cl := range clusters {
		ms := float64(cpuTicksOf(b, cl.c)-cl.ticks) * 1000 / clockTicks / float64(b.N)
		b.ReportMetric(ms, cl.prefix+"cpu-ms/iter")
		for i, where := range []string{"follower", "client"} {
			ms := float64(cl.w.seen[i].Microseconds()) / 1000 / float64(b.N)
			seen[cl.prefix+where] = ms
			b.ReportMetric(ms, cl.prefix+"visible-"+where+"-ms")
		}
	}
	for _, where := range []string{"follower", "client"} {
		if seen[where] > 0 && seen["baseline,"+where] > 0 {
			b.ReportMetric(seen[where]/seen["baseline,"+where], "visible-"+where+"/baseline")
		}
	}
}

// visibleWriter makes a write on a cluster's leader (tool_load or
// tool_unload on an agent of its own) and waits until the events files of
// a follower and of a client show it; seen adds the time from the start
// of the write until each showed it.
type visibleWriter struct {
	prefix   string
	ctl      *ctlWriter
	watchers [2]*eventWatcher // a follower, a client
	seen     [2]time.Duration
}

// newVisibleWriter adds a client to c (a node beyond -voters 3, so the
// cluster's flags must say so), and watches it and order[2], a follower
// that takes no part in the other legs' writes.
func newVisibleWriter(c *tcluster, order []*tnode) (*visibleWriter, error) {
	cl := c.add(fmt.Sprintf("n%d", len(c.nodes)+1), []string{order[0].gossip})
	c.start(cl)
	c.ready(cl)
	// Watching from before the agent exists, every write on it that a
	// node applies as an entry shows once in its events file, in order.
	w := &visibleWriter{}
	for i, n := range []*tnode{order[2], cl} {
		var err error
		if w.watchers[i], err = watchEvents(n.p9, " bench/vis/"); err != nil {
			w.close()
			return nil, err
		}
	}
	ctl, err := newCtlWriter(order[0].p9, "bench", "vis", 60*time.Second)
	if err != nil {
		w.close()
		return nil, err
	}
	w.ctl = ctl
	// A node that took the agent's first writes in a snapshot shows no
	// event for them: write until each shows one, then drop what it
	// shows until it has been quiet for a second (this node's events of
	// the writes so far have all come by then).
	deadline := time.Now().Add(2 * time.Minute)
	for _, e := range w.watchers {
		for {
			if err := w.ctl.write(); err != nil {
				w.close()
				return nil, err
			}
			if _, err := e.next(5 * time.Second); err == nil {
				break
			} else if time.Now().After(deadline) {
				w.close()
				return nil, err
			}
		}
	}
	for _, e := range w.watchers {
		for quiet := false; !quiet; {
			select {
			case <-e.ch:
			case <-time.After(time.Second):
				quiet = true
			}
		}
	}
	return w, nil
}

func (w *visibleWriter) write() error {
	t := time.Now()
	if err := w.ctl.write(); err != nil {
		return err
	}
	for i, e := range w.watchers {
		at, err := e.next(10 * time.Second)
		if err != nil {
			return err
		}
		w.seen[i] += at.Sub(t)
	}
	return nil
}

func (w *visibleWriter) close() {
	if w.ctl != nil {
		w.ctl.close()
	}
	for _, e := range w.watchers {
		if e != nil {
			e.conn.close()
		}
	}
}

// eventWatcher reads a node's events file and sends the time each line
// holding match arrived.
type eventWatcher struct {
	addr string
	conn *conn9
	ch   chan time.Time
	errc chan error
}

func watchEvents(addr, match string) (*eventWatcher, error) {
	conn, err := dial9(addr)
	if err != nil {
		return nil, err
	}
	fid, err := conn.fsys.Open("events", plan9.OREAD)
	if err != nil {
		conn.close()
		return nil, err
	}
	e := &eventWatcher{addr: addr, conn: conn, ch: make(chan time.Time, 64), errc: make(chan error, 1)}
	go func() {
		buf := make([]byte, 8192)
		for {
			// A read that finds nothing for 5 s returns 0 bytes.
			n, err := fid.Read(buf)
			at := time.Now()
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if strings.Contains(line, match) {
					e.ch <- at
				}
			}
			if err != nil && n == 0 && !errors.Is(err, io.EOF) {
				e.errc <- err
				return
			}
		}
	}()
	return e, nil
}

// next waits up to d for the next matching line and returns when it came.
func (e *eventWatcher) next(d time.Duration) (time.Time, error) {
	select {
	case at := <-e.ch:
		return at, nil
	case err := <-e.errc:
		return time.Time{}, fmt.Errorf("events of %s: %w", e.addr, err)
	case <-time.After(d):
		return time.Time{}, fmt.Errorf("a write on the leader not seen in the events of %s within %v", e.addr, d)
	}
}

func TestMedianRatio(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	// Per iteration 2, 1, 100 (a stall), 0.5: the median of four is the
	// mean of the middle two.
	if got := medianRatio(ms(4, 3, 300, 1), ms(2, 3, 3, 2)); got != 1.5 {
		t.Errorf("median of 2, 1, 100, 0.5: %v, want 1.5", got)
	}
	if got := medianRatio(ms(4, 3, 300), ms(2, 3, 3)); got != 2 {
		t.Errorf("median of 2, 1, 100: %v, want 2", got)
	}
	if got := medianRatio(nil, nil); got != 0 {
		t.Errorf("median of nothing: %v, want 0", got)
	}
	// Differences 2, 0, 297, -1: the mean of the middle two.
	if got := medianDiff(ms(4, 3, 300, 1), ms(2, 3, 3, 2)); got != time.Millisecond {
		t.Errorf("median difference of 2, 0, 297, -1: %v, want 1ms", got)
	}
	if got := median(ms(5, 1, 3)); got != 3*time.Millisecond {
		t.Errorf("median of 5, 1, 3: %v, want 3ms", got)
	}
}
