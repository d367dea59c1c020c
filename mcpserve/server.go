package mcpserve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolnode/toolnode/internal/netx"
	"github.com/toolnode/toolnode/mcpbridge"
)

// Idle is how long an MCP session may stay idle before it expires and
// its toolnode session is removed.
const Idle = 15 * time.Minute

// InitWait is how long a new MCP session may take to finish its
// initialisation before its bridge is dropped.
const InitWait = 2 * time.Minute

// Host is the node a Server serves, as the server needs it.
type Host interface {
	// Serve9P serves the node's 9P tree on c until c ends or the node
	// ends it (as it ends a revoked token's connections). c's RemoteAddr
	// is the HTTP client's.
	Serve9P(c net.Conn)
	// Token names the token whose secret this is, "" for one the node
	// does not know; ok reports whether it may attach (known, not
	// revoked, with a role above none).
	Token(secret string) (name string, ok bool)
	// KillSession removes a toolnode session.
	KillSession(session string) error
	// Record writes one audit line for an action that started at start.
	Record(start time.Time, who, action, target string, err error)
}

// Config is how a Server listens.
type Config struct {
	// Addr is the HOST:PORT it listens on.
	Addr string
	// TLS, when set, makes it serve HTTPS with this configuration; an
	// Addr off loopback is refused without it.
	TLS *tls.Config
	// Anon lets a client without a token start a session on a loopback
	// listener (the node gives it its role in the attach); a listener off
	// loopback refuses such a client whatever Anon says.
	Anon bool
	// Logf receives the server's log lines; default log.Printf.
	Logf func(format string, args ...any)
	// PageSize is how many tools a page of tools/list holds (default
	// mcpbridge's).
	PageSize int
	// Lines, when set, is the host's side channel of its calls' lines
	// (progress and standard error) to the sessions' bridges.
	Lines *Lines
}

// Server is MCP over Streamable HTTP for one node.
type Server struct {
	host  Host
	logf  func(format string, args ...any)
	ln    net.Listener
	http  *http.Server
	sdk   *mcp.StreamableHTTPHandler
	anon  bool
	page  int    // Config.PageSize
	lines *Lines // Config.Lines

	// loopback: the listener is on loopback (Host and Origin must name
	// loopback); else hosts are the names it answers for (check.go).
	loopback bool
	hosts    map[string]bool

	mu       sync.Mutex
	sessions map[string]*session // Mcp-Session-Id →

	waiting atomic.Int64  // sessions whose initialisation is watched (newSession)
	done    chan struct{} // closed by Close
	once    sync.Once
}

type bridgeKey struct{}

// Listen opens cfg.Addr for MCP; Serve then serves it.
func Listen(cfg Config, host Host) (*Server, error) {
	if cfg.TLS == nil && !netx.LoopbackAddr(cfg.Addr) {
		return nil, fmt.Errorf("%s leaves loopback: MCP is served off loopback only over HTTPS", cfg.Addr)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
		scheme = "https"
	}
	s := &Server{host: host, logf: cfg.Logf, ln: ln, sessions: map[string]*session{}, done: make(chan struct{})}
	if s.logf == nil {
		s.logf = log.Printf
	}
	s.loopback, s.hosts = hostsOf(cfg.Addr, cfg.TLS)
	s.anon = cfg.Anon && s.loopback
	s.page, s.lines = cfg.PageSize, cfg.Lines
	s.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		ss, _ := r.Context().Value(bridgeKey{}).(*session)
		if ss == nil {
			return nil
		}
		return ss.bridge.Server()
	}, &mcp.StreamableHTTPOptions{SessionTimeout: Idle, JSONResponse: true})
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.logf("serving MCP (Streamable HTTP) on %s://%s/", scheme, ln.Addr())
	return s, nil
}

// Serve serves until Close; it returns nil then, else why it stopped.
func (s *Server) Serve() error {
	if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the listener and ends every session, removing their
// toolnode sessions.
func (s *Server) Close() {
	s.once.Do(func() { close(s.done) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.http.Shutdown(ctx)
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.end(false)
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := netx.Bearer(r)
	sum := sha256.Sum256([]byte(token))
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		s.mu.Lock()
		ss := s.sessions[id]
		s.mu.Unlock()
		if ss != nil && subtle.ConstantTimeCompare(ss.token[:], sum[:]) != 1 {
			s.logf("mcp: %s: a request for session %s with another token: refused", r.RemoteAddr, id)
			http.Error(w, "permission denied: this MCP session belongs to another token", http.StatusForbidden)
			return
		}
		s.sdk.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		s.sdk.ServeHTTP(w, r)
		return
	}
	key := principalKey(r, token, sum)
	no := s.checkNew(r, token)
	if no == nil {
		no = s.admit(key)
	}
	if no != nil {
		who := "anon@" + strings.TrimPrefix(key, "anon@")
		if token != "" {
			who = "token"
			if name, _ := s.host.Token(token); name != "" {
				who = name
			}
		}
		s.logf("mcp: %s (%s): refused: %v", r.RemoteAddr, who, no.err)
		s.host.Record(time.Now(), who, "mcp-session", r.RemoteAddr, no.err)
		if no.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolnode"`)
		}
		http.Error(w, no.err.Error(), no.status)
		return
	}
	ss, id, err := s.newSession(r, token, sum)
	if errors.Is(err, mcpbridge.ErrNoProfile) {
		// Not 401: a 401 makes clients start an OAuth flow.
		s.logf("mcp: %s: %v", r.RemoteAddr, err)
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		s.logf("mcp: %s: %v", r.RemoteAddr, err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolnode"`)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	s.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bridgeKey{}, ss)))
	// A request that did not start a session (not an initialize, or a
	// refused one) leaves nothing behind.
	if w.Header().Get("Mcp-Session-Id") != id {
		s.drop(id)
	}
}
