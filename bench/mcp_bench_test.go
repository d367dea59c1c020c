//go:build linux

package bench

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPCall is one tools/call of the trivial tool through MCP, by
// the SDK's own client, beside the same call over 9P in the same run:
//   - 9p: walk+open call, write, read to EOF, clunk (as BenchmarkCall);
//   - mcp-stdio: `toolnode mcp` as a child process, as desktop clients
//     run it, speaking 9P to the node;
//   - mcp-http: the node's own -mcp endpoint (Streamable HTTP).
func BenchmarkMCPCall(b *testing.B) {
	mcpAddr := freePorts(b, 1)[0]
	l := startLoneWith(b, "-mcp", mcpAddr)
	b.Run("9p", func(b *testing.B) {
		for b.Loop() {
			if out, err := l.conn.ask(l.agent+"/call", "nop {}"); err != nil || out != "ok\n" {
				b.Fatalf("call: %q, %v", out, err)
			}
		}
	})
	run := func(b *testing.B, t mcp.Transport) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := c.Connect(ctx, t, nil)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx = context.Background()
		if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "tool_load", Arguments: map[string]any{"name": "nop"}}); err != nil || res.IsError {
			b.Fatalf("tool_load: %v %+v", err, res)
		}
		params := &mcp.CallToolParams{Name: "nop", Arguments: map[string]any{}}
		for b.Loop() {
			res, err := s.CallTool(ctx, params)
			if err != nil {
				b.Fatalf("tools/call: %v", err)
			}
			if res.IsError {
				b.Fatalf("tools/call: %s", res.Content[0].(*mcp.TextContent).Text)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || strings.TrimSpace(tc.Text) != "ok" {
				b.Fatalf("tools/call answered %+v", res.Content)
			}
		}
	}
	b.Run("mcp-stdio", func(b *testing.B) {
		run(b, &mcp.CommandTransport{Command: exec.Command(toolnodeBin(b), "mcp", "-a", l.addr)})
	})
	b.Run("mcp-http", func(b *testing.B) {
		run(b, &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/", HTTPClient: &http.Client{}, MaxRetries: -1})
	})
}
