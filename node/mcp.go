package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"9fans.net/go/plan9/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/mcpbridge"
)

// MCP over Streamable HTTP (-mcp ADDR): one agent per MCP session, made
// from the profile the endpoint's ?profile=P names, if any. Each
// session's bridge attaches to this node's own 9P server through a pipe,
// presenting the request's bearer token as the attach name, so MCP gets
// exactly the tokens and roles of 9P; the session stays bound to the
// token that made it.

// mcpIdle is how long an MCP session may stay idle before it expires and
// its toolnode session is removed.
const mcpIdle = 15 * time.Minute

// mcpInitWait is how long a new MCP session may take to finish its
// initialisation before its bridge is dropped.
const mcpInitWait = 2 * time.Minute

type mcpServer struct {
	n    *Node
	ln   net.Listener
	http *http.Server
	sdk  *mcp.StreamableHTTPHandler

	// loopback: the listener is on loopback (Host and Origin must name
	// loopback); else hosts are the names it answers for (mcpcheck.go).
	loopback bool
	hosts    map[string]bool

	mu       sync.Mutex
	sessions map[string]*mcpSession // Mcp-Session-Id →

	waiting atomic.Int64 // sessions whose initialisation is watched (newSession)
}

type mcpSession struct {
	token  [32]byte // SHA-256 of the bearer token that made it
	who    string   // what it counts against (principalKey)
	bridge *mcpbridge.Bridge
	conn   *client.Conn
	ended  chan struct{} // closed when the session ends, however it ends
	once   sync.Once
}

type bridgeKey struct{}

func (n *Node) startMCP() error {
	if n.cfg.MCPAddr == "" {
		return nil
	}
	// Off loopback, as for 9P: HTTPS with the 9P certificate, or not at
	// all (a bearer token must not cross a network in the clear).
	var tlsConf *tls.Config
	if !loopbackAddr(n.cfg.MCPAddr) {
		if n.cfg.P9TLSCert == "" || n.cfg.P9TLSKey == "" {
			return fmt.Errorf("-mcp %s leaves loopback: give -9p-tls-cert and -9p-tls-key (MCP is then served over HTTPS with them), or reach it through an ssh tunnel", n.cfg.MCPAddr)
		}
		var err error
		if tlsConf, err = loadP9TLS(n.cfg.P9TLSCert, n.cfg.P9TLSKey); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", n.cfg.MCPAddr)
	if err != nil {
		return fmt.Errorf("-mcp: %w", err)
	}
	scheme := "http"
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
		scheme = "https"
	}
	m := &mcpServer{n: n, ln: ln, sessions: map[string]*mcpSession{}}
	m.loopback, m.hosts = mcpHosts(n.cfg.MCPAddr, tlsConf)
	m.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(bridgeKey{}).(*mcpSession)
		if s == nil {
			return nil
		}
		return s.bridge.Server()
	}, &mcp.StreamableHTTPOptions{SessionTimeout: mcpIdle, JSONResponse: true})
	m.http = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	n.mcp = m
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := m.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.Printf("mcp: %v", err)
		}
	}()
	n.logger.Printf("serving MCP (Streamable HTTP) on %s://%s/", scheme, ln.Addr())
	return nil
}

// MCPAddr is the address MCP over HTTP listens on, "" when off.
func (n *Node) MCPAddr() string {
	if n.mcp == nil {
		return ""
	}
	return n.mcp.ln.Addr().String()
}

