package cluster

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkFailureDetection measures how long a cluster takes to call a
// member that crashed (its memberlist shut down with no leave) dead:
// until the first member lists it dead, and until every member does (a
// suspect member is listed alive: memberlist tells no event of it). A cluster of N memberlists on loopback (real UDP and TCP,
// in this process; TOOLNODE_DETECT_N, default 20), five of them Raft
// servers and the rest clients, runs in two legs at once: "now", where
// every member probes every DefaultProbeInterval, and "probe3s", where
// every member probes every 3 s (memberlist scales the suspicion
// timeouts with it). The legs alternate; each iteration crashes a random
// client of each. Run with -benchtime Nx.
func BenchmarkFailureDetection(b *testing.B) {
	n := 20
	if s := os.Getenv("TOOLNODE_DETECT_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 7 {
			b.Fatalf("TOOLNODE_DETECT_N=%q: want a number of members, at least 7", s)
		}
	}
	const servers = 5
	legs := []benchLeg{
		{"now", Config{}},
		{"probe3s", Config{ProbeInterval: 3 * time.Second}},
	}
	clusters := startLegs(b, n, servers, legs)
	first := make([][]time.Duration, len(legs))
	all := make([][]time.Duration, len(legs))
	b.ResetTimer()
	for range b.N {
		for i := range legs {
			// A random client that has not crashed yet, at a random
			// moment of the probe rounds.
			time.Sleep(rand.N(time.Second))
			k := servers + rand.IntN(len(clusters[i])-servers)
			victim := clusters[i][k]
			clusters[i] = append(clusters[i][:k:k], clusters[i][k+1:]...)
			f, a := detectOnce(b, victim, clusters[i])
			first[i] = append(first[i], f)
			all[i] = append(all[i], a)
		}
	}
	b.StopTimer()
	for i, leg := range legs {
		b.ReportMetric(ms(median(first[i])), leg.name+"-first-dead-ms")
		b.ReportMetric(ms(median(all[i])), leg.name+"-all-dead-ms")
		b.ReportMetric(ms(longest(all[i])), leg.name+"-all-dead-max-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// detectOnce crashes victim and times until one of the others lists it
// dead (first), and until all of them do (all).
func detectOnce(b *testing.B, victim *Cluster, others []*Cluster) (first, all time.Duration) {
	name := victim.LocalName()
	t0 := time.Now()
	victim.Shutdown()
	deadline := t0.Add(2 * time.Minute)
	for {
		dead := 0
		for _, c := range others {
			for _, m := range c.Members() {
				if m.Name == name && m.State == "dead" {
					dead++
				}
			}
		}
		if dead > 0 && first == 0 {
			first = time.Since(t0)
		}
		if dead == len(others) {
			return first, time.Since(t0)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: dead on %d of %d members after 2m", name, dead, len(others))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
