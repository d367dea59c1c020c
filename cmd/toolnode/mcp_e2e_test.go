package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/internal/testport"
)

// listChanges records when each notifications/tools/list_changed arrived.
type listChanges struct {
	mu sync.Mutex
	at []time.Time
}

func (l *listChanges) add() {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
}

// since waits until a list_changed arrived after t0 and returns how long
// after t0 it came.
func (l *listChanges) since(t *testing.T, t0 time.Time, d time.Duration, what string) time.Duration {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l.mu.Lock()
		for _, at := range l.at {
			if at.After(t0) {
				l.mu.Unlock()
				return at.Sub(t0)
			}
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no tools/list_changed within %v of %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mcpClient connects the SDK's own client to `toolnode mcp` run as a
// child process over stdio, as a desktop client starts it.
func mcpClient(t *testing.T, addr string) (*mcp.ClientSession, *listChanges) {
	t.Helper()
	changes := &listChanges{}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changes.add() },
	})
	cmd := exec.Command(binPath, "mcp", "-a", addr)
	cmd.Env = append(os.Environ(), "TOOLNODE_TOKEN="+waitToken(t, addr))
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, changes
}

func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func callTool(t *testing.T, s *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestE2E_MCP_Stdio drives `toolnode mcp` with the SDK's own client
// against a two-node cluster: list, load, calls local and routed, a
// failing tool, JSON output, and list_changed for a load here and for a
// tool withdrawn on the other node.
func TestE2E_MCP_Stdio(t *testing.T) {
	a := newCnode(t, "mcpa")
	b := newCnode(t, "mcpb").joining(a)
	write := func(dir, name, meta string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".meta"), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a.e.tools, "echo_t", `{"description":"echo the arguments","prompt":"## echo_t\n\nPrints its arguments.","args":{"type":"object","properties":{"x":{"type":"integer"}}},"cmd":"cat"}`)
	write(a.e.tools, "fail_t", `{"description":"always fails","cmd":"echo oops >&2; exit 3"}`)
	write(a.e.tools, "json_t", `{"description":"prints JSON","outputFormat":"json","cmd":"echo '{\"a\":1}'"}`)
	write(a.e.tools, "seq_t", `{"description":"prints 1 to 5000","cmd":"seq 5000"}`)
	// only_b runs where E2E_ONLY_B is set: on b alone.
	write(b.e.tools, "only_b", `{"description":"runs on b","variants":[{"match":{"env":"E2E_ONLY_B"},"cmd":"echo ran on $TOOLNODE_NODE"}]}`)
	write(b.e.tools, "b_gone", `{"description":"withdrawn later","cmd":"true"}`)
	a.start(t)
	b.p = b.e.spawn(t, b.name, withClusterKey(append(b.e.childEnv(), "E2E_ONLY_B=1"), b.flags), b.flags...)
	b.waitServing(t, 60*time.Second)
	waitFormed(t, 60*time.Second, a, b)
	pollUntil(t, 30*time.Second, "every tool published, only_b runnable on mcpb", func() (bool, string) {
		gone, err1 := ask9(a.e.p9, "cluster/where", "b_gone", 5*time.Second)
		onlyB, err2 := ask9(a.e.p9, "cluster/where", "only_b", 5*time.Second)
		return err1 == nil && err2 == nil && strings.Contains(gone, "mcpb") && strings.TrimSpace(onlyB) == "mcpb", gone + onlyB
	})

	s, changes := mcpClient(t, a.e.p9)
	if got := strings.Join(toolNames(t, s), " "); got != "tool_load tool_unload tools_all" {
		t.Fatalf("tools/list before any load: %q", got)
	}

	// A load here: list_changed within 500 ms.
	t0 := time.Now()
	res := callTool(t, s, "tool_load", map[string]any{"name": "echo_t"})
	if res.IsError {
		t.Fatalf("tool_load: %s", resultText(res))
	}
	d := changes.since(t, t0, 5*time.Second, "tool_load")
	t.Logf("tool_load → list_changed in %v", d)
	if d > 500*time.Millisecond {
		t.Errorf("list_changed came %v after tool_load, want within 500ms", d)
	}
	list, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var echo *mcp.Tool
	for _, tl := range list.Tools {
		if tl.Name == "echo_t" {
			echo = tl
		}
	}
	if echo == nil {
		t.Fatalf("echo_t not listed after tool_load")
	}
	schema, _ := json.Marshal(echo.InputSchema)
	if !strings.Contains(string(schema), `"x"`) || !strings.Contains(echo.Description, "Prints its arguments") {
		t.Errorf("echo_t listed as %q with schema %s", echo.Description, schema)
	}

	// A local call.
	if res := callTool(t, s, "echo_t", map[string]any{"x": 7}); res.IsError || strings.TrimSpace(resultText(res)) != `{"x":7}` {
		t.Errorf("echo_t: error %v, %q", res.IsError, resultText(res))
	}
	// Bad arguments are the tool's error, not the protocol's.
	if res := callTool(t, s, "echo_t", map[string]any{"x": "seven"}); !res.IsError || !strings.Contains(resultText(res), "invalid") {
		t.Errorf("echo_t with a bad argument: error %v, %q", res.IsError, resultText(res))
	}
	// A failing tool: isError with its status and stderr.
	callTool(t, s, "tool_load", map[string]any{"name": "fail_t"})
	if res := callTool(t, s, "fail_t", nil); !res.IsError || !strings.Contains(resultText(res), "oops") || !strings.Contains(resultText(res), "3") {
		t.Errorf("fail_t: error %v, %q", res.IsError, resultText(res))
	}
	// JSON output is structured too.
	callTool(t, s, "tool_load", map[string]any{"name": "json_t"})
	res = callTool(t, s, "json_t", nil)
	if m, ok := res.StructuredContent.(map[string]any); res.IsError || !ok || m["a"] != float64(1) {
		t.Errorf("json_t: error %v, structured %#v, text %q", res.IsError, res.StructuredContent, resultText(res))
	}
	// An answer of several reads: the bridge ends an answer at a short
	// read, and one of 23,893 bytes takes reads that are not short.
	callTool(t, s, "tool_load", map[string]any{"name": "seq_t"})
	res = callTool(t, s, "seq_t", nil)
	if out := resultText(res); res.IsError || len(out) != 23893 || !strings.HasPrefix(out, "1\n2\n") || !strings.HasSuffix(out, "\n4999\n5000\n") {
		t.Errorf("seq_t: error %v, %d bytes, want 23893 (1 to 5000)", res.IsError, len(out))
	}
	// A routed call: only b can run only_b.
	callTool(t, s, "tool_load", map[string]any{"name": "only_b"})
	if res := callTool(t, s, "only_b", nil); res.IsError || strings.TrimSpace(resultText(res)) != "ran on mcpb" {
		t.Errorf("only_b: error %v, %q", res.IsError, resultText(res))
	}
	// A tool withdrawn on the other node.
	tLoad := time.Now()
	callTool(t, s, "tool_load", map[string]any{"name": "b_gone"})
	changes.since(t, tLoad, 5*time.Second, "the load of b_gone") // the load's own list_changed first
	t0 = time.Now()
	if err := os.Remove(filepath.Join(b.e.tools, "b_gone.meta")); err != nil {
		t.Fatal(err)
	}
	d = changes.since(t, t0, 5*time.Second, "the withdrawal on mcpb")
	t.Logf("withdrawn on mcpb → list_changed on mcpa's MCP session in %v", d)
	pollUntil(t, 5*time.Second, "b_gone gone from tools/list", func() (bool, string) {
		names := strings.Join(toolNames(t, s), " ")
		return !strings.Contains(names, "b_gone"), names
	})
	// An unknown tool is an error result.
	if res := callTool(t, s, "tool_load", map[string]any{"name": "no_such_tool"}); !res.IsError {
		t.Errorf("tool_load of an unknown tool succeeded: %q", resultText(res))
	}
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func mcpHTTPClient(t *testing.T, url, token string) (*mcp.ClientSession, *listChanges, error) {
	t.Helper()
	changes := &listChanges{}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changes.add() },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearerTransport{token}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, changes, nil
}

