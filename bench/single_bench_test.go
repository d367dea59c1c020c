//go:build linux

package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"

	"github.com/toolnode/toolnode/internal/testport"
)

// The single-node benchmarks measure what a user sees: a real node
// process, driven over loopback by the independent 9P client in this
// (another) process, each beside its floor in the same run:
//
//   - BenchmarkStart: process start → t/idx lists every one of 10,000
//     tools, on a fresh data directory and on a restart; the floor is a
//     process that reads and parses the same 10,000 .meta files. The three
//     legs run back to back in each round, and the ratios are the medians
//     of the rounds'.
//   - BenchmarkCall: walk+open call, write "nop {}", read to EOF, clunk,
//     sandbox on; the floor is an exec of the same script from the client.
//   - BenchmarkWalkRead: walk+open+read+clunk of an agent's toolsrv.rev;
//     the floor is the same on a static file of go9p's own server, in a
//     process of its own.
//   - BenchmarkReadOpenFid: one read at offset 0 on an open fid, against
//     the same two.

const startTools = 10000

var (
	helperMu   sync.Mutex
	helperBins = map[string]string{} // name → path, once built
)

// helperBin builds one of bench/internal's floor programs (metafloor,
// go9pstatic, mcpecho, gossipfloor) next to the toolnode binary, once.
func helperBin(tb testing.TB, name string) string {
	tb.Helper()
	bin := toolnodeBin(tb) // makes binDir
	helperMu.Lock()
	defer helperMu.Unlock()
	if p, ok := helperBins[name]; ok {
		return p
	}
	p := filepath.Join(filepath.Dir(bin), name)
	cmd := exec.Command(goTool(), "build", "-o", p, "github.com/toolnode/toolnode/bench/internal/"+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building %s: %v\n%s", name, err, out)
	}
	helperBins[name] = p
	return p
}

