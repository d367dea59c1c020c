package node

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// A routed call against a local call of the same trivial tool, both
// through 9P on n1 with the sandbox on: "here" runs on n1, "there" only on
// n2 (its variant needs a binary only n2's host has).
func benchRoute(b *testing.B, tool string) {
	root := b.TempDir()
	n1 := startHost(b, "n1", root, nil)
	n2 := startHost(b, "n2", root, []string{"frob"}, n1.gossip.LocalAddr())
	waitFor(b, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	writeTool(b, n1.cfg.ToolsDir, "here", `{"description":"local"}`, nopScript)
	writeTool(b, n1.cfg.ToolsDir, "there", `{"description":"remote","variants":[{"match":{"binary":"frob"}}]}`, nopScript)
	f1 := mount(b, n1.P9Addr())
	waitFor(b, "there runnable on n2", 5*time.Second, func() bool {
		out, err := ask(f1, "cluster/where", "there")
		return err == nil && out == "n2\n"
	})
	_ = n2
	mustAsk(b, f1, "session/new", "name=bench")
	mustAsk(b, f1, "session/bench/agent/new", "name=a")
	mustAsk(b, f1, "session/bench/agent/a/tools", "here\nthere")
	fid, err := f1.Open("session/bench/agent/a/call", plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	defer fid.Close()
	req := []byte(tool + ` {"x":1}`)
	buf := make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := fid.WriteAt(req, 0); err != nil {
			b.Fatal(err)
		}
		k, err := fid.ReadAt(buf, 0)
		if (err != nil && err != io.EOF) || string(buf[:k]) != `{"x":1}` {
			b.Fatalf("call answered %q, %v", buf[:k], err)
		}
	}
}

func BenchmarkCallLocal(b *testing.B)  { benchRoute(b, "here") }
func BenchmarkCallRouted(b *testing.B) { benchRoute(b, "there") }

// BenchmarkPublishPropagation: the time from a .meta written into the
// publisher's tools directory to its presence in t/idx of every node of a
// five-node cluster. Reports p50 and p99 over b.N tools.
func BenchmarkPublishPropagation(b *testing.B) {
	root := b.TempDir()
	nodes := []*Node{startHost(b, "n1", root, nil)}
	for i := 2; i <= 5; i++ {
		nodes = append(nodes, startHost(b, fmt.Sprintf("n%d", i), root, nil, nodes[0].gossip.LocalAddr()))
	}
	waitFor(b, "five voters", 20*time.Second, func() bool { return len(voters(nodes[0])) == 5 })
	publisher := nodes[2] // a follower: its writes are forwarded
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("p%05d", i)
		start := time.Now()
		meta := filepath.Join(publisher.cfg.ToolsDir, name+".meta")
		if err := os.WriteFile(meta, []byte(`{"description":"propagation"}`), 0o644); err != nil {
			b.Fatal(err)
		}
		for _, n := range nodes {
			for {
				if e, ok := n.catalog.Get(name); ok && e.Visible && strings.Contains(idxText(n), name+"\t") {
					break
				}
				if time.Since(start) > 10*time.Second {
					b.Fatalf("%s not on %s after 10s", name, n.Name())
				}
				time.Sleep(time.Millisecond)
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}

// idxText is what t/idx of n reads.
func idxText(n *Node) string {
	var sb strings.Builder
	for _, e := range n.ToolIndex() {
		sb.WriteString(e.Name + "\t" + e.Description + "\n")
	}
	return sb.String()
}
