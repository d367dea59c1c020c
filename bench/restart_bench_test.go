package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stopLegs are the binaries a restart benchmark compares: this tree's,
// and TOOLNODE_BENCH_BASELINE's when it is set.
func stopLegs(b *testing.B) map[string]string {
	legs := map[string]string{"this": toolnodeBin(b)}
	if base := os.Getenv("TOOLNODE_BENCH_BASELINE"); base != "" {
		legs["baseline"] = base
	}
	return legs
}

// BenchmarkStop starts a cluster of N nodes (TOOLNODE_STOP_SIZES, default
// 1,10,50; three voters, the rest clients), waits until the first node
// lists all N alive, then sends every node SIGTERM at once, as a host's
// shutdown or `docker compose down` does, and reports when the last one
// exited (stop-max-s), the median (stop-median-s) and how many were still
// running 5 s after the signal (over-5s; they are then killed). Each leg
// is a binary (stopLegs).
func BenchmarkStop(b *testing.B) {
	sizes := []int{1, 10, 50}
	if s := os.Getenv("TOOLNODE_STOP_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("TOOLNODE_STOP_SIZES=%q: want sizes", s)
			}
			sizes = append(sizes, n)
		}
	}
	legs := stopLegs(b)
	for _, size := range sizes {
		for _, leg := range []string{"this", "baseline"} {
			bin, ok := legs[leg]
			if !ok {
				continue
			}
			b.Run(fmt.Sprintf("N=%d/%s", size, leg), func(b *testing.B) {
				var maxs, meds, over []float64
				for b.Loop() {
					mx, md, ov := stopCluster(b, bin, size)
					maxs, meds, over = append(maxs, mx), append(meds, md), append(over, ov)
				}
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(median(maxs), "stop-max-s")
				b.ReportMetric(median(meds), "stop-median-s")
				b.ReportMetric(median(over), "over-5s")
			})
		}
	}
}

// stopCluster is one round of BenchmarkStop.
func stopCluster(b *testing.B, bin string, size int) (maxS, medianS, over5 float64) {
	b.StopTimer()
	defer b.StartTimer()
	c := newTClusterOf(b, bin, []string{"-voters", "3"})
	first := c.add("n1", nil)
	c.start(first)
	c.ready(first)
	// The others join in waves of ten, each once the one before serves:
	// fifty starts at once on two cores time out joins.
	for i := 2; i <= size; i += 10 {
		var wave []*tnode
		for k := i; k < i+10 && k <= size; k++ {
			n := c.add(fmt.Sprintf("n%d", k), []string{first.gossip})
			c.start(n)
			wave = append(wave, n)
		}
		for _, n := range wave {
			c.ready(n)
		}
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		s, err := readWithin(first.p9, "cluster/members", 5*time.Second)
		if err == nil && strings.Count(s, " alive ") == size {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("n1 does not list %d alive members within 120 s: %v\n%s", size, err, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.waitVoters(first, min(size, 3), 60*time.Second) // 3: its -voters
	// A quiet window on purpose: the joins' catch-up traffic stays out of
	// the measured restart.
	time.Sleep(2 * time.Second)
	start := time.Now()
	for _, n := range c.nodes {
		n.p.cmd.Process.Signal(syscall.SIGTERM)
	}
	var mu sync.Mutex
	var took []float64
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-n.p.done:
			case <-time.After(5 * time.Second):
				mu.Lock()
				over5++
				mu.Unlock()
				<-n.p.done // the SIGTERM's own limit is 30 s
			}
			mu.Lock()
			took = append(took, time.Since(start).Seconds())
			mu.Unlock()
		}()
	}
	wg.Wait()
	return slices.Max(took), median(took), over5
}

// restartAgents is how many agents BenchmarkRestartServing's node holds,
// in sessions of a hundred.
const restartAgents = 1000

// BenchmarkRestartServing: a lone node holding startTools tools and
// restartAgents agents is stopped with SIGTERM and started again on its
// data; each round reports the time from exec until it serves the state
// (t/idx lists every tool and the last agent answers), for each binary
// (stopLegs), the legs interleaved in every round.
func BenchmarkRestartServing(b *testing.B) {
	legs := stopLegs(b)
	type node struct {
		bin, data, tools, agents string
		env                      []string
	}
	nodes := map[string]*node{}
	for leg, bin := range legs {
		root := b.TempDir()
		n := &node{bin: bin, data: filepath.Join(root, "data"), tools: filepath.Join(root, "tools"), agents: filepath.Join(root, "agents"),
			env: childEnv("XDG_CONFIG_HOME=" + filepath.Join(root, "config"))}
		for _, d := range []string{n.tools, n.agents} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		startFixture(b, n.tools)
		nodes[leg] = n
		// The first start publishes the tools and makes the agents.
		args, addr := nodeArgs(b, n.data, n.tools, n.agents)
		p := startProc(b, n.env, bin, args...)
		if err := waitIdx(p, addr, startTools, 120*time.Second); err != nil {
			b.Fatal(err)
		}
		c, err := dial9(addr)
		if err != nil {
			b.Fatal(err)
		}
		for s := range restartAgents / 100 {
			if _, err := c.ask("session/new", fmt.Sprintf("name=s%d", s)); err != nil {
				b.Fatal(err)
			}
			for a := range 100 {
				if _, err := c.ask(fmt.Sprintf("session/s%d/agent/new", s), fmt.Sprintf("name=a%d", a)); err != nil {
					b.Fatal(err)
				}
			}
		}
		c.close()
		p.stop(30 * time.Second)
	}
	last := fmt.Sprintf("session/s%d/agent/a99/toolsrv.rev", restartAgents/100-1)
	restart := func(n *node) time.Duration {
		args, addr := nodeArgs(b, n.data, n.tools, n.agents)
		t0 := time.Now()
		p := startProc(b, n.env, n.bin, args...)
		if err := waitIdx(p, addr, startTools, 120*time.Second); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := readWithin(addr, last, 5*time.Second); err == nil {
				break
			}
			if time.Since(t0) > 120*time.Second {
				b.Fatalf("%s not served within 120 s:\n%s", last, p.tail())
			}
			time.Sleep(2 * time.Millisecond)
		}
		d := time.Since(t0)
		p.stop(30 * time.Second)
		return d
	}
	took := map[string][]float64{}
	b.ResetTimer()
	for b.Loop() {
		for _, leg := range []string{"this", "baseline"} {
			if n, ok := nodes[leg]; ok {
				took[leg] = append(took[leg], restart(n).Seconds()*1000)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	for leg, v := range took {
		b.ReportMetric(median(v), leg+"-ms")
	}
	if len(took["baseline"]) > 0 {
		b.ReportMetric(median(took["this"])/median(took["baseline"]), "this/baseline")
	}
}
