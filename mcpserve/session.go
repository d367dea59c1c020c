package mcpserve

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/mcpbridge"
)

// session is one MCP session: its bridge and the bridge's 9P connection.
type session struct {
	token  [32]byte // SHA-256 of the bearer token that made it
	who    string   // what it counts against (principalKey)
	bridge *mcpbridge.Bridge
	conn   *client.Conn
	ended  chan struct{} // closed when the session ends, however it ends
	once   sync.Once
}

// remoteConn is the node's end of a bridge's pipe; it reports the HTTP
// client's address, so an attach without a token is anon@ADDR.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

func (s *Server) newSession(r *http.Request, token string, sum [32]byte) (*session, string, error) {
	var remote net.Addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	if ap, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		remote = ap
	}
	var idb [16]byte
	rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	here, there := net.Pipe()
	go func() {
		s.host.Serve9P(remoteConn{there, remote})
		s.connEnded(id)
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
	ss := &session{token: sum, who: principalKey(r, token, sum), conn: conn, ended: make(chan struct{})}
	b, err := mcpbridge.New(fsys, mcpbridge.Options{
		Profile:   r.URL.Query().Get("profile"),
		SessionID: id,
		Logf:      s.logf,
		Ended:     func() { s.drop(id) },
		Msize:     wc.Msize(),
		PageSize:  s.page,
		WatchCalls: func() func(string, string, func(string, int, string)) func() {
			if s.lines == nil {
				return nil
			}
			return s.lines.Watch
		}(),
	})
	if err != nil {
		conn.Close()
		return nil, "", err
	}
	ss.bridge = b
	s.mu.Lock()
	s.sessions[id] = ss
	s.mu.Unlock()
	s.waiting.Add(1)
	go func() {
		defer s.waiting.Add(-1)
		// The SDK expires idle sessions; one that never finishes its
		// initialisation is dropped here. A session that ends first,
		// however it ends, ends this wait.
		t := time.NewTimer(InitWait)
		defer t.Stop()
		select {
		case <-t.C:
			if !b.Initialized() {
				s.drop(id)
			}
		case <-ss.ended:
		case <-s.done:
		}
	}()
	return ss, id, nil
}

// end ends the session; connGone: the node has ended its 9P connection,
// so nothing is removed over it (the bridge is abandoned, not closed).
func (ss *session) end(connGone bool) {
	ss.once.Do(func() { close(ss.ended) })
	if connGone {
		ss.bridge.Abandon()
	} else {
		ss.bridge.Close()
	}
	ss.conn.Close()
}

// connEnded ends MCP session id when the node ended its 9P connection
// (its token was revoked) rather than the session's own end: the bridge
// cannot remove its toolnode session over a connection that is gone, so
// the node removes it, and the MCP session ends, so the client learns at
// once (404 for the session) instead of meeting errors call after call.
func (s *Server) connEnded(id string) {
	s.mu.Lock()
	ss := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if ss == nil {
		return // dropped, or never made
	}
	s.logf("mcp: session %s: the node ended its 9P connection: ending the MCP session and removing toolnode session %s", id, ss.bridge.Session())
	ss.end(true)
	if err := s.host.KillSession(ss.bridge.Session()); err != nil {
		s.logf("mcp: removing session %s: %v", ss.bridge.Session(), err)
	}
	for c := range ss.bridge.Server().Sessions() {
		c.Close()
	}
}

func (s *Server) drop(id string) {
	s.mu.Lock()
	ss := s.sessions[id]
	delete(s.sessions, id)
	s.mu.Unlock()
	if ss != nil {
		ss.end(false)
	}
}
