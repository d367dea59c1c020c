//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/internal/testport"
)

// The MCP benchmarks time one tools/call through MCP, by the SDK's own
// client, against the same call over 9P. A call of a tool is an exec of
// ~2–10 ms whose time swings by more than a millisecond between rounds
// on a busy machine, so the legs are interleaved: every iteration runs
// each leg once, in an order that rotates, and what is reported is the
// median of each leg and the median of the per-iteration differences
// from the first leg (ns/op is the sum of the legs and means nothing).

// leg is one way of doing the same thing.
type leg struct {
	name string
	do   func() error
	// pid, when not 0, is a process that serves only this leg (the
	// `toolnode mcp` of a stdio leg): its CPU time and the times its
	// threads were put on a CPU are counted around each run of the leg.
	pid int
}

// schedstat sums /proc/PID/task/*/schedstat: the time the process's
// threads have run and how many times they were put on a CPU (each a
// wake-up or a preemption).
func schedstat(pid int) (run time.Duration, slices int64, err error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended
		}
		var ns, wait, n int64
		if _, err := fmt.Sscan(string(b), &ns, &wait, &n); err != nil {
			return 0, 0, fmt.Errorf("schedstat of %d/%s: %v", pid, t.Name(), err)
		}
		run += time.Duration(ns)
		slices += n
	}
	return run, slices, nil
}

// interleaved runs the legs round-robin and reports, for each, its
// median ("NAME-ms") and, for each after the first, the median of its
// difference from the first in the same iteration ("NAME-added-ms").
func interleaved(b *testing.B, legs ...leg) {
	b.Helper()
	took := make([][]time.Duration, len(legs))
	cpu := make([]time.Duration, len(legs))
	slices := make([]int64, len(legs))
	for _, l := range legs { // warm every path once
		if err := l.do(); err != nil {
			b.Fatalf("%s: %v", l.name, err)
		}
	}
	i := 0
	for b.Loop() {
		for k := range legs {
			j := (i + k) % len(legs)
			var run0 time.Duration
			var n0 int64
			if legs[j].pid != 0 {
				run0, n0, _ = schedstat(legs[j].pid)
			}
			t0 := time.Now()
			if err := legs[j].do(); err != nil {
				b.Fatalf("%s: %v", legs[j].name, err)
			}
			took[j] = append(took[j], time.Since(t0))
			if legs[j].pid != 0 {
				run1, n1, err := schedstat(legs[j].pid)
				if err != nil {
					b.Fatalf("%s: %v", legs[j].name, err)
				}
				cpu[j] += run1 - run0
				slices[j] += n1 - n0
			}
		}
		i++
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for j, l := range legs {
		b.ReportMetric(ms(median(took[j])), l.name+"-ms")
		if l.pid != 0 && len(took[j]) > 0 {
			calls := float64(len(took[j]))
			b.ReportMetric(float64(cpu[j])/1e3/calls, l.name+"-proc-cpu-us")
			b.ReportMetric(float64(slices[j])/calls, l.name+"-proc-wakeups")
		}
		if j == 0 {
			continue
		}
		diff := make([]time.Duration, len(took[j]))
		for k := range diff {
			diff[k] = took[j][k] - took[0][k]
		}
		b.ReportMetric(ms(median(diff)), l.name+"-added-ms")
	}
}

// mcpSession connects the SDK's client through t.
func mcpSession(b *testing.B, t mcp.Transport) *mcp.ClientSession {
	b.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, t, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// mcpLeg is a tools/call of name through s whose text must contain want.
func mcpLeg(legName string, s *mcp.ClientSession, name, want string) leg {
	params := &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}
	return leg{name: legName, do: func() error {
		res, err := s.CallTool(context.Background(), params)
		if err != nil {
			return err
		}
		if len(res.Content) == 0 {
			return fmt.Errorf("no content")
		}
		tc, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			return fmt.Errorf("%s answered %T", name, res.Content[0])
		}
		if res.IsError || !strings.Contains(tc.Text, want) {
			return fmt.Errorf("%s answered (isError %v) %q", name, res.IsError, tc.Text)
		}
		return nil
	}}
}

