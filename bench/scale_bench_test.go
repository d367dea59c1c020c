package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/internal/testcluster"
	"github.com/toolnode/toolnode/internal/testport"
)

// BenchmarkScale starts N real node processes on loopback (n1 bootstraps,
// n2-n5 join it, the others join all at once, or in waves) and measures,
// per leg:
//
//   - formed-s: from n1's start until every node lists N alive members
//     and answers /readyz (a server: it knows a leader and has applied
//     what it knows is committed; a client: it follows a server and has
//     applied what that server reported), as each node reports it on
//     -metrics;
//   - *-start-cpu-ms: the CPU (user+system, /proc/PID/stat) a node spent
//     from exec until it was formed;
//   - idle CPU over idleWindow (TOOLNODE_SCALE_IDLE), after the settling
//     push/pulls of the last node to join: the whole cluster's, the
//     leader's, a server's and a client's (mean), in % of one core;
//   - *-wakes/s: context switches of all of a node's threads per second
//     over the same window (/proc/PID/task/*/status): an idle node's CPU
//     is mostly what its wake-ups cost;
//   - RSS of the leader, a server and a client (mean), from /proc.
//
// Legs: "clients" is the default (-voters 5: five servers, the rest
// clients); "allraft" makes every node a Raft server (-servers N);
// "baseline" is "clients" with the binary TOOLNODE_BENCH_BASELINE names
// (another build); "commit=D" is "clients" with -raft-commit-timeout D
// (commit=50ms: the library's default);
// "waves" is "clients" with the nodes past the seeds launched
// TOOLNODE_SCALE_WAVE (default 10) at a time, each wave once the one
// before serves (its own start, not its formation, so the waves overlap);
// "notoken" is "clients" with a DATA/admin.token written in every
// node's data directory but n1's before it starts, so that none makes
// its admin token (a cluster write each, streamed to every client): what
// those writes cost a forming cluster, measured; "procs2" is "clients"
// with GOMAXPROCS=2 in the nodes' environment; "env=K=V" (several:
// K1=V1+K2=V2) is "clients" with those in the nodes' environment
// (clients on two processors, as before they ran on one: the same
// binary, where two builds of one commit can idle 30 % apart). The floors (bench/internal/
// gossipfloor) count as clients: "gossip" runs the cluster package's
// memberlist at the node's settings and nothing else
// (TOOLNODE_SCALE_FLOOR_ARGS adds flags to it), "nothing" a Go process
// that does nothing.
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
	scaleSettle  = 5 * time.Second  // after formation, before the idle window
	settlePeriod = 35 * time.Second // after the last launch, before the idle window
	idleWindow   = 10 * time.Second // CPU is measured over this
)

