package cluster

import (
	"fmt"
	"io"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
)

// count reads how many times memberlist has run the named routine, from
// the samples of its timing metric in sink.
func count(sink *gometrics.InmemSink, name string) int {
	n := 0
	for _, iv := range sink.Data() {
		iv.RLock()
		if s, ok := iv.Samples["t.memberlist."+name]; ok {
			n += s.Count
		}
		iv.RUnlock()
	}
	return n
}

// TestCluster_Ticks: every member probes every ProbeInterval, a server
// as a client, and gossip ticks every GossipInterval whether or not it
// has anything to send; a change made after an idle spell spreads.
// memberlist's timing metrics count its rounds (the test is not
// parallel: the sink is the process's).
func TestCluster_Ticks(t *testing.T) {
	sink := gometrics.NewInmemSink(time.Hour, time.Hour)
	cfg := gometrics.DefaultConfig("t")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gometrics.NewGlobal(cfg, &gometrics.BlackholeSink{}) })

	const probe, gossip = 500 * time.Millisecond, 250 * time.Millisecond
	cs := make([]*Cluster, 3)
	for i := range cs {
		c, err := Start(Config{Name: fmt.Sprintf("n%d", i), BindAddr: "127.0.0.1:0", LogOutput: io.Discard,
			Meta: Meta{Server: i == 0}, ProbeInterval: probe, GossipInterval: gossip})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Shutdown() })
		cs[i] = c
		if i > 0 {
			if _, err := c.Join([]string{cs[0].LocalAddr()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "all members alive everywhere", func() bool {
		for _, c := range cs {
			if aliveMembers(c) != len(cs) {
				return false
			}
		}
		return true
	})

	p0, g0, t0 := count(sink, "probeNode"), count(sink, "gossip"), time.Now()
	time.Sleep(3 * time.Second) // the window the rounds are counted over
	probes, rounds, window := count(sink, "probeNode")-p0, count(sink, "gossip")-g0, time.Since(t0)
	t.Logf("in %v, one server and two clients probed %d times and ran %d gossip rounds", window.Round(time.Millisecond), probes, rounds)
	// Three nodes for 3 s: 18 probes every 500 ms and 36 gossip rounds
	// every 250 ms, idle or not. A loaded machine delays ticks (a late
	// one is dropped, as a ticker drops it), so fewer are allowed, down
	// to half: a client probing at a longer interval, or gossip that
	// slept while idle, would fall below that.
	for _, c := range []struct {
		what  string
		n     int
		every time.Duration
	}{{"probes", probes, probe}, {"gossip rounds", rounds, gossip}} {
		want := 3 * int(window/c.every)
		if c.n < want/2 || c.n > want+3 {
			t.Fatalf("%d %s in %v by three nodes, one every %v each; want about %d", c.n, c.what, window, c.every, want)
		}
	}

	propagate(t, "a change after an idle spell", Caps{"echo": 1}, cs[0], cs[1:])
}
