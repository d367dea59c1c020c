package mcpserve_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/mcpserve"
	"github.com/toolnode/toolnode/node"
	"github.com/toolnode/toolnode/p9"
)

// nodeHost is a real node as mcpserve.Host, through its public API: 9P
// over TCP to the node's 9P port, so the node ends a bridge's connection
// as it ends any other; the tokens are those the test made.
type nodeHost struct {
	n *node.Node

	mu     sync.Mutex
	tokens map[string]string // secret → name
}

func (h *nodeHost) Serve9P(c net.Conn) {
	defer c.Close()
	d, err := net.Dial("tcp", h.n.P9Addr())
	if err != nil {
		return
	}
	defer d.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(d, c); done <- struct{}{} }()
	go func() { io.Copy(c, d); done <- struct{}{} }()
	<-done
}

func (h *nodeHost) Token(secret string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	name, ok := h.tokens[secret]
	return name, ok
}

func (h *nodeHost) KillSession(session string) error { return h.n.KillSession(session) }

func (h *nodeHost) Record(time.Time, string, string, string, error) {}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	// A node stopping after its test ended may still log; testing panics
	// on that, and the line is of no use then.
	defer func() { recover() }()
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startNode starts a lone node on loopback with its own data directory.
func startNode(t *testing.T) *node.Node {
	t.Helper()
	root := t.TempDir()
	cfg := node.Config{
		EncryptKey: []byte("toolnode-mcpserve-tests-gossip-k"),
		Name:       "n1", DataDir: filepath.Join(root, "data"),
		ToolsDir: filepath.Join(root, "tools"), AgentsDir: filepath.Join(root, "agents"),
		GossipAddr:      "127.0.0.1:0",
		P9Listener:      listen(t),
		ClusterListener: listen(t),
		Debounce:        20 * time.Millisecond,
		LogOutput:       testWriter{t},
	}
	for _, d := range []string{cfg.ToolsDir, cfg.AgentsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

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

// initialize starts an MCP session over HTTP with token and returns its
// id.
func initialize(t *testing.T, url, token string) string {
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
// running: the wait for each session's initialisation (up to InitWait)
// ends with its session; the node removes its toolnode session (the
// bridge cannot: its connection is gone); and the bridge's watchers end,
// as does another read on its 9P connection, all in flight when the node
// ended the connection (the 9P client leaves all but one such read
// waiting forever unless mcpbridge.Conn answers them).
func TestMCP_RevokedSessionsLeaveNothing(t *testing.T) {
	n := startNode(t)
	admin := p9.Principal{Name: "admin", Role: p9.RoleAdmin}
	secret, err := n.NewToken(admin, "mcpt", p9.RoleCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &nodeHost{n: n, tokens: map[string]string{secret: "mcpt"}}
	m, err := mcpserve.Listen(mcpserve.Config{Addr: "127.0.0.1:0", Logf: t.Logf}, h)
	if err != nil {
		t.Fatal(err)
	}
	go m.Serve()
	t.Cleanup(m.Close)
	url := "http://" + m.Addr().String() + "/"
	for range 3 {
		initialize(t, url, secret)
	}
	sessions := m.Live()
	var ended []<-chan struct{}
	var toolnodeSessions []string
	for _, s := range sessions {
		toolnodeSessions = append(toolnodeSessions, s.Bridge.Session())
		c := make(chan struct{})
		go func() { s.Bridge.Wait(); close(c) }()
		fsys, err := s.Conn.Attach(nil, "mcp", secret)
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, c, readUntilError(t, fsys))
	}
	if len(sessions) != 3 || m.Waiting() != 3 {
		t.Fatalf("%d sessions, %d initialisations watched; want 3 and 3", len(sessions), m.Waiting())
	}
	if err := n.RevokeToken(admin, "mcpt"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revoked token's MCP sessions to end", 10*time.Second, func() bool {
		return len(m.Live()) == 0 && m.Waiting() == 0
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
