package bench

import (
	"fmt"
	"os"
	"os/exec"
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
// binary's default: before and after in one run.
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
					b.Run(fmt.Sprintf("load,clients=%d,%s", k, where), func(b *testing.B) { runWrites(b, ws) })
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
						runWrites(b, ws)
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
				b.Run(fmt.Sprintf("put,clients=%d,%s", k, where), func(b *testing.B) { runWrites(b, ws) })
			}
		}
	})
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

// BenchmarkFollowerWritesInterleaved is BenchmarkFollowerWrites' one
// client with its legs interleaved, so that all see the same load on a
// busy machine: each iteration makes one write of every leg in turn,
// agent/new and tool_load/tool_unload through a toolnode follower and
// through its leader, a put or delete through an etcd follower and
// through its leader (skipped without etcd), and, when
// TOOLNODE_BENCH_BASELINE names another toolnode binary, agent/new
// through a follower and the leader of a cluster of that binary. It
// reports each leg's writes/s (one client, one write at a time) and the
// ratios the goals name.
func BenchmarkFollowerWritesInterleaved(b *testing.B) {
	type leg struct {
		name string
		w    writer
		d    time.Duration
	}
	var legs []*leg
	add := func(name string, w writer) {
		b.Cleanup(w.close)
		legs = append(legs, &leg{name: name, w: w})
	}
	agentNew := func(prefix string, order []*tnode, admin *conn9) {
		for i, where := range []string{"leader", "follower"} {
			conn, err := dial9(order[i].p9)
			if err != nil {
				b.Fatal(err)
			}
			add(prefix+"agent-new,"+where, &agentNewWriter{conn: conn, admin: admin})
		}
	}
	order, admin := benchSession(b, startClusterWith(b, 3))
	agentNew("", order, admin)
	for i, where := range []string{"leader", "follower"} {
		w, err := newCtlWriter(order[i].p9, "bench", "il-"+where, 60*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		add("load,"+where, w)
	}
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		c := newTCluster(b)
		c.bin = bin
		order, admin := benchSession(b, startClusterOf(b, c, 3))
		agentNew("baseline,", order, admin)
	}
	if _, err := exec.LookPath("etcd"); err == nil {
		ec := startEtcd(b, 3)
		order := ec.leaderFirst(b)
		hc := etcdHTTP()
		b.Cleanup(hc.CloseIdleConnections)
		for i, where := range []string{"leader", "follower"} {
			add("etcd,"+where, warmEtcdWriter(b, hc, order[i], "/bench/il-"+where+"/loaded/"+benchTool))
		}
	}
	sessions := 0
	b.Run("clients=1", func(b *testing.B) {
		for _, l := range legs {
			l.d = 0
			if a, ok := l.w.(*agentNewWriter); ok {
				// A fresh session per round, as in BenchmarkFollowerWrites.
				sessions++
				if err := a.newSession(fmt.Sprintf("il%d", sessions)); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ResetTimer()
		for range b.N {
			for _, l := range legs {
				t := time.Now()
				if err := l.w.write(); err != nil {
					b.Fatalf("%s: %v", l.name, err)
				}
				l.d += time.Since(t)
			}
		}
		b.StopTimer()
		rate := map[string]float64{}
		for _, l := range legs {
			rate[l.name] = float64(b.N) / l.d.Seconds()
			b.ReportMetric(rate[l.name], l.name+"-writes/s")
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
	})
}
