package bench

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
)

// BenchmarkScale starts N real node processes on loopback (n1 bootstraps,
// the others join it all at once) and measures, per leg:
//
//   - formed-s: from n1's start until every node lists N alive members
//     and answers /readyz (a server: it knows a leader and has applied
//     what it knows is committed; a client: it follows a server and has
//     applied what that server reported);
//   - idle CPU over idleWindow, from /proc/PID/stat, after settle: the
//     whole cluster's, the leader's, a server's and a client's (mean), in
//     % of one core;
//   - RSS of the leader, a server and a client (mean), from /proc.
//
// Legs: "clients" is the default (-voters 5: five servers, the rest
// clients); "allraft" makes every node a Raft server (-servers N), as
// every node was before clients existed: the baseline of the same run.
// Run with -benchtime 1x; N=100 needs about 3 GB of memory.
func BenchmarkScale(b *testing.B) {
	sizes := []int{10, 50, 100}
	if s := os.Getenv("TOOLNODE_SCALE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("TOOLNODE_SCALE_SIZES=%q: %v", s, err)
			}
			sizes = append(sizes, n)
		}
	}
	legs := []string{"clients", "allraft"}
	if s := os.Getenv("TOOLNODE_SCALE_LEGS"); s != "" {
		legs = strings.Split(s, ",")
	}
	for _, n := range sizes {
		for _, leg := range legs {
			b.Run(fmt.Sprintf("N=%d/%s", n, leg), func(b *testing.B) {
				for range b.N {
					runScale(b, n, leg)
				}
			})
		}
	}
}

const (
	scaleSettle = 5 * time.Second  // after formation, before the idle window
	idleWindow  = 10 * time.Second // CPU is measured over this
	clkTck      = 100              // Linux's USER_HZ
)