// startFixture writes startTools generated .meta files (one in five with
// variants, every args schema distinct) into dir.
func startFixture(tb testing.TB, dir string) {
	tb.Helper()
	for i := range startTools {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tool%05d.meta", i)), startMeta(i), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func startMeta(i int) []byte {
	meta := fmt.Sprintf(`{
  "description": "generated tool number %d",
  "prompt": "Tool %d does one small thing.",
  "args": {"type": "object", "properties": {"p_%d": {"type": "string"}, "n_%d": {"type": "integer"}}, "required": ["p_%d"]},
  "tier": %q,
  "cmd": "echo tool %d"`, i, i, i, i, i, []string{"hot", "warm", "cold"}[i%3], i)
	if i%5 == 0 {
		meta += fmt.Sprintf(`,
  "variants": [
    {"match": {"binary": "not-installed-%d"}, "cmd": "x"},
    {"match": {"binary": "sh", "env": "HOME", "os": ["linux", "darwin"]}, "cmd": "sh -c 'echo %d'"},
    {"match": {"file": "/etc/os-release"}, "description": "fallback"}
  ]`, i%25, i)
	}
	return []byte(meta + "\n}\n")
}

// nodeArgs are the flags of a lone node on fresh loopback ports.
func nodeArgs(tb testing.TB, data, tools, agents string) (args []string, p9addr string) {
	ports := testport.Pick(tb, 3)
	return append([]string{
		"-name", "bench", "-data", data, "-tools", tools, "-agents", agents,
		"-9p", ports[0], "-gossip", ports[1], "-cluster", ports[2],
	}, benchAnon...), ports[0]
}

// waitIdx polls addr until t/idx lists want tools, and returns when.
func waitIdx(p *proc, addr string, want int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if p.exited() {
			return fmt.Errorf("the node exited while starting:\n%s", p.tail())
		}
		if c, err := dial9(addr); err == nil {
			idx, err := c.read("t/idx")
			c.close()
			if err == nil && strings.Count(idx, "\n") == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("t/idx does not list %d tools within %v:\n%s", want, d, p.tail())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// BenchmarkStart runs rounds of three legs back to back, so that the legs
// of a round share the machine's load: the floor (metafloor reads and
// parses the 10,000 files), a node on a fresh data directory, and a node
// restarted on a data directory that already holds the tools; each node
// leg runs from exec until t/idx lists every tool, and the node is
// stopped (SIGTERM) untimed. It reports the medians of the legs and of
// the rounds' ratios to their floor.
func BenchmarkStart(b *testing.B) {
	bin := toolnodeBin(b)
	floor := helperBin(b, "metafloor")
	root := b.TempDir()
	tools := filepath.Join(root, "tools")
	agents := filepath.Join(root, "agents")
	for _, d := range []string{tools, agents} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	startFixture(b, tools)
	env := childEnv("XDG_CONFIG_HOME=" + filepath.Join(root, "config"))

	// node starts a node on data and returns how long it took until t/idx
	// listed every tool; the node is stopped after the clock stops.
	node := func(bin, data string) time.Duration {
		args, addr := nodeArgs(b, data, tools, agents)
		t0 := time.Now()
		p := startProc(b, env, bin, args...)
		if err := waitIdx(p, addr, startTools, 60*time.Second); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		p.stop(30 * time.Second)
		return d
	}
	base := os.Getenv("TOOLNODE_BENCH_BASELINE")
	restartData := filepath.Join(root, "data-restart")
	baseRestartData := filepath.Join(root, "data-restart-baseline")
	node(bin, restartData) // the restart leg starts on a data directory holding the tools
	if base != "" {
		node(base, baseRestartData)
	}
	var floors, fresh, restart, baseFresh, baseRestart []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		out, err := exec.Command(floor, tools).Output()
		if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(startTools) {
			b.Fatalf("metafloor: %q, %v", out, err)
		}
		floors = append(floors, time.Since(t0))
		// With a baseline, its legs go first in odd rounds.
		legs := []func(){
			func() {
				data := filepath.Join(root, fmt.Sprintf("data-%d", i))
				fresh = append(fresh, node(bin, data))
				os.RemoveAll(data)
				restart = append(restart, node(bin, restartData))
			},
		}
		if base != "" {
			baseLeg := func() {
				data := filepath.Join(root, fmt.Sprintf("data-baseline-%d", i))
				baseFresh = append(baseFresh, node(base, data))
				os.RemoveAll(data)
				baseRestart = append(baseRestart, node(base, baseRestartData))
			}
			if i%2 == 1 {
				legs = append([]func(){baseLeg}, legs...)
			} else {
				legs = append(legs, baseLeg)
			}
		}
		for _, leg := range legs {
			leg()
		}
	}
	b.StopTimer()
	ms := func(d []time.Duration) float64 {
		v := make([]float64, len(d))
		for i := range d {
			v[i] = float64(d[i]) / 1e6
		}
		return median(v)
	}
	ratio := func(d []time.Duration) float64 {
		v := make([]float64, len(d))
		for i := range d {
			v[i] = float64(d[i]) / float64(floors[i])
		}
		return median(v)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(floors), "floor-ms")
	b.ReportMetric(ms(fresh), "fresh-ms")
	b.ReportMetric(ms(restart), "restart-ms")
	b.ReportMetric(ratio(fresh), "fresh/floor")
	b.ReportMetric(ratio(restart), "restart/floor")
	if base != "" {
		pair := func(a, d []time.Duration) float64 {
			v := make([]float64, len(a))
			for i := range a {
				v[i] = float64(a[i]) / float64(d[i])
			}
			return median(v)
		}
		b.ReportMetric(ms(baseFresh), "baseline-fresh-ms")
		b.ReportMetric(ms(baseRestart), "baseline-restart-ms")
		b.ReportMetric(pair(fresh, baseFresh), "fresh/baseline")
		b.ReportMetric(pair(restart, baseRestart), "restart/baseline")
		for i := range baseFresh {
			b.Logf("round %d: baseline fresh %v, restart %v", i, baseFresh[i].Round(time.Millisecond), baseRestart[i].Round(time.Millisecond))
		}
	}
	for i := range floors {
		b.Logf("round %d: floor %v, fresh %v (%.2f×), restart %v (%.2f×)", i, floors[i].Round(time.Millisecond),
			fresh[i].Round(time.Millisecond), float64(fresh[i])/float64(floors[i]),
			restart[i].Round(time.Millisecond), float64(restart[i])/float64(floors[i]))
	}
}

// median of v (0 for none).
func median[T ~int64 | ~float64](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// nopScript is the trivial tool of the call benchmark.
const nopScript = "#!/bin/sh\ncat >/dev/null\necho ok\n"

// lone is a running node with an agent that has loaded nop.
type lone struct {
	p     *proc
	addr  string
	conn  *conn9
	agent string // session/S/agent/A
	tool  string // the nop script's path
}

func startLone(b *testing.B) *lone { return startLoneWith(b) }

// startLoneWith is startLone with extra flags for the node.
func startLoneWith(b *testing.B, flags ...string) *lone {
	return startLoneBin(b, toolnodeBin(b), flags...)
}

// startLoneBin is startLoneWith for the toolnode binary bin.
func startLoneBin(b *testing.B, bin string, flags ...string) *lone {
	return startLoneAs(b, bin, nil, flags...)
}

// startCallNode is the node BenchmarkCall and BenchmarkCallSteps call
// through: a lone node, or, with TOOLNODE_BENCH_CALL_CLIENT=1, a client
// (startClientBin).
func startCallNode(b *testing.B, bin string) *lone {
	if os.Getenv("TOOLNODE_BENCH_CALL_CLIENT") == "1" {
		return startClientBin(b, bin)
	}
	return startLoneBin(b, bin)
}

// startClientBin starts two nodes of binary bin with -voters 1: a server
// that publishes nop, and a client that joins it; the client's agent has
// loaded nop, whose executable it fetched from the server, and runs it
// on the client.
func startClientBin(b *testing.B, bin string) *lone {
	b.Helper()
	srv := startLoneBin(b, bin, "-voters", "1")
	gossip := srv.p.cmd.Args[slices.Index(srv.p.cmd.Args, "-gossip")+1]
	cl := startLoneAs(b, bin, &srv.tool, "-voters", "1", "-join", gossip, "-name", "benchc")
	return cl
}

// startLoneAs is startLoneBin; with a non-nil tool, the node publishes
// nothing, waits until it lists the tool another node published, and
// takes *tool as the tool's path.
func startLoneAs(b *testing.B, bin string, tool *string, flags ...string) *lone {
	b.Helper()
	root := b.TempDir()
	tools := filepath.Join(root, "tools")
	agents := filepath.Join(root, "agents")
	for _, d := range []string{tools, agents} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	l := &lone{tool: filepath.Join(tools, "nop")}
	if tool != nil {
		l.tool = *tool
	} else {
		if err := os.WriteFile(l.tool, []byte(nopScript), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tools, "nop.meta"), []byte(`{"description":"does nothing"}`+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	args, addr := nodeArgs(b, filepath.Join(root, "data"), tools, agents)
	l.addr = addr
	l.p = startProc(b, childEnv("XDG_CONFIG_HOME="+filepath.Join(root, "config")), bin, append(args, flags...)...)
	b.Cleanup(func() { l.p.stop(30 * time.Second) })
	if err := waitIdx(l.p, addr, 1, 60*time.Second); err != nil {
		b.Fatal(err)
	}
	c, err := dial9(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.close)
	l.conn = c
	session := "bench"
	if tool != nil {
		session = "benchc" // the other node made bench
	}
	s, err := c.ask("session/new", "name="+session)
	if err != nil {
		b.Fatal(err)
	}
	a, err := c.ask("session/"+strings.TrimSpace(s)+"/agent/new", "name=a")
	if err != nil {
		b.Fatal(err)
	}
	l.agent = "session/" + strings.TrimSpace(s) + "/agent/" + strings.TrimSpace(a)
	if _, err := c.ask(l.agent+"/ctl", "tool_load nop"); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkCall's legs floor-exec and toolnode run one after the other;
// its leg interleaved runs, in every iteration, the exec floor and the
// call in turn (and, when TOOLNODE_BENCH_BASELINE names another toolnode
// binary, the same call on a node of that binary), so that all see the
// same load, and reports each (µs/op) and what a call adds to the floor.
// Its proto-floor is the protocol's share: the call's 9P messages answered
// by go9p with no work behind them, timed after each exec; what a call
// adds beyond the exec and that (added-beyond-proto) is the node's own.
func BenchmarkCall(b *testing.B) {
	l := startCallNode(b, toolnodeBin(b))
	b.Run("floor-exec", func(b *testing.B) {
		for b.Loop() {
			execFloor(b, l.tool)
		}
	})
	b.Run("toolnode", func(b *testing.B) {
		for b.Loop() {
			l.call(b)
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		var base *lone
		if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
			base = startCallNode(b, bin)
		}
		// The protocol's floor: the exec, then the same 9P messages
		// answered by go9p with no work behind them.
		g := startGo9p(b)
		for range 3 { // the sandbox's read rules walked, calls made ready
			l.call(b)
			if base != nil {
				base.call(b)
			}
		}
		var floor, proto, call, baseline time.Duration
		cpu0 := procCPU(b, l.p)
		var baseCPU0 time.Duration
		if base != nil {
			baseCPU0 = procCPU(b, base.p)
		}
		// The two nodes take turns at going first: the second call of an
		// iteration runs while the first node cleans up after its own.
		i := 0
		for b.Loop() {
			t0 := time.Now()
			execFloor(b, l.tool)
			t1 := time.Now()
			callOn(b, g, "call")
			floor += t1.Sub(t0)
			proto += time.Since(t1)
			if base != nil && i%2 == 1 {
				t := time.Now()
				base.call(b)
				baseline += time.Since(t)
			}
			t := time.Now()
			l.call(b)
			call += time.Since(t)
			if base != nil && i%2 == 0 {
				t := time.Now()
				base.call(b)
				baseline += time.Since(t)
			}
			i++
		}
		cpu := procCPU(b, l.p) - cpu0
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
		b.ReportMetric(us(floor), "floor-µs")
		b.ReportMetric(us(call), "call-µs")
		b.ReportMetric(us(call-floor), "added-µs")
		b.ReportMetric(us(proto), "proto-floor-µs")
		b.ReportMetric(us(call-floor-proto), "added-beyond-proto-µs")
		b.ReportMetric(us(cpu), "node-cpu-µs")
		if base != nil {
			b.ReportMetric(us(baseline), "baseline-µs")
			b.ReportMetric(us(baseline-floor), "baseline-added-µs")
			b.ReportMetric(us(procCPU(b, base.p)-baseCPU0), "baseline-node-cpu-µs")
		}
	})
}

// callSteps are the client's steps of a call, each one 9P round trip but
// walk+open (two).
var callSteps = [...]string{"walkopen", "write", "read", "eof", "clunk"}

// steps is call, timing each of its steps into d.
func (l *lone) steps(b *testing.B, d *[len(callSteps)]time.Duration) {
	callStepsOn(b, l.conn, l.agent+"/call", d)
}

// callStepsOn makes a call of nop on the file path of c, timing each of
// its steps into d: on a node's call file, or on go9p's (startGo9p),
// which answers the same messages with no work behind them.
func callStepsOn(b *testing.B, c *conn9, path string, d *[len(callSteps)]time.Duration) {
	buf := make([]byte, 8192)
	t0 := time.Now()
	fid, err := c.fsys.Open(path, plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if _, err := fid.WriteAt([]byte("nop {}"), 0); err != nil {
		b.Fatal(err)
	}
	t2 := time.Now()
	n, err := fid.ReadAt(buf, 0)
	if (err != nil && err != io.EOF) || string(buf[:n]) != "ok\n" {
		b.Fatalf("call: %q, %v", buf[:n], err)
	}
	t3 := time.Now()
	if k, err := fid.ReadAt(buf, int64(n)); k != 0 || (err != nil && err != io.EOF) {
		b.Fatalf("read at the end: %d bytes, %v", k, err)
	}
	t4 := time.Now()
	fid.Close()
	t5 := time.Now()
	ts := [...]time.Time{t0, t1, t2, t3, t4, t5}
	for i := range d {
		d[i] += ts[i+1].Sub(ts[i])
	}
}

// procCPU is the CPU time (user and system, in clock ticks of 10 ms
// summed over every thread) p's own process has used, without its
// children: the node's share of a call, not the tool's.
func procCPU(b *testing.B, p *proc) time.Duration {
	return time.Duration(procTicks(b, p.cmd.Process.Pid)) * (time.Second / clockTicks)
}

// BenchmarkCallSteps times each 9P step of the black-box call (walk+open,
// write, read, the read at the end, clunk) beside the exec floor and the
// same steps answered by go9p with no work behind them (go9p-*), and,
// with TOOLNODE_BENCH_BASELINE, the same steps on a node of that binary,
// the two nodes taking turns at going first.
func BenchmarkCallSteps(b *testing.B) {
	l := startCallNode(b, toolnodeBin(b))
	var base *lone
	if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
		base = startCallNode(b, bin)
	}
	g := startGo9p(b)
	var d, bd, gd [len(callSteps)]time.Duration
	for range 3 {
		l.steps(b, &d)
		if base != nil {
			base.steps(b, &bd)
		}
	}
	d, bd = [len(callSteps)]time.Duration{}, [len(callSteps)]time.Duration{}
	var floor time.Duration
	i := 0
	for b.Loop() {
		t := time.Now()
		execFloor(b, l.tool)
		floor += time.Since(t)
		callStepsOn(b, g, "call", &gd)
		if base != nil && i%2 == 1 {
			base.steps(b, &bd)
		}
		l.steps(b, &d)
		if base != nil && i%2 == 0 {
			base.steps(b, &bd)
		}
		i++
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(us(floor), "floor-µs")
	var sum, bsum time.Duration
	for i, name := range callSteps {
		b.ReportMetric(us(d[i]), name+"-µs")
		b.ReportMetric(us(gd[i]), "go9p-"+name+"-µs")
		sum += d[i]
		if base != nil {
			b.ReportMetric(us(bd[i]), "baseline-"+name+"-µs")
			bsum += bd[i]
		}
	}
	b.ReportMetric(us(sum-floor), "added-µs")
	if base != nil {
		b.ReportMetric(us(bsum-floor), "baseline-added-µs")
	}
}

// execFloor runs the nop script from this process, as a client would.
func execFloor(b *testing.B, tool string) {
	cmd := exec.Command(tool)
	cmd.Stdin = strings.NewReader("{}")
	out, err := cmd.Output()
	if err != nil || string(out) != "ok\n" {
		b.Fatalf("exec: %q, %v", out, err)
	}
}

// call calls nop as a client does: walk+open call, write, read to EOF,
// clunk.
func (l *lone) call(b *testing.B) { callOn(b, l.conn, l.agent+"/call") }

// callOn is call on the file path of c.
func callOn(b *testing.B, c *conn9, path string) {
	fid, err := c.fsys.Open(path, plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fid.WriteAt([]byte("nop {}"), 0); err != nil {
		b.Fatal(err)
	}
	out, err := readAll(fid)
	fid.Close()
	if err != nil || string(out) != "ok\n" {
		b.Fatalf("call: %q, %v", out, err)
	}
}

// startGo9p runs go9p's server with a static toolsrv.rev and a call file
// answering as nop's call does (callOn) in its own process and returns an attached connection.
func startGo9p(b *testing.B) *conn9 {
	b.Helper()
	bin := helperBin(b, "go9pstatic")
	addr := testport.One(b)
	p := startProc(b, childEnv(), bin, addr)
	b.Cleanup(p.kill)
	if err := waitLog(p, "serving", 30*time.Second); err != nil {
		b.Fatal(err)
	}
	c, err := dial9(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.close)
	return c
}

func walkRead(b *testing.B, c *conn9, path, want string) {
	for b.Loop() {
		walkReadOnce(b, c, path, want)
	}
}

// walkReadOnce walks to path on c, opens it, reads it and clunks it.
func walkReadOnce(b *testing.B, c *conn9, path, want string) {
	var buf [64]byte
	fid, err := c.fsys.Open(path, plan9.OREAD)
	if err != nil {
		b.Fatal(err)
	}
	n, err := fid.ReadAt(buf[:], 0)
	fid.Close()
	if (err != nil && err != io.EOF) || string(buf[:n]) != want {
		b.Fatalf("read %s: %q, %v", path, buf[:n], err)
	}
}

func readOpen(b *testing.B, c *conn9, path, want string) {
	fid, err := c.fsys.Open(path, plan9.OREAD)
	if err != nil {
		b.Fatal(err)
	}
	defer fid.Close()
	buf := make([]byte, 64)
	for b.Loop() {
		n, err := fid.ReadAt(buf, 0)
		if (err != nil && err != io.EOF) || string(buf[:n]) != want {
			b.Fatalf("read %s: %q, %v", path, buf[:n], err)
		}
	}
}

// rev is what toolsrv.rev reads for the benchmark's agent: it loaded one tool.
const rev = "1\n"

// BenchmarkWalkRead's leg interleaved makes, in every iteration, the walk
// and read on go9p's server and on the node (and, when
// TOOLNODE_BENCH_BASELINE names another toolnode binary, on a node of
// that binary) in turn, so that all see the same load.
func BenchmarkWalkRead(b *testing.B) {
	l := startLone(b)
	g := startGo9p(b)
	b.Run("floor-go9p", func(b *testing.B) { walkRead(b, g, "toolsrv.rev", "7\n") })
	b.Run("toolnode", func(b *testing.B) { walkRead(b, l.conn, l.agent+"/toolsrv.rev", rev) })
	b.Run("interleaved", func(b *testing.B) {
		var base *lone
		if bin := os.Getenv("TOOLNODE_BENCH_BASELINE"); bin != "" {
			base = startLoneBin(b, bin)
		}
		var floor, node, baseline time.Duration
		for b.Loop() {
			t0 := time.Now()
			walkReadOnce(b, g, "toolsrv.rev", "7\n")
			t1 := time.Now()
			walkReadOnce(b, l.conn, l.agent+"/toolsrv.rev", rev)
			t2 := time.Now()
			floor += t1.Sub(t0)
			node += t2.Sub(t1)
			if base != nil {
				walkReadOnce(b, base.conn, base.agent+"/toolsrv.rev", rev)
				baseline += time.Since(t2)
			}
		}
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
		b.ReportMetric(us(floor), "floor-µs")
		b.ReportMetric(us(node), "walk-µs")
		if base != nil {
			b.ReportMetric(us(baseline), "baseline-µs")
			b.ReportMetric(float64(node)/float64(baseline), "walk/baseline")
		}
	})
}

func BenchmarkReadOpenFid(b *testing.B) {
	l := startLone(b)
	g := startGo9p(b)
	b.Run("floor-go9p", func(b *testing.B) { readOpen(b, g, "toolsrv.rev", "7\n") })
	b.Run("toolnode", func(b *testing.B) { readOpen(b, l.conn, l.agent+"/toolsrv.rev", rev) })
}
