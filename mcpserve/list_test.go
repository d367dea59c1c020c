package mcpserve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/mcpserve"
	"github.com/toolnode/toolnode/node"
	"github.com/toolnode/toolnode/p9"
)

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpNode is a node with tools, a profile autoloading them, and -mcp
// with a page of pageSize tools.
func mcpNode(t *testing.T, pageSize int, metas map[string]string) (n *node.Node, url, secret string) {
	t.Helper()
	n = startNode(t)
	var names []string
	for name, meta := range metas {
		if err := n.PublishToolMeta(name, []byte(meta)); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	prof, _ := json.Marshal(map[string]any{"autoLoad": names})
	if err := n.PublishProfile("p", prof); err != nil {
		t.Fatal(err)
	}
	secret, err := n.NewToken(p9.Principal{Name: "admin", Role: p9.RoleAdmin}, "mcpl", p9.RoleCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &nodeHost{n: n, tokens: map[string]string{secret: "mcpl"}}
	m, err := mcpserve.Listen(mcpserve.Config{Addr: "127.0.0.1:0", Logf: t.Logf, PageSize: pageSize, Lines: n.CallLines()}, h)
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve()
	t.Cleanup(m.Close)
	return n, "http://" + m.Addr().String() + "/", secret
}

func connect(t *testing.T, url, secret string, opt *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opt)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer{secret}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tools/list comes in pages whose cursors work; a bad cursor is
// -32602; scope read is readOnlyHint and not destructive; an
// outputSchema the tool declares is shown.
func TestMCP_ToolsListPagesAndAnnotations(t *testing.T) {
	_, url, secret := mcpNode(t, 3, map[string]string{
		"rd": `{"description":"reads","cmd":"echo rd","scope":"read"}`,
		"wr": `{"description":"writes","cmd":"echo wr","scope":"write"}`,
		"js": `{"description":"json","cmd":"echo {}","outputFormat":"json","outputSchema":{"type":"object","properties":{"n":{"type":"number"}}}}`,
		"t4": `{"description":"four","cmd":"echo 4"}`,
		"t5": `{"description":"five","cmd":"echo 5"}`,
	})
	s := connect(t, url+"?profile=p", secret, nil)
	ctx := context.Background()
	var all []*mcp.Tool
	cursor, pages := "", 0
	for {
		res, err := s.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.Tools) > 3 {
			t.Errorf("a page of %d tools, want at most 3", len(res.Tools))
		}
		all = append(all, res.Tools...)
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	var names []string
	byName := map[string]*mcp.Tool{}
	for _, tool := range all {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	slices.Sort(names)
	want := []string{"js", "rd", "t4", "t5", "tool_load", "tool_unload", "tools_all", "wr"}
	if !slices.Equal(names, want) || pages != 3 {
		t.Fatalf("%d pages listed %q, want 3 pages of %q", pages, names, want)
	}
	if a := byName["rd"].Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Errorf("rd's annotations: %+v", a)
	}
	if a := byName["wr"].Annotations; a != nil && a.ReadOnlyHint {
		t.Errorf("wr's annotations: %+v", a)
	}
	out, _ := json.Marshal(byName["js"].OutputSchema)
	if !strings.Contains(string(out), `"n":{"type":"number"}`) {
		t.Errorf("js's outputSchema: %s", out)
	}
	if byName["t4"].OutputSchema != nil {
		t.Errorf("t4 has an outputSchema: %v", byName["t4"].OutputSchema)
	}
	_, err := s.ListTools(ctx, &mcp.ListToolsParams{Cursor: "not-a-cursor"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("a bad cursor: %v, want -32602", err)
	}
}

// An unknown ?profile= is 404 with a message, not 401 (which would start
// an OAuth flow); the control: a known profile starts a session.
func TestMCP_UnknownProfile404(t *testing.T) {
	_, url, secret := mcpNode(t, 0, map[string]string{"t1": `{"description":"one","cmd":"echo 1"}`})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	post := func(profile string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", url+"?profile="+profile, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, text := post("nope")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("WWW-Authenticate") != "" || !strings.Contains(text, `"nope"`) {
		t.Errorf("?profile=nope: HTTP %d, WWW-Authenticate %q, %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), text)
	}
	if resp, text := post("p"); resp.StatusCode != http.StatusOK {
		t.Errorf("control ?profile=p: HTTP %d %q", resp.StatusCode, text)
	}
}

// A token limited by tools sees in tools/list only what it allows, its
// profile's autoLoad notwithstanding, and cannot load the rest; the
// control is TestMCP_ToolsListPagesAndAnnotations's unlimited token.
func TestMCP_LimitedTokenList(t *testing.T) {
	n := startNode(t)
	for _, name := range []string{"rd", "wr"} {
		if err := n.PublishToolMeta(name, []byte(`{"description":"x","cmd":"echo x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.PublishProfile("p", []byte(`{"autoLoad":["rd","wr"]}`)); err != nil {
		t.Fatal(err)
	}
	secret, err := n.NewToken(p9.Principal{Name: "admin", Role: p9.RoleAdmin}, "lim", p9.RoleCall, []string{"rd"})
	if err != nil {
		t.Fatal(err)
	}
	h := &nodeHost{n: n, tokens: map[string]string{secret: "lim"}}
	m, err := mcpserve.Listen(mcpserve.Config{Addr: "127.0.0.1:0", Logf: t.Logf}, h)
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve()
	t.Cleanup(m.Close)
	s := connect(t, "http://"+m.Addr().String()+"/?profile=p", secret, nil)
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"rd", "tool_load", "tool_unload", "tools_all"}; !slices.Equal(names, want) {
		t.Errorf("tools/list %q, want %q", names, want)
	}
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool_load", Arguments: map[string]any{"name": "wr"}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "permission denied: tool wr is not allowed here") {
		t.Errorf("tool_load wr: %v %+v", err, r)
	}
}