func runScale(b *testing.B, size int, leg string) {
	b.StopTimer()
	c := newTCluster(b)
	metricsAddr := map[string]string{}
	var mu sync.Mutex
	c.per = func(n *tnode) []string {
		mu.Lock()
		defer mu.Unlock()
		return []string{"-metrics", metricsAddr[n.name]}
	}
	if leg == "allraft" {
		c.extra = []string{"-servers", strconv.Itoa(size)}
	}
	ports := lowPorts(b, 4*size)
	for i := 1; i <= size; i++ {
		var join []string
		if i > 1 {
			join = []string{c.nodes[0].gossip}
		}
		n := c.add(fmt.Sprintf("n%d", i), join)
		n.p9, n.gossip, n.clusterAddr = ports[4*(i-1)], ports[4*(i-1)+1], ports[4*(i-1)+2]
		metricsAddr[n.name] = ports[4*(i-1)+3]
	}
	// n2..n5 join n1, the rest join one of n1..n5 all at once: a hundred
	// memberlist push/pulls at once against one node time out on two
	// cores.
	seeds := min(5, size)
	for i, n := range c.nodes[1:] {
		if i+1 < seeds {
			n.join = []string{c.nodes[0].gossip}
		} else {
			n.join = []string{c.nodes[i%seeds].gossip}
		}
	}
	begin := time.Now()
	c.start(c.nodes[0])
	c.ready(c.nodes[0])
	for _, n := range c.nodes[1:seeds] {
		c.start(n)
	}
	for _, n := range c.nodes[1:seeds] {
		c.ready(n)
	}
	for _, n := range c.nodes[seeds:] {
		c.start(n)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	done := map[string]bool{}
	deadline := begin.Add(120 * time.Second)
	var last string
	nextNote := time.Now().Add(10 * time.Second)
	for len(done) < size {
		if time.Now().After(nextNote) {
			nextNote = time.Now().Add(10 * time.Second)
			b.Logf("N=%d %s: %d of %d nodes formed after %v; last: %s", size, leg, len(done), size, time.Since(begin).Round(time.Second), last)
		}
		if time.Now().After(deadline) {
			b.Fatalf("N=%d %s: %d of %d nodes formed within 120s; last: %s", size, leg, len(done), size, last)
		}
		for _, n := range c.nodes {
			if done[n.name] {
				continue
			}
			if n.p.exited() {
				b.Fatalf("%s exited: %s", n.name, n.p.tail())
			}
			ms, err := readWithin(n.p9, "cluster/members", 2*time.Second)
			if err != nil {
				last = n.name + ": " + err.Error()
				continue
			}
			alive := 0
			for _, m := range parseMembers(ms) {
				if m.state == "alive" {
					alive++
				}
			}
			if alive != size {
				last = fmt.Sprintf("%s: %d alive", n.name, alive)
				continue
			}
			resp, err := hc.Get("http://" + metricsAddr[n.name] + "/readyz")
			if err != nil {
				last = n.name + ": " + err.Error()
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				last = fmt.Sprintf("%s: /readyz %d", n.name, resp.StatusCode)
				continue
			}
			done[n.name] = true
		}
		time.Sleep(250 * time.Millisecond)
	}
	formed := time.Since(begin)

	// Roles, as n1 sees them.
	ms, err := readWithin(c.nodes[0].p9, "cluster/members", 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	role := map[string]string{}
	for _, m := range parseMembers(ms) {
		role[m.name] = m.role
	}

	time.Sleep(scaleSettle)
	before := map[string]uint64{}
	for _, n := range c.nodes {
		before[n.name] = procTicks(b, n.p.cmd.Process.Pid)
	}
	start := time.Now()
	time.Sleep(idleWindow)
	elapsed := time.Since(start).Seconds()
	var total, leader float64
	var servers, clients []float64
	var leaderRSS float64
	var serverRSS, clientRSS []float64
	for _, n := range c.nodes {
		pid := n.p.cmd.Process.Pid
		pct := float64(procTicks(b, pid)-before[n.name]) / clkTck / elapsed * 100
		rss := rssMiB(b, pid)
		total += pct
		switch role[n.name] {
		case "leader":
			leader, leaderRSS = pct, rss
		case "voter", "nonvoter":
			servers = append(servers, pct)
			serverRSS = append(serverRSS, rss)
		default:
			clients = append(clients, pct)
			clientRSS = append(clientRSS, rss)
		}
	}
	b.ReportMetric(formed.Seconds(), "formed-s")
	b.ReportMetric(total, "cluster-cpu-%")
	b.ReportMetric(leader, "leader-cpu-%")
	b.ReportMetric(mean(servers), "server-cpu-%")
	b.ReportMetric(mean(clients), "client-cpu-%")
	b.ReportMetric(leaderRSS, "leader-rss-MiB")
	b.ReportMetric(mean(serverRSS), "server-rss-MiB")
	b.ReportMetric(mean(clientRSS), "client-rss-MiB")
	b.ReportMetric(float64(len(servers)+1), "servers")
	b.Logf("N=%d %s: formed in %v; idle CPU %.1f%% of a core (leader %.1f%%, servers %s, clients mean %.2f%%); RSS leader %.0f MiB, server %.0f, client %.0f",
		size, leg, formed.Round(time.Millisecond), total, leader, pcts(servers), mean(clients), leaderRSS, mean(serverRSS), mean(clientRSS))
	// Stop every process now, not at the end of the benchmark.
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.p.kill()
		}()
	}
	wg.Wait()
}

// readWithin reads one file on a 9P connection of its own, all within
// d: a node too busy to answer is tried again, never waited on.
func readWithin(addr, path string, d time.Duration) (string, error) {
	nc, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(d))
	conn, err := client.NewConn(nc)
	if err != nil {
		return "", err
	}
	fsys, err := conn.Attach(nil, "bench", "")
	if err != nil {
		return "", err
	}
	cn := &conn9{conn, fsys}
	return cn.read(path)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func pcts(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var out []string
	for _, x := range s {
		out = append(out, fmt.Sprintf("%.1f", x))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// procTicks is a process's user plus system time, in clock ticks.
func procTicks(tb testing.TB, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st
}

// rssMiB is a process's resident set.
func rssMiB(tb testing.TB, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// lowPorts picks n loopback ports free for TCP and UDP below the
// kernel's ephemeral range, so that none of the many connections the
// nodes open takes one between the pick and the bind.
func lowPorts(tb testing.TB, n int) []string {
	tb.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &low)
	}
	const floor = 10000
	if low-floor < 4*n {
		return freePorts(tb, n)
	}
	seen := map[int]bool{}
	var out []string
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			tb.Fatal("cannot find free loopback ports")
		}
		port := floor + mrand.IntN(low-floor)
		if seen[port] {
			continue
		}
		seen[port] = true
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		out = append(out, addr)
	}
	return out
}
