package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"

	"github.com/toolnode/toolnode/registry"
)

// okScript is the trivial tool of the call benchmarks: it reads its
// arguments and answers "ok".
const okScript = "#!/bin/sh\ncat >/dev/null\necho ok\n"

// BenchmarkCallLayers is one call of a trivial tool, sandbox on, peeled
// layer by layer, each layer in turn in every iteration so that all see
// the same load:
//
//   - exec: the tool's executable run directly with os/exec (the floor);
//   - runner: the node's Runner.Run, as the node invokes it;
//   - node: Node.Call, the call as the 9P server hands it over (agent and
//     tool lookup, argument parse, the -max-calls queue, metrics);
//   - 9p: what a client does: walk+open the agent's call file, write the
//     request, read the answer to its end, clunk, over loopback TCP to
//     the node in this process, audit included.
//
// It reports each layer's time (µs/op) and what each adds to the one
// beneath.
func BenchmarkCallLayers(b *testing.B) {
	tools := filepath.Join(b.TempDir(), "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		b.Fatal(err)
	}
	writeTool(b, tools, "ok", `{"description":"answers ok"}`, okScript)
	n := startNode(b, filepath.Join(b.TempDir(), "data"), tools, "")
	fsys := mount(b, n.P9Addr())
	mustAsk(b, fsys, "session/new", "name=bench")
	mustAsk(b, fsys, "session/bench/agent/new", "name=a")
	mustAsk(b, fsys, "session/bench/agent/a/tools", "ok")
	exe := filepath.Join(tools, "ok")
	e, ok := n.catalog.Get("ok")
	if !ok {
		b.Fatal("no tool ok in the catalog")
	}
	meta := e.Resolved
	inv := registry.Invocation{Tool: "ok", Meta: &meta, Exec: exe, Args: []byte("{}"), Session: "bench", Agent: "a"}
	ctx := context.Background()
	req := []byte("ok {}")
	buf := make([]byte, 64)
	call9p := func() string {
		fid, err := fsys.Open("session/bench/agent/a/call", plan9.ORDWR)
		if err != nil {
			b.Fatal(err)
		}
		defer fid.Close()
		if _, err := fid.WriteAt(req, 0); err != nil {
			b.Fatal(err)
		}
		var out []byte
		for {
			k, err := fid.ReadAt(buf, int64(len(out)))
			out = append(out, buf[:k]...)
			if k == 0 || err != nil {
				return string(out)
			}
		}
	}
	for range 3 { // the read rules walked, calls made ready
		if got := call9p(); got != "ok\n" {
			b.Fatalf("call answered %q", got)
		}
	}
	var tExec, tRunner, tNode, t9p time.Duration
	for b.Loop() {
		t0 := time.Now()
		cmd := exec.Command(exe)
		cmd.Stdin = strings.NewReader("{}")
		if out, err := cmd.Output(); err != nil || string(out) != "ok\n" {
			b.Fatalf("exec answered %q, %v", out, err)
		}
		t1 := time.Now()
		if out, err := n.runner.Run(ctx, inv); err != nil || string(out) != "ok\n" {
			b.Fatalf("Run answered %q, %v", out, err)
		}
		t2 := time.Now()
		if out, err := n.Call(ctx, "bench", "a", "ok", []byte("{}")); err != nil || string(out) != "ok\n" {
			b.Fatalf("Call answered %q, %v", out, err)
		}
		t3 := time.Now()
		if got := call9p(); got != "ok\n" {
			b.Fatalf("call answered %q", got)
		}
		t4 := time.Now()
		tExec += t1.Sub(t0)
		tRunner += t2.Sub(t1)
		tNode += t3.Sub(t2)
		t9p += t4.Sub(t3)
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(us(tExec), "exec-µs")
	b.ReportMetric(us(tRunner), "runner-µs")
	b.ReportMetric(us(tNode), "node-µs")
	b.ReportMetric(us(t9p), "9p-µs")
	b.ReportMetric(us(tRunner-tExec), "runner-added-µs")
	b.ReportMetric(us(tNode-tRunner), "node-added-µs")
	b.ReportMetric(us(t9p-tNode), "9p-added-µs")
	b.ReportMetric(us(t9p-tExec), "added-µs")
}
