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

// Test_Cluster_Ticks: a node that starts as a server probes every
// ProbeInterval, one that starts as a client every ClientProbeInterval,
// and a client made a server keeps its interval (memberlist fixes it at
// creation); gossip ticks every GossipInterval whether or not it has
// anything to send, and a change made after an idle spell spreads.
// memberlist's timing metrics count its rounds (the test is not
// parallel: the sink is the process's).
func Test_Cluster_Ticks(t *testing.T) {
	sink := gometrics.NewInmemSink(time.Hour, time.Hour)
	cfg := gometrics.DefaultConfig("t")
	cfg.EnableHostname, cfg.EnableRuntimeMetrics = false, false
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gometrics.NewGlobal(cfg, &gometrics.BlackholeSink{}) })

	const probe, clientProbe, gossip = 500 * time.Millisecond, time.Second, 250 * time.Millisecond
	// group starts three members that start with meta, all joined.
	group := func(prefix string, meta Meta) []*Cluster {
		cs := make([]*Cluster, 3)
		for i := range cs {
			c, err := Start(Config{Name: fmt.Sprintf("%s%d", prefix, i), BindAddr: "127.0.0.1:0", LogOutput: io.Discard,
				Meta: meta, ProbeInterval: probe, ClientProbeInterval: clientProbe, GossipInterval: gossip})
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
		waitFor(t, prefix+": all members alive everywhere", func() bool {
			for _, c := range cs {
				if aliveMembers(c) != len(cs) {
					return false
				}
			}
			return true
		})
		return cs
	}
	// window counts the probes and gossip rounds of the running members
	// over 3 s.
	window := func() (probes, rounds int) {
		p0, g0 := count(sink, "probeNode"), count(sink, "gossip")
		time.Sleep(3 * time.Second)
		return count(sink, "probeNode") - p0, count(sink, "gossip") - g0
	}

	servers := group("s", Meta{Server: true})
	serverProbes, serverRounds := window()
	for _, c := range servers {
		c.Shutdown()
	}
	clients := group("c", Meta{})
	clientProbes, clientRounds := window()
	for _, c := range clients {
		if err := c.SetMeta(Meta{Server: true}); err != nil { // made servers
			t.Fatal(err)
		}
	}
	promotedProbes, _ := window()
	t.Logf("probes in 3 s by three servers %d, three clients %d, the clients made servers %d; gossip rounds %d, %d",
		serverProbes, clientProbes, promotedProbes, serverRounds, clientRounds)
	// Three nodes for 3 s: 18 probes every 500 ms, 9 every second. A
	// loaded machine delays ticks (a late one is dropped, as a ticker
	// drops it), so only the ratios are checked, loosely.
	if serverProbes < 6 || clientProbes*4 > serverProbes*3 || clientProbes*4 < serverProbes {
		t.Fatalf("probes in 3 s: servers %d, clients %d; want clients about half the servers'", serverProbes, clientProbes)
	}
	if promotedProbes*4 > serverProbes*3 {
		t.Fatalf("probes in 3 s: servers %d, clients made servers %d; want the clients' interval kept", serverProbes, promotedProbes)
	}
	// 36 rounds by three nodes in 3 s, idle or not.
	if serverRounds < 12 || clientRounds < 12 {
		t.Fatalf("gossip rounds in 3 s by three idle nodes: %d, %d; want about 36", serverRounds, clientRounds)
	}

	propagate(t, "a change after an idle spell", Caps{"echo": 1}, clients[0], clients[1:])
}
