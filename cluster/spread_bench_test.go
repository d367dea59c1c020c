package cluster

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkBroadcastSpread measures how long a capability change takes to
// reach every other node of a cluster of N memberlists on loopback (real
// UDP and TCP, in this process), with gossip at the package's defaults
// (leg "now") and at the settings before them (leg "before": a round
// every 500 ms to three nodes, messages compressed). Both clusters run at
// once and the legs alternate change by change, so they share the
// machine's load. Each iteration is one change on a random node; the
// metrics are the median and the largest time until the last node has
// it, and the median time until half of them have it.
//
// TOOLNODE_SPREAD_SIZES lists the N (default 10,50,100). Run with
// -benchtime Nx (changes per leg).
func BenchmarkBroadcastSpread(b *testing.B) {
	sizes := []int{10, 50, 100}
	if s := os.Getenv("TOOLNODE_SPREAD_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("TOOLNODE_SPREAD_SIZES=%q: %v", s, err)
			}
			sizes = append(sizes, n)
		}
	}
	legs := []benchLeg{
		{"before", Config{GossipInterval: 500 * time.Millisecond, GossipNodes: 3, Compress: true}},
		{"now", Config{}},
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			clusters := startLegs(b, n, 0, legs)
			times := make([][]time.Duration, len(legs))
			halves := make([][]time.Duration, len(legs))
			b.ResetTimer()
			for it := range b.N {
				for i := range legs {
					all, half := spreadOnce(b, clusters[i], fmt.Sprintf("tool-%d", it))
					times[i] = append(times[i], all)
					halves[i] = append(halves[i], half)
				}
			}
			b.StopTimer()
			for i, leg := range legs {
				b.ReportMetric(ms(median(times[i])), leg.name+"-all-ms")
				b.ReportMetric(ms(longest(times[i])), leg.name+"-all-max-ms")
				b.ReportMetric(ms(median(halves[i])), leg.name+"-half-ms")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchLeg is one cluster of a benchmark that compares settings.
type benchLeg struct {
	name string
	cfg  Config
}

// startLegs starts one cluster of n members (startSpread) per leg, all
// running at once.
func startLegs(b *testing.B, n, servers int, legs []benchLeg) [][]*Cluster {
	b.Helper()
	clusters := make([][]*Cluster, len(legs))
	for i, leg := range legs {
		clusters[i] = startSpread(b, n, servers, leg.name, leg.cfg)
	}
	return clusters
}

// startSpread starts n members with cfg's gossip settings, the first
// servers of them Raft servers (Meta.Server) and the rest clients, each at
// a random moment of a second (memberlist's tickers keep the phase of
// their start, and hosts do not start in step) and joined to the first,
// and waits until each lists all of them alive.
func startSpread(b *testing.B, n, servers int, leg string, cfg Config) []*Cluster {
	b.Helper()
	cs := make([]*Cluster, n)
	errs := make(chan error, n)
	for i := range cs {
		c := cfg
		c.Name, c.BindAddr, c.LogOutput, c.Meta = fmt.Sprintf("%s-%d", leg, i), "127.0.0.1:0", io.Discard, Meta{Tools: 1, Server: i < servers}
		var err error
		if cs[i], err = Start(c); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs[i].Shutdown() })
		if i == 0 {
			continue
		}
		go func() {
			time.Sleep(rand.N(time.Second)) // joins at random moments on purpose, as a real start has them
			_, err := cs[i].Join([]string{cs[0].LocalAddr()})
			errs <- err
		}()
		time.Sleep(rand.N(2 * time.Second / time.Duration(n))) // pacing the starts over about 2s
	}
	for range n - 1 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok := true
		for _, c := range cs {
			if aliveMembers(c) != n {
				ok = false
				break
			}
		}
		if ok {
			return cs
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d members not all alive within 2m", leg, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spreadOnce adds tool on a random member and times until every other
// member lists it there (all), and until half of them do (half).
func spreadOnce(b *testing.B, cs []*Cluster, tool string) (all, half time.Duration) {
	// At a random moment of the gossip rounds.
	time.Sleep(rand.N(time.Second))
	src := cs[rand.IntN(len(cs))]
	caps, _ := src.Capabilities(src.LocalName())
	caps[tool] = -1
	t0 := time.Now()
	src.SetCapabilities(caps)
	seen := map[*Cluster]bool{src: true}
	deadline := t0.Add(30 * time.Second)
	for len(seen) < len(cs) {
		for _, c := range cs {
			if seen[c] {
				continue
			}
			for _, cp := range c.Capable(tool) {
				if cp.Node == src.LocalName() {
					seen[c] = true
					if half == 0 && len(seen)-1 >= (len(cs)-1)/2 {
						half = time.Since(t0)
					}
					break
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s reached %d of %d members within 30s", tool, len(seen), len(cs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0), half
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func longest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