// TestE2E_MCP_HTTP drives -mcp (Streamable HTTP) with the SDK's client:
// one agent per MCP session, list_changed on the session's stream, and a
// session that another token cannot use.
func TestE2E_MCP_HTTP(t *testing.T) {
	a := newCnode(t, "mcph")
	if err := os.WriteFile(filepath.Join(a.e.tools, "echo_t.meta"), []byte(`{"description":"echo","cmd":"cat"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testport.One(t)
	a.flags = append(a.flags, "-mcp", addr)
	a.start(t)
	a.p.waitLog(t, 10*time.Second, "serving MCP")
	url := "http://" + addr + "/"

	// No token: refused (-9p-anon none, on the MCP listener too).
	if _, _, err := mcpHTTPClient(t, url, ""); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("an MCP session without a token: %v, want Unauthorized", err)
	}
	admin := waitToken(t, a.e.p9)
	s1, changes, err := mcpHTTPClient(t, url, admin)
	if err != nil {
		t.Fatal(err)
	}
	s2, _, err := mcpHTTPClient(t, url, admin)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if res := callTool(t, s1, "tool_load", map[string]any{"name": "echo_t"}); res.IsError {
		t.Fatalf("tool_load: %s", resultText(res))
	}
	d := changes.since(t, t0, 5*time.Second, "tool_load over HTTP")
	t.Logf("tool_load → list_changed over HTTP in %v", d)
	if d > 500*time.Millisecond {
		t.Errorf("list_changed came %v after tool_load, want within 500ms", d)
	}
	if res := callTool(t, s1, "echo_t", map[string]any{"y": true}); res.IsError || strings.TrimSpace(resultText(res)) != `{"y":true}` {
		t.Errorf("echo_t over HTTP: error %v, %q", res.IsError, resultText(res))
	}
	// Calls at once on one session: the bridge keeps its call fids open
	// across calls, and every answer must still reach its own call.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s1.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo_t", Arguments: map[string]any{"i": i}})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if want := fmt.Sprintf(`{"i":%d}`, i); res.IsError || strings.TrimSpace(resultText(res)) != want {
				t.Errorf("call %d answered error %v, %q, want %s", i, res.IsError, resultText(res), want)
			}
		}()
	}
	wg.Wait()
	// The other session is another agent: echo_t is not loaded there.
	if names := strings.Join(toolNames(t, s2), " "); strings.Contains(names, "echo_t") {
		t.Errorf("a second MCP session sees the first one's loads: %s", names)
	}
	// Each MCP session is a toolnode session of its own.
	sessions := mustRead9(t, a, "session/idx")
	if n := len(lines(sessions)); n != 2 {
		t.Errorf("session/idx with two MCP sessions:\n%s", sessions)
	}

	// A request for s1's session with another token is refused.
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"tools/list"}`))
	req.Header.Set("Mcp-Session-Id", s1.ID())
	req.Header.Set("Authorization", "Bearer someone-else")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another token on session %s: HTTP %d, want 403", s1.ID(), resp.StatusCode)
	}

	// An unknown token makes no session: 401, with the attach's refusal.
	if _, _, err := mcpHTTPClient(t, url, "tn_not-a-token"); err == nil {
		t.Errorf("an MCP session was made with an unknown token")
	} else {
		t.Logf("unknown token refused: %v", err)
	}
	// The control: the node's own admin token makes one.
	s3, _, err := mcpHTTPClient(t, url, admin)
	if err != nil {
		t.Fatalf("the admin token was refused: %v", err)
	}
	s3.Close()

	// A revoked token ends its MCP session's calls, though the bridge
	// keeps its call fids open: the node ends the 9P connection of a
	// revoked token, fids and all. The control: the same session calls
	// before the revocation.
	secret := strings.TrimSpace(tokenCLI(t, a, "new", "-role", "call", "mcpcall"))
	s4, _, err := mcpHTTPClient(t, url, secret)
	if err != nil {
		t.Fatalf("a call token was refused: %v", err)
	}
	if res := callTool(t, s4, "tool_load", map[string]any{"name": "echo_t"}); res.IsError {
		t.Fatalf("tool_load with a call token: %s", resultText(res))
	}
	if res := callTool(t, s4, "echo_t", map[string]any{"z": 1}); res.IsError || strings.TrimSpace(resultText(res)) != `{"z":1}` {
		t.Fatalf("echo_t with a call token, before its revocation: error %v, %q", res.IsError, resultText(res))
	}
	tokenCLI(t, a, "revoke", "mcpcall")
	pollUntil(t, 5*time.Second, "the revoked token's MCP calls to fail", func() (bool, string) {
		res, err := s4.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo_t", Arguments: map[string]any{"z": 2}})
		if err != nil {
			return true, err.Error()
		}
		return res.IsError, resultText(res)
	})
	a.p.waitLog(t, 5*time.Second, "the node ended its 9P connection: ending the MCP session")

	// Closing an MCP session removes its toolnode session.
	s2.Close()
	pollUntil(t, 10*time.Second, "the closed MCP session's toolnode session removed", func() (bool, string) {
		idx := mustRead9(t, a, "session/idx")
		return len(lines(idx)) == 1, idx
	})
}