// withPid is l with its own process pid counted.
func withPid(l leg, pid int) leg {
	l.pid = pid
	return l
}

// askLeg is the request as plan9port's "9p rdwr" makes it: walk and open
// the file, write, read to EOF, clunk.
func askLeg(c *conn9, path, req, want string) leg {
	return leg{name: "9p", do: func() error {
		out, err := c.ask(path, req)
		if err != nil || !strings.Contains(out, want) {
			return fmt.Errorf("%q, %v", out, err)
		}
		return nil
	}}
}

// keptLeg is the same request on a fid kept open: write at offset 0,
// read to EOF.
func keptLeg(b *testing.B, c *conn9, path, req, want string) leg {
	fid, err := c.fsys.Open(path, plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fid.Close() })
	return leg{name: "9p-kept-fid", do: func() error {
		if _, err := fid.WriteAt([]byte(req), 0); err != nil {
			return err
		}
		out, err := readAll(fid)
		if err != nil || !strings.Contains(string(out), want) {
			return fmt.Errorf("%q, %v", out, err)
		}
		return nil
	}}
}

// BenchmarkMCPCall is one tools/call through MCP beside the same request
// over 9P, interleaved, against one node with every protection on:
//   - 9p: walk+open, write, read to EOF, clunk (as BenchmarkCall);
//   - 9p-kept-fid: write and read to EOF on a fid kept open;
//   - mcp-stdio: `toolnode mcp` as a child process, as desktop clients
//     run it, speaking 9P over TCP to the node;
//   - mcp-http: the node's own -mcp endpoint (Streamable HTTP).
//
// call is the trivial tool (an exec in the sandbox); builtin is the
// built-in tools_all, a write to the agent's ctl file that runs nothing,
// so what MCP adds shows without the exec's noise.
func BenchmarkMCPCall(b *testing.B) {
	mcpAddr := testport.One(b)
	l := startLoneWith(b, "-mcp", mcpAddr)
	type stdioBridge struct {
		name string
		s    *mcp.ClientSession
		pid  int
	}
	var bridges []stdioBridge
	for _, v := range stdioVariants(b) {
		bin := v.bin
		if bin == "" {
			bin = toolnodeBin(b)
		}
		cmd := exec.Command(bin, "mcp", "-a", l.addr)
		if len(v.env) > 0 {
			cmd.Env = append(os.Environ(), v.env...)
		}
		s := mcpSession(b, &mcp.CommandTransport{Command: cmd})
		bridges = append(bridges, stdioBridge{v.name, s, cmd.Process.Pid})
	}
	http := mcpSession(b, &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/", HTTPClient: &http.Client{}, MaxRetries: -1})
	sessions := []*mcp.ClientSession{http}
	for _, br := range bridges {
		sessions = append(sessions, br.s)
	}
	for _, s := range sessions {
		if res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_load", Arguments: map[string]any{"name": "nop"}}); err != nil || res.IsError {
			b.Fatalf("tool_load: %v %+v", err, res)
		}
	}
	legs := func(b *testing.B, file, req, tool, want string) []leg {
		out := []leg{
			askLeg(l.conn, l.agent+"/"+file, req, want),
			keptLeg(b, l.conn, l.agent+"/"+file, req, want),
		}
		for _, br := range bridges {
			out = append(out, withPid(mcpLeg(br.name, br.s, tool, want), br.pid))
		}
		return append(out, mcpLeg("mcp-http", http, tool, want))
	}
	b.Run("call", func(b *testing.B) {
		interleaved(b, legs(b, "call", "nop {}", "nop", "ok")...)
	})
	b.Run("builtin", func(b *testing.B) {
		interleaved(b, legs(b, "ctl", "tools_all", "tools_all", "nop")...)
	})
}

