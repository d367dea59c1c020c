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

// Test_Cluster_Ticks: an idle node sends no gossip and its gossip timer
// does not fire; a queued broadcast wakes gossip, which spreads it; a
// server probes every ProbeInterval and a client every
// ClientProbeInterval. memberlist's timing metrics count its rounds (the
// test is not parallel: the sink is the process's).
func Test_Cluster_Ticks(t *testing.T) {
	sink := gometrics.NewInmemSink(time.Hour, time.Hour)
	cfg := gometrics.DefaultConfig("t")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gometrics.NewGlobal(cfg, &gometrics.BlackholeSink{}) })

	const probe, clientProbe, gossip = 500 * time.Millisecond, time.Second, 250 * time.Millisecond
	cs := make([]*Cluster, 3)
	for i := range cs {
		c, err := Start(Config{Name: fmt.Sprintf("n%d", i), BindAddr: "127.0.0.1:0", LogOutput: io.Discard,
			Meta: Meta{Server: true}, ProbeInterval: probe, ClientProbeInterval: clientProbe, GossipInterval: gossip})
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
	// quiet waits, within a deadline, until no gossip round has run for
	// ten gossip intervals: the broadcasts of joins and meta changes are
	// all sent.
	quiet := func(what string) {
		t.Helper()
		last, since := count(sink, "gossip"), time.Now()
		waitFor(t, what, func() bool {
			if n := count(sink, "gossip"); n != last {
				last, since = n, time.Now()
			}
			return time.Since(since) > 10*gossip
		})
	}
	// window counts the probes and gossip rounds of all three nodes over
	// 3 s.
	window := func() (probes, rounds int) {
		p0, g0 := count(sink, "probeNode"), count(sink, "gossip")
		time.Sleep(3 * time.Second)
		return count(sink, "probeNode") - p0, count(sink, "gossip") - g0
	}

	quiet("the joins' gossip to end")
	serverProbes, rounds := window()
	if rounds != 0 {
		t.Fatalf("idle servers ran %d gossip rounds in 3 s, want none", rounds)
	}
	for _, c := range cs {
		if err := c.SetMeta(Meta{}); err != nil { // clients now
			t.Fatal(err)
		}
	}
	quiet("the meta changes' gossip to end")
	clientProbes, rounds := window()
	if rounds != 0 {
		t.Fatalf("idle clients ran %d gossip rounds in 3 s, want none", rounds)
	}
	t.Logf("probes in 3 s by three servers %d, by three clients %d", serverProbes, clientProbes)
	// Three nodes for 3 s: 18 probes every 500 ms, 9 every second. A
	// loaded machine delays ticks (a late one is skipped, not made up), so
	// only the ratio is checked, loosely.
	if serverProbes < 6 || clientProbes*4 > serverProbes*3 || clientProbes*4 < serverProbes {
		t.Fatalf("probes in 3 s: servers %d, clients %d; want clients about half the servers'", serverProbes, clientProbes)
	}

	// The change wakes gossip. It may reach the others before the round
	// that carries it is counted (a round is counted when it returns,
	// after its last packet is sent), or first on a probe's ping or ack,
	// which carry queued broadcasts too; so the round is waited for, not
	// read at once. Idle, the same nodes ran none in 3 s.
	g0 := count(sink, "gossip")
	propagate(t, "a change after an idle spell", Caps{"echo": 1}, cs[0], cs[1:])
	waitFor(t, "a gossip round after the change", func() bool { return count(sink, "gossip") > g0 })
}