func (m *mcpServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.http.Shutdown(ctx)
	m.mu.Lock()
	sessions := m.sessions
	m.sessions = map[string]*mcpSession{}
	m.mu.Unlock()
	for _, s := range sessions {
		s.end(false)
	}
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

func (m *mcpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := bearer(r)
	sum := sha256.Sum256([]byte(token))
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		m.mu.Lock()
		s := m.sessions[id]
		m.mu.Unlock()
		if s != nil && subtle.ConstantTimeCompare(s.token[:], sum[:]) != 1 {
			m.n.logger.Printf("mcp: %s: a request for session %s with another token: refused", r.RemoteAddr, id)
			http.Error(w, "permission denied: this MCP session belongs to another token", http.StatusForbidden)
			return
		}
		m.sdk.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		m.sdk.ServeHTTP(w, r)
		return
	}
	key := principalKey(r, token, sum)
	no := m.checkNew(r, token)
	if no == nil {
		no = m.admit(key)
	}
	if no != nil {
		who := "anon@" + strings.TrimPrefix(key, "anon@")
		if token != "" {
			who = "token"
			if t, ok := m.n.fsm.TokenByHash(acl.Hash(token)); ok {
				who = t.Name
			}
		}
		m.n.logger.Printf("mcp: %s (%s): refused: %v", r.RemoteAddr, who, no.err)
		m.n.record(time.Now(), who, "mcp-session", r.RemoteAddr, no.err)
		if no.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolnode"`)
		}
		http.Error(w, no.err.Error(), no.status)
		return
	}
	s, id, err := m.newSession(r, token, sum)
	if err != nil {
		m.n.logger.Printf("mcp: %s: %v", r.RemoteAddr, err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolnode"`)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	m.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bridgeKey{}, s)))
	// A request that did not start a session (not an initialize, or a
	// refused one) leaves nothing behind.
	if w.Header().Get("Mcp-Session-Id") != id {
		m.drop(id)
	}
}

// remoteConn is the node's end of a bridge's pipe; it reports the HTTP
// client's address, so an attach without a token is anon@ADDR.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

func (m *mcpServer) newSession(r *http.Request, token string, sum [32]byte) (*mcpSession, string, error) {
	var remote net.Addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	if ap, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		remote = ap
	}
	var idb [16]byte
	rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	here, there := net.Pipe()
	go func() {
		m.n.p9.ServeConn(remoteConn{there, remote})
		m.connEnded(id)
	}()
	// Watched to learn the msize: the bridge then ends an answer at a
	// short read, without the read of 0 bytes after it.
	wc := mcpbridge.WatchConn(here)
	conn, err := client.NewConn(wc)
	if err != nil {
		here.Close()
		return nil, "", fmt.Errorf("9P: %w", err)
	}
	fsys, err := conn.Attach(nil, "mcp", token)
	if err != nil {
		conn.Close()
		return nil, "", err
	}
	s := &mcpSession{token: sum, who: principalKey(r, token, sum), conn: conn, ended: make(chan struct{})}
	b, err := mcpbridge.New(fsys, mcpbridge.Options{
		Profile:   r.URL.Query().Get("profile"),
		SessionID: id,
		Logf:      m.n.logger.Printf,
		Ended:     func() { m.drop(id) },
		Msize:     wc.Msize(),
	})
	if err != nil {
		conn.Close()
		return nil, "", err
	}
	s.bridge = b
	m.mu.Lock()
	m.sessions[id] = s
	m.mu.Unlock()
	m.waiting.Add(1)
	go func() {
		defer m.waiting.Add(-1)
		// The SDK expires idle sessions; one that never finishes its
		// initialisation is dropped here. A session that ends first,
		// however it ends, ends this wait.
		t := time.NewTimer(mcpInitWait)
		defer t.Stop()
		select {
		case <-t.C:
			if !b.Initialized() {
				m.drop(id)
			}
		case <-s.ended:
		case <-m.n.ctx.Done():
		}
	}()
	return s, id, nil
}

// end ends the session; connGone: the node has ended its 9P connection,
// so nothing is removed over it (the bridge is abandoned, not closed).
func (s *mcpSession) end(connGone bool) {
	s.once.Do(func() { close(s.ended) })
	if connGone {
		s.bridge.Abandon()
	} else {
		s.bridge.Close()
	}
	s.conn.Close()
}

// connEnded ends MCP session id when the node ended its 9P connection
// (its token was revoked, DropPrincipal) rather than the session's own
// end: the bridge cannot remove its toolnode session over a connection
// that is gone, so the node removes it, and the MCP session ends, so the
// client learns at once (404 for the session) instead of meeting errors
// call after call.
func (m *mcpServer) connEnded(id string) {
	m.mu.Lock()
	s := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if s == nil {
		return // dropped, or never made
	}
	m.n.logger.Printf("mcp: session %s: the node ended its 9P connection: ending the MCP session and removing toolnode session %s", id, s.bridge.Session())
	s.end(true)
	if err := m.n.KillSession(s.bridge.Session()); err != nil {
		m.n.logger.Printf("mcp: removing session %s: %v", s.bridge.Session(), err)
	}
	for ss := range s.bridge.Server().Sessions() {
		ss.Close()
	}
}

func (m *mcpServer) drop(id string) {
	m.mu.Lock()
	s := m.sessions[id]
	delete(m.sessions, id)
	m.mu.Unlock()
	if s != nil {
		s.end(false)
	}
}