// stdioVariant is a `toolnode mcp` leg run with more environment, or
// from another binary.
type stdioVariant struct {
	name string
	env  []string
	bin  string // "" is the tree's own
}

// stdioVariants are the stdio legs: mcp-stdio, as a desktop client runs
// it, and one more for each variant $TOOLNODE_BENCH_MCP_STDIO names, so
// a setting of the bridge's process, or another build of it, can be
// compared with the default in the same run: "NAME:K=V K=V;NAME:K=V",
// where bin=PATH runs the toolnode binary at PATH instead. E.g.
// "procs2:GOMAXPROCS=2;before:bin=/abs/path/toolnode" gives legs
// mcp-stdio-procs2 and mcp-stdio-before.
func stdioVariants(b *testing.B) []stdioVariant {
	out := []stdioVariant{{name: "mcp-stdio"}}
	spec := os.Getenv("TOOLNODE_BENCH_MCP_STDIO")
	for _, v := range strings.Split(spec, ";") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		name, env, ok := strings.Cut(v, ":")
		if !ok || name == "" {
			b.Fatalf("$TOOLNODE_BENCH_MCP_STDIO: %q is not NAME:K=V ...", v)
		}
		sv := stdioVariant{name: "mcp-stdio-" + name}
		for _, kv := range strings.Fields(env) {
			if p, ok := strings.CutPrefix(kv, "bin="); ok {
				sv.bin = p
				continue
			}
			sv.env = append(sv.env, kv)
		}
		out = append(out, sv)
	}
	return out
}

// BenchmarkMCPFloor is what the SDK costs with no toolnode in it: a
// tools/call of a tool that answers "ok" and does nothing
// (internal/mcpecho, a process of its own, over stdio and over
// Streamable HTTP with JSON responses), beside one 9P round trip of the
// same size to go9p's own server in a process of its own (a read of a
// static file on an open fid), interleaved.
func BenchmarkMCPFloor(b *testing.B) {
	g := startGo9p(b)
	fid, err := g.fsys.Open("toolsrv.rev", plan9.OREAD)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fid.Close() })
	echo := helperBin(b, "mcpecho")
	echoCmd := exec.Command(echo)
	stdio := mcpSession(b, &mcp.CommandTransport{Command: echoCmd})
	addr := testport.One(b)
	p := startProc(b, childEnv(), echo, "-http", addr)
	b.Cleanup(p.kill)
	if err := waitLog(p, "serving", 30*time.Second); err != nil {
		b.Fatal(err)
	}
	http := mcpSession(b, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/", HTTPClient: &http.Client{}, MaxRetries: -1})
	buf := make([]byte, 64)
	interleaved(b,
		leg{name: "9p-read", do: func() error { return readOnce(fid, buf, "7\n") }},
		withPid(mcpLeg("mcp-stdio", stdio, "echo", "ok"), echoCmd.Process.Pid),
		mcpLeg("mcp-http", http, "echo", "ok"))
}

func readOnce(fid *client.Fid, buf []byte, want string) error {
	n, err := fid.ReadAt(buf, 0)
	if (err != nil && !errors.Is(err, io.EOF)) || string(buf[:n]) != want {
		return fmt.Errorf("read %q, %v", buf[:n], err)
	}
	return nil
}

// BenchmarkMCPAllocs is what one tools/call allocates in the SDK, client
// and server together, in one process over its in-memory transport (a
// net.Pipe), with a tool that does nothing. Its time is not a floor (a
// net.Pipe hands over a few hundred bytes at a time); B/op and allocs/op
// are what matter: the same on any machine.
func BenchmarkMCPAllocs(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok\n"}}}, nil
		})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	l := mcpLeg("echo", mcpSession(b, ct), "echo", "ok")
	b.ReportAllocs()
	for b.Loop() {
		if err := l.do(); err != nil {
			b.Fatal(err)
		}
	}
}