func runScale(b *testing.B, size int, leg string) {
	b.StopTimer()
	c := newTCluster(b)
	// The floor legs run bench/internal/gossipfloor instead of nodes:
	// "gossip" is the cluster package's memberlist at the node's settings
	// and nothing else, "nothing" a Go process that does nothing.
	floor := leg == "gossip" || leg == "nothing"
	var floorBin string
	if floor {
		floorBin = helperBin(b, "gossipfloor")
	}
	metricsAddr := map[string]string{} // filled before any node starts
	c.per = func(n *tnode) []string { return []string{"-metrics", metricsAddr[n.name]} }
	if leg == "allraft" {
		c.extra = []string{"-servers", strconv.Itoa(size)}
	}
	if d, ok := strings.CutPrefix(leg, "commit="); ok {
		// The clients leg with Raft's CommitTimeout at d instead of the
		// default: what the leader's idle replication costs.
		c.extra = []string{"-raft-commit-timeout", d}
	}
	if leg == "procs2" {
		// The clients leg with GOMAXPROCS=2 in every node's environment,
		// which a node keeps: clients on two processors, as before they
		// ran on one, in the same binary.
		c.env = []string{"GOMAXPROCS=2"}
	}
	if kv, ok := strings.CutPrefix(leg, "env="); ok {
		// The clients leg with K=V (or K1=V1+K2=V2) in every node's
		// environment: a runtime setting (GOGC, GODEBUG) measured against
		// the default in one binary.
		c.env = strings.Split(kv, "+")
	}
	if leg == "baseline" {
		// The clients leg with the binary TOOLNODE_BENCH_BASELINE
		// (another build), run beside the others.
		c.bin = os.Getenv("TOOLNODE_BENCH_BASELINE")
		if c.bin == "" {
			b.Skip("TOOLNODE_BENCH_BASELINE is not set")
		}
	}
	ports := testport.Pick(b, 4*size)
	for i := 1; i <= size; i++ {
		var join []string
		if i > 1 {
			join = []string{c.nodes[0].gossip}
		}
		n := c.add(fmt.Sprintf("n%d", i), join)
		n.p9, n.gossip, n.clusterAddr = ports[4*(i-1)], ports[4*(i-1)+1], ports[4*(i-1)+2]
		metricsAddr[n.name] = ports[4*(i-1)+3]
		if leg == "notoken" && i > 1 {
			// A node with DATA/admin.token makes no admin token: what
			// the N cluster writes of the nodes' first starts cost.
			if err := os.WriteFile(filepath.Join(n.data, "admin.token"), []byte("tn_none\n"), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	// n2..n5 join n1, the rest join joinSeeds of n1..n5 (one push/pull
	// with each) all at once: a hundred push/pulls at once against one
	// node time out on two cores.
	seeds := min(5, size)
	joinSeeds := 1
	if s := os.Getenv("TOOLNODE_SCALE_SEEDS"); s != "" {
		joinSeeds, _ = strconv.Atoi(s)
	}
	for i, n := range c.nodes[1:] {
		if i+1 < seeds {
			n.join = []string{c.nodes[0].gossip}
			continue
		}
		n.join = nil
		for k := range min(joinSeeds, seeds) {
			n.join = append(n.join, c.nodes[(i+k)%seeds].gossip)
		}
	}
	start, ready := c.start, c.ready
	if floor {
		start = func(n *tnode) {
			args := []string{"-name", n.name, "-gossip", n.gossip, "-join", strings.Join(n.join, ",")}
			if leg == "nothing" {
				args = append(args, "-idle")
			}
			// TOOLNODE_SCALE_FLOOR_ARGS: more flags of gossipfloor
			// (-gossip-interval, -probe-interval).
			args = append(args, strings.Fields(os.Getenv("TOOLNODE_SCALE_FLOOR_ARGS"))...)
			n.p = startProc(b, childEnv(), floorBin, args...)
			b.Cleanup(n.p.kill)
		}
		ready = func(n *tnode) {
			if err := waitLog(n.p, "alive=", 60*time.Second); err != nil {
				b.Fatalf("%s: %v", n.name, err)
			}
		}
	}
	// Each node is asked by a goroutine of its own from its launch: one
	// that is slow to answer under the load of a hundred starts holds up
	// no other's measurement. Every 10 ms × N (at least 250 ms): the
	// harness asks about 100 times a second in all, whatever N.
	every := max(250*time.Millisecond, time.Duration(size)*10*time.Millisecond)
	// Uncompressed: gzipping each answer was a tenth of a node's CPU
	// while it formed (the legs of a run pay the same either way).
	// /readyz?verbose and /metrics need a token of role read: the admin
	// token n1 writes when it bootstraps, which a node honours once the
	// cluster's state has reached it (a part of its forming).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &bearer{
		file: filepath.Join(c.nodes[0].data, "admin.token"),
		base: &http.Transport{DisableCompression: true},
	}}
	var fmu sync.Mutex
	done := map[string]bool{}
	startTicks := map[string]uint64{} // CPU from exec until the node formed
	var formedAt []float64            // when each node formed, from n1's launch, in order
	var formedLast []string           // the same, with what each lacked at the poll before
	var begin time.Time
	why := map[string]string{}
	allFormed := make(chan struct{})
	stopPoll := make(chan struct{})
	defer close(stopPoll)
	poll := func(n *tnode) {
		for {
			err := formedNode(hc, n, metricsAddr[n.name], size, floor)
			fmu.Lock()
			if err == nil {
				done[n.name] = true
				formedAt = append(formedAt, time.Since(begin).Seconds())
				formedLast = append(formedLast, fmt.Sprintf("%s at %.1fs (before: %s)", n.name, formedAt[len(formedAt)-1], why[n.name]))
				startTicks[n.name] = procTicksOr0(n.p.cmd.Process.Pid)
				if len(done) == size {
					close(allFormed)
				}
				fmu.Unlock()
				return
			}
			why[n.name] = err.Error()
			fmu.Unlock()
			select {
			case <-stopPoll:
				return
			case <-time.After(every):
			}
		}
	}
	launch := func(n *tnode) {
		start(n)
		go poll(n)
	}
	// Leg "waves" launches the nodes past the seeds TOOLNODE_SCALE_WAVE
	// (default 10) at a time, each wave once the one before serves; the
	// other legs launch them all at once.
	wave := 0
	if leg == "waves" {
		wave = 10
		if s := os.Getenv("TOOLNODE_SCALE_WAVE"); s != "" {
			var err error
			if wave, err = strconv.Atoi(s); err != nil || wave < 1 {
				b.Fatalf("TOOLNODE_SCALE_WAVE=%q: want a number of nodes", s)
			}
		}
	}
	begin = time.Now()
	launch(c.nodes[0])
	ready(c.nodes[0])
	for _, n := range c.nodes[1:seeds] {
		launch(n)
	}
	for _, n := range c.nodes[1:seeds] {
		ready(n)
	}
	for rest := c.nodes[seeds:]; len(rest) > 0; {
		k := len(rest)
		if wave > 0 {
			k = min(wave, k)
		}
		for _, n := range rest[:k] {
			launch(n)
		}
		if k < len(rest) {
			for _, n := range rest[:k] {
				ready(n)
			}
		}
		rest = rest[k:]
	}
	launched := time.Now()
	deadline := time.NewTimer(time.Until(begin.Add(120 * time.Second)))
	defer deadline.Stop()
	note := time.NewTicker(10 * time.Second)
	defer note.Stop()
	status := func() string {
		fmu.Lock()
		defer fmu.Unlock()
		var missing []string
		for _, n := range c.nodes {
			if !done[n.name] {
				missing = append(missing, n.name+": "+why[n.name])
			}
		}
		if len(missing) > 5 {
			missing = append(missing[:5], "...")
		}
		return fmt.Sprintf("%d of %d nodes formed after %v; not yet: %s", len(done), size, time.Since(begin).Round(time.Second), strings.Join(missing, "; "))
	}
wait:
	for {
		select {
		case <-allFormed:
			break wait
		case <-note.C:
			b.Logf("N=%d %s: %s", size, leg, status())
			for _, n := range c.nodes {
				if n.p.exited() {
					b.Fatalf("%s exited: %s", n.name, n.p.tail())
				}
			}
		case <-deadline.C:
			b.Fatalf("N=%d %s: not formed within 120s: %s", size, leg, status())
		}
	}
	formed := time.Since(begin)
	// Half of the nodes, and nine in ten, had formed by these times: a
	// long tail after p90 is gossip's stragglers, a late p50 the CPU of
	// the starts.
	fmu.Lock()
	p50, p90 := formedAt[(len(formedAt)-1)/2], formedAt[(len(formedAt)*9-1)/10]
	fmu.Unlock()
	b.ReportMetric(p50, "p50-formed-s")
	b.ReportMetric(p90, "p90-formed-s")
	b.ReportMetric(launched.Sub(begin).Seconds(), "launched-s")

	// Roles, as n1 sees them (the floor legs have none: all count as
	// clients).
	role := map[string]string{}
	if !floor {
		ms, err := readWithin(c.nodes[0].p9, "cluster/members", 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range parseMembers(ms) {
			role[m.name] = m.role
		}
	}

	// Idle means after the settling push/pulls a node makes for 30 s
	// after its join (cluster.settle), and scaleSettle after formation.
	// TOOLNODE_SCALE_IDLE=0 measures no idle window: formation and the
	// CPU of the starts alone, in a few seconds a round.
	window := idleWindow
	if s := os.Getenv("TOOLNODE_SCALE_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("TOOLNODE_SCALE_IDLE=%q: %v", s, err)
		}
		window = d
	}
	idle := window > 0
	if idle {
		// A settle period on purpose: the starts' own CPU stays out of
		// the idle window measured next.
		time.Sleep(max(scaleSettle, time.Until(launched.Add(settlePeriod))))
	}
	before := map[string]uint64{}
	wakesBefore := map[string]uint64{}
	logBefore := map[string]int{}
	for _, n := range c.nodes {
		before[n.name] = procTicks(b, n.p.cmd.Process.Pid)
		wakesBefore[n.name] = procSwitches(n.p.cmd.Process.Pid)
		logBefore[n.name] = n.p.log.Len()
	}
	began := time.Now()
	time.Sleep(window) // the idle window measured: nothing happens in it on purpose
	elapsed := max(time.Since(began).Seconds(), 1e-3)
	// Suspicions in the window: a probe that went unanswered (a node
	// starved of CPU on a loaded machine answers late) makes its prober
	// suspect it, and the refutation is gossiped to every node: what an
	// idle window with a few of them costs is not what a quiet one does.
	suspicions, firstSuspicion := 0, ""
	for _, n := range c.nodes {
		for _, line := range strings.Split(n.p.log.Since(logBefore[n.name]), "\n") {
			if strings.Contains(line, "memberlist: Suspect ") {
				suspicions++
				if firstSuspicion == "" {
					firstSuspicion = n.name + ": " + line
				}
			}
		}
	}
	var total, leader float64
	var servers, clients []float64
	var leaderRSS float64
	var serverRSS, clientRSS []float64
	var leaderWakes float64
	var serverWakes, clientWakes []float64
	var serverStart, clientStart []float64
	for _, n := range c.nodes {
		pid := n.p.cmd.Process.Pid
		var pct, wakes float64
		if idle {
			pct = float64(procTicks(b, pid)-before[n.name]) / clockTicks / elapsed * 100
			wakes = float64(procSwitches(pid)-wakesBefore[n.name]) / elapsed
		}
		startMs := float64(startTicks[n.name]) * 1000 / clockTicks
		rss := rssMiB(b, pid)
		total += pct
		switch role[n.name] {
		case "leader":
			leader, leaderRSS, leaderWakes = pct, rss, wakes
		case "voter", "nonvoter":
			servers = append(servers, pct)
			serverRSS = append(serverRSS, rss)
			serverWakes = append(serverWakes, wakes)
			serverStart = append(serverStart, startMs)
		default:
			clients = append(clients, pct)
			clientRSS = append(clientRSS, rss)
			clientWakes = append(clientWakes, wakes)
			clientStart = append(clientStart, startMs)
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
	b.ReportMetric(leaderWakes, "leader-wakes/s")
	b.ReportMetric(mean(serverWakes), "server-wakes/s")
	b.ReportMetric(mean(clientWakes), "client-wakes/s")
	b.ReportMetric(mean(serverStart), "server-start-cpu-ms")
	b.ReportMetric(mean(clientStart), "client-start-cpu-ms")
	b.ReportMetric(float64(suspicions), "idle-suspicions")
	if suspicions > 0 {
		b.Logf("N=%d %s: %d suspicions in the idle window; the first: %s", size, leg, suspicions, firstSuspicion)
	}
	if !floor {
		b.ReportMetric(float64(len(servers)+1), "servers")
	}
	b.Logf("N=%d %s: launched in %v; half formed at %.1fs, nine in ten at %.1fs; the last: %s", size, leg, launched.Sub(begin).Round(time.Millisecond), p50, p90, strings.Join(formedLast[max(0, len(formedLast)-3):], "; "))
	b.Logf("N=%d %s: formed in %v; idle CPU over %v %.1f%% of a core (leader %.1f%%, servers %s, clients mean %.3f%%); wake-ups/s leader %.0f, server %.0f, client %.1f; CPU until formed: server %.0f ms, client %.0f ms; RSS leader %.0f MiB, server %.0f, client %.0f",
		size, leg, formed.Round(time.Millisecond), window, total, leader, pcts(servers), mean(clients), leaderWakes, mean(serverWakes), mean(clientWakes), mean(serverStart), mean(clientStart), leaderRSS, mean(serverRSS), mean(clientRSS))
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

// formedNode is nil once node n lists size alive members and is ready.
// A node is asked over HTTP, `/readyz?verbose` (ready, and the members by
// state), which costs it about a third of a /metrics scrape (2.75 ms of
// CPU here) and far less than a 9P attach and read: the watcher's asking
// is CPU the forming nodes pay. A build whose /readyz has no member line
// (an older baseline) is asked /metrics for toolnode_members instead. A
// floor process prints its count.
func formedNode(hc *http.Client, n *tnode, metricsAddr string, size int, floor bool) error {
	if floor {
		out := n.p.log.String()
		i := strings.LastIndex(out, "alive=")
		if i < 0 {
			return fmt.Errorf("no members yet")
		}
		var alive int
		fmt.Sscan(out[i+len("alive="):], &alive)
		if alive != size && alive != 0 { // 0: -idle
			return fmt.Errorf("%d alive", alive)
		}
		return nil
	}
	get := func(path string) (int, string, error) {
		resp, err := hc.Get("http://" + metricsAddr + path)
		if err != nil {
			return 0, "", err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body), err
	}
	code, body, err := get("/readyz?verbose")
	if err != nil {
		return err
	}
	alive := -1
	var states string // the others, as /readyz?verbose counts them
	if i := strings.Index(body, "members alive="); i >= 0 {
		fmt.Sscan(body[i+len("members alive="):], &alive)
		states, _, _ = strings.Cut(body[i+len("members "):], "\n")
		if _, rest, ok := strings.Cut(states, " "); ok {
			states = rest
		}
	} else {
		_, metrics, err := get("/metrics")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "toolnode_members{") && strings.Contains(l, `state="alive"`) {
				f := strings.Fields(l)
				alive, _ = strconv.Atoi(f[len(f)-1])
			}
		}
	}
	if alive != size {
		if states != "" {
			// A straggler lacks a member it does not know of yet, or
			// one it suspects: the last nodes to form say which.
			return fmt.Errorf("%d alive, %s", alive, states)
		}
		return fmt.Errorf("%d alive", alive)
	}
	if code != 200 {
		return fmt.Errorf("/readyz %d", code)
	}
	return nil
}

// procSwitches is the context switches of every thread of a process:
// each is a wake-up, which on a virtual machine costs more than the work
// of an idle node.
func procSwitches(pid int) uint64 {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				sum += x
			} else if v, ok := strings.CutPrefix(l, "nonvoluntary_ctxt_switches:"); ok {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				sum += x
			}
		}
	}
	return sum
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
	return testcluster.ReadErr(fsys, path)
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

// procTicksOr0 is procTicks, 0 if the process is gone.
func procTicksOr0(pid int) uint64 {
	t, _ := readProcTicks(pid)
	return t
}

// procTicks is a process's user plus system time, in clock ticks.
func procTicks(tb testing.TB, pid int) uint64 {
	t, err := readProcTicks(pid)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func readProcTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's ")" start at field 3 (state);
	// utime and stime are fields 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st, nil
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

// bearer adds the token in file, once it exists, to every request.
type bearer struct {
	file  string
	base  http.RoundTripper
	mu    sync.Mutex
	token string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	if b.token == "" {
		if t, err := os.ReadFile(b.file); err == nil {
			b.token = strings.TrimSpace(string(t))
		}
	}
	token := b.token
	b.mu.Unlock()
	if token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return b.base.RoundTrip(r)
}
