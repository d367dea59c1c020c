//go:build linux

package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/internal/testcluster"
)

// BenchmarkUpstreamCall is one call of an upstream MCP server's tool
// (internal/mcpecho's echo): made directly by a go-sdk client on the
// server's standard input and output (the baseline), and through
// toolnode as up__echo over 9P, on the node that runs the server
// (local) and on one that routes it there (routed). Two nodes; the
// definition matches n1 only.
//
//	go test ./bench -run '^$' -bench BenchmarkUpstreamCall -benchtime 2000x -count 3
func BenchmarkUpstreamCall(b *testing.B) {
	echo := filepath.Join(b.TempDir(), "mcpecho")
	if out, err := exec.Command("go", "build", "-o", echo, "../internal/mcpecho").CombinedOutput(); err != nil {
		b.Fatalf("go build mcpecho: %v\n%s", err, out)
	}
	const args = `{"x":1}`

	c := newTCluster(b)
	n1 := c.add("n1", nil)
	c.env = []string{"UPHOST=1"}
	c.start(n1)
	c.ready(n1)
	c.env = nil
	n2 := c.add("n2", []string{n1.gossip})
	c.start(n2)
	c.ready(n2)
	c.waitVoters(n1, 2, 60*time.Second)

	fsys := testcluster.Attach(b, n1.p9, "bench", "")
	fid, err := fsys.Create("m/up.json", plan9.OWRITE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := fid.Write([]byte(fmt.Sprintf(`{"command": %q, "match": {"env": "UPHOST"}}`, echo))); err != nil {
		b.Fatal(err)
	}
	if err := fid.Close(); err != nil {
		b.Fatal(err)
	}
	agents := map[string]string{}
	for _, n := range []*tnode{n1, n2} {
		cn, err := dial9(n.p9)
		if err != nil {
			b.Fatal(err)
		}
		defer cn.close()
		testcluster.Eventually(b, 30*time.Second, func() bool {
			w, err := cn.ask("cluster/where", "up__echo")
			return err == nil && strings.TrimSpace(w) == "n1"
		}, "cluster/where up__echo on %s names n1", n.name)
		sess := "up" + n.name
		if _, err := cn.ask("session/new", "name="+sess); err != nil {
			b.Fatal(err)
		}
		if _, err := cn.ask("session/"+sess+"/agent/new", "name=w"); err != nil {
			b.Fatal(err)
		}
		if _, err := cn.ask("session/"+sess+"/agent/w/tools", "up__echo"); err != nil {
			b.Fatal(err)
		}
		agents[n.name] = "session/" + sess + "/agent/w/call"
		if out, err := cn.ask(agents[n.name], "up__echo "+args); err != nil || out != args {
			b.Fatalf("up__echo on %s = %q, %v", n.name, out, err)
		}
	}

	b.Run("direct", func(b *testing.B) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(echo)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		ctx := context.Background()
		b.ResetTimer()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, leg := range []struct{ name, node string }{{"local", "n1"}, {"routed", "n2"}} {
		b.Run(leg.name, func(b *testing.B) {
			n := c.node(leg.node)
			cn, err := dial9(n.p9)
			if err != nil {
				b.Fatal(err)
			}
			defer cn.close()
			b.ResetTimer()
			for b.Loop() {
				if _, err := cn.ask(agents[leg.node], "up__echo "+args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