// stdioBridge is `toolnode mcp` run with a token, its exit watched.
type stdioBridge struct {
	s       *mcp.ClientSession
	stderr  *syncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error
}

func startStdioBridge(t *testing.T, n *cnode, token string) *stdioBridge {
	t.Helper()
	br := &stdioBridge{stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd := exec.Command(binPath, "mcp", "-a", n.e.p9)
	cmd.Env = append(n.e.childEnv(), "TOOLNODE_TOKEN="+token)
	cmd.Stderr = br.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		br.waitErr = cmd.Wait()
		close(br.done)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-br.done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-br.done
		}
	})
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	br.s, err = c.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	if err != nil {
		t.Fatalf("connecting to toolnode mcp: %v\n%s", err, br.stderr)
	}
	return br
}

func (br *stdioBridge) exited() bool {
	select {
	case <-br.done:
		return true
	default:
		return false
	}
}

// TestE2E_MCP_StdioRevoked: `toolnode mcp` whose token is revoked ends
// with the reason on stderr and a non-zero status, instead of serving an
// MCP session on which every call fails. The control: a bridge with
// another token, started alike, calls on after the revocation and keeps
// running.
func TestE2E_MCP_StdioRevoked(t *testing.T) {
	a := newCnode(t, "mcpr")
	if err := os.WriteFile(filepath.Join(a.e.tools, "echo_t.meta"), []byte(`{"description":"echo","cmd":"cat"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	a.start(t)
	revoked := startStdioBridge(t, a, strings.TrimSpace(tokenCLI(t, a, "new", "-role", "call", "mcprev")))
	kept := startStdioBridge(t, a, strings.TrimSpace(tokenCLI(t, a, "new", "-role", "call", "mcpkeep")))
	for name, br := range map[string]*stdioBridge{"mcprev": revoked, "mcpkeep": kept} {
		if res := callTool(t, br.s, "tool_load", map[string]any{"name": "echo_t"}); res.IsError {
			t.Fatalf("%s: tool_load: %s", name, resultText(res))
		}
		if res := callTool(t, br.s, "echo_t", map[string]any{"n": 1}); res.IsError || strings.TrimSpace(resultText(res)) != `{"n":1}` {
			t.Fatalf("%s: echo_t before the revocation: error %v, %q", name, res.IsError, resultText(res))
		}
	}
	tokenCLI(t, a, "revoke", "mcprev")
	pollUntil(t, 10*time.Second, "toolnode mcp with the revoked token to exit", func() (bool, string) {
		return revoked.exited(), revoked.stderr.String()
	})
	if revoked.waitErr == nil {
		t.Errorf("toolnode mcp with a revoked token exited 0; stderr:\n%s", revoked.stderr)
	}
	if msg := revoked.stderr.String(); !strings.Contains(msg, "ended the 9P connection") || !strings.Contains(msg, "revoked") {
		t.Errorf("toolnode mcp with a revoked token said:\n%s\nwant the connection's end and the attach's refusal (revoked)", msg)
	}
	t.Logf("revoked: %v; stderr: %s", revoked.waitErr, revoked.stderr)
	// The control.
	if res := callTool(t, kept.s, "echo_t", map[string]any{"n": 2}); res.IsError || strings.TrimSpace(resultText(res)) != `{"n":2}` {
		t.Errorf("the other token's bridge after the revocation: error %v, %q", res.IsError, resultText(res))
	}
	if kept.exited() {
		t.Errorf("the other token's bridge exited: %v\n%s", kept.waitErr, kept.stderr)
	}
}
