//go:build linux

package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/internal/testport"
)

// BenchmarkMCPIdle measures what idle MCP sessions cost a node: two lone
// nodes with -mcp in the same run, one serving 20 Streamable HTTP
// sessions that each loaded 4 tools and then do nothing, the other none;
// each window of 5 s samples both processes' CPU time (utime+stime) at
// once, and reports each in percent of one core and their difference.
// b.N is the number of windows. With $TOOLNODE_BENCH_MCP_IDLE_BEFORE
// naming another toolnode binary, a third node of that binary serves 20
// sessions the same way, in the same windows ("%core-before").
func BenchmarkMCPIdle(b *testing.B) {
	const window = 5 * time.Second
	nodes := []*lone{idleSessions(b, toolnodeBin(b)), startLoneWith(b, "-mcp", testport.One(b))}
	if bin := os.Getenv("TOOLNODE_BENCH_MCP_IDLE_BEFORE"); bin != "" {
		nodes = append(nodes, idleSessions(b, bin))
	}
	time.Sleep(time.Second) // the loads' list_changed and refreshes settle
	pid := func(l *lone) int { return l.p.cmd.Process.Pid }
	pcts := make([][]float64, len(nodes))
	for b.Loop() {
		t0 := make([]uint64, len(nodes))
		for i, l := range nodes {
			t0[i] = procTicks(b, pid(l))
		}
		time.Sleep(window)
		for i, l := range nodes {
			pcts[i] = append(pcts[i], 100*float64(procTicks(b, pid(l))-t0[i])/clockTicks/window.Seconds())
		}
	}
	w, n := mean(pcts[0]), mean(pcts[1])
	b.ReportMetric(w, "%core-20-sessions")
	b.ReportMetric(n, "%core-no-session")
	b.ReportMetric(w-n, "%core-added")
	b.Logf("20 idle sessions: %s%% of a core; none: %s%%", fmtPcts(pcts[0]), fmtPcts(pcts[1]))
	if len(nodes) > 2 {
		b.ReportMetric(mean(pcts[2]), "%core-before")
		b.Logf("20 idle sessions, the other binary: %s%%", fmtPcts(pcts[2]))
	}
}

// idleSessions starts a lone node of binary bin with -mcp and 20 MCP
// sessions on it that each loaded 4 tools.
func idleSessions(b *testing.B, bin string) *lone {
	const sessions = 20
	busyAddr := testport.One(b)
	busy := startLoneBin(b, bin, "-mcp", busyAddr)
	for _, name := range []string{"t1", "t2", "t3"} {
		fid, err := busy.conn.fsys.Create("t/"+name+".meta", plan9.OWRITE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		fid.Write([]byte(`{"description":"does nothing","cmd":"true"}`))
		if err := fid.Close(); err != nil {
			b.Fatal(err)
		}
	}
	// A principal has at most 16 sessions: two tokens share the 20.
	var secrets []string
	for _, name := range []string{"idle1", "idle2"} {
		secret, err := busy.conn.ask("token/new", "name="+name+" role=call")
		if err != nil {
			b.Fatal(err)
		}
		secrets = append(secrets, strings.TrimSpace(secret))
	}
	for i := range sessions {
		hc := &http.Client{Transport: bearerRT(secrets[i%2])}
		s := mcpSession(b, &mcp.StreamableClientTransport{Endpoint: "http://" + busyAddr + "/", HTTPClient: hc, MaxRetries: -1})
		for _, tool := range []string{"nop", "t1", "t2", "t3"} {
			if res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_load", Arguments: map[string]any{"name": tool}}); err != nil || res.IsError {
				b.Fatalf("session %d: tool_load %s: %v %+v", i, tool, err, res)
			}
		}
		if res, err := s.ListTools(context.Background(), nil); err != nil || len(res.Tools) != 7 {
			b.Fatalf("session %d: tools/list: %v %v", i, err, res)
		}
	}
	return busy
}

// bearerRT adds a bearer token to every request.
type bearerRT string

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(t))
	return http.DefaultTransport.RoundTrip(r)
}

func fmtPcts(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.2f", x)
	}
	return out
}
