package node

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/p9"
)

// readUntilError reads an events file of fsys until a read fails, in a
// goroutine, and closes the channel it returns then.
func readUntilError(t *testing.T, fsys *client.Fsys) <-chan struct{} {
	t.Helper()
	fid, err := fsys.Open("events", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	c := make(chan struct{})
	go func() {
		defer close(c)
		buf := make([]byte, 8192)
		for {
			if _, err := fid.Read(buf); err != nil {
				return
			}
		}
	}()
	return c
}

// mcpInitialize starts an MCP session over HTTP with token and returns its
// id.
func mcpInitialize(t *testing.T, url, token string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, id)
	}
	return id
}

// A revoked token's MCP sessions end, and nothing of them is left
// running: the wait for each session's initialisation (up to
// mcpInitWait) ends with its session; the node removes its toolnode
// session (the bridge cannot: its connection is gone); and the bridge's
// watchers end, as does another read on its 9P connection, all in flight
// when the node ended the connection (the 9P client leaves all but one
// such read waiting forever unless mcpbridge.Conn answers them).
func TestMCP_RevokedSessionsLeaveNothing(t *testing.T) {
	n, _ := procNode(t, func(c *Config) { c.MCPAddr = "127.0.0.1:0" }, nil)
	admin := p9.Principal{Name: "admin", Role: p9.RoleAdmin}
	secret, err := n.NewToken(admin, "mcpt", p9.RoleCall)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + n.MCPAddr() + "/"
	for range 3 {
		mcpInitialize(t, url, secret)
	}
	m := n.mcp
	m.mu.Lock()
	made := len(m.sessions)
	sessions := slices.Collect(maps.Values(m.sessions))
	m.mu.Unlock()
	var ended []<-chan struct{}
	var toolnodeSessions []string
	for _, s := range sessions {
		toolnodeSessions = append(toolnodeSessions, s.bridge.Session())
		c := make(chan struct{})
		go func() { s.bridge.Wait(); close(c) }()
		fsys, err := s.conn.Attach(nil, "mcp", secret)
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, c, readUntilError(t, fsys))
	}
	if made != 3 || m.waiting.Load() != 3 {
		t.Fatalf("%d sessions, %d initialisations watched; want 3 and 3", made, m.waiting.Load())
	}
	if err := n.RevokeToken(admin, "mcpt"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revoked token's MCP sessions to end", 10*time.Second, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.sessions) == 0 && m.waiting.Load() == 0
	})
	waitFor(t, "the revoked sessions' toolnode sessions removed", 10*time.Second, func() bool {
		names, err := n.Sessions()
		return err == nil && !slices.ContainsFunc(toolnodeSessions, func(s string) bool { return slices.Contains(names, s) })
	})
	waitFor(t, "the revoked sessions' bridges to stop watching, and the other reads to fail", 10*time.Second, func() bool {
		for _, c := range ended {
			select {
			case <-c:
			default:
				return false
			}
		}
		return true
	})
}
