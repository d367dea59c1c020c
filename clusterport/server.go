package clusterport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// HandshakeTimeout bounds how long an accepted connection may take to
// finish TLS and send its protocol byte; a handler that answers a refusal
// writes it within the same bound.
const HandshakeTimeout = 5 * time.Second

// DefaultMaxConns bounds the port's concurrent authenticated connections.
// Raft keeps up to 3 pooled connections per peer plus its heartbeat and
// pipeline ones, and a follower up to 64 idle forwarding connections: 256
// leaves room for a few dozen nodes.
const DefaultMaxConns = 256

const (
	rejectLogPeriod = 10 * time.Second // excess connections are logged at most this often

	// minPending is the least number of connections that may be in their
	// handshake at once (a quarter of the cap when that is more).
	minPending = 16
)

// Limits are the deadlines of the port's protocols (DESIGN §7 "Cluster
// port"): each has an idle deadline (how long the port waits for the next
// message to start) and a message deadline (how long one message may take
// to arrive once it has started). A limit that trips closes the
// connection with a log line naming it, and answers with an error message
// when the protocol has a way to say one. Tests shorten them.
type Limits struct {
	ForwardIdle time.Duration // a pooled forwarding connection between writes
	ForwardMsg  time.Duration // one forwarded write to arrive
	CallMsg     time.Duration // a routed call's request (arguments up to 1 MiB)
	CallIdle    time.Duration // a kept routed-call connection between calls
	RaftMsg     time.Duration // one Raft RPC (a snapshot included) once it has started
}

// DefaultLimits are the port's deadlines.
var DefaultLimits = Limits{
	ForwardIdle: 5 * time.Minute,
	ForwardMsg:  60 * time.Second,
	CallMsg:     10 * time.Second,
	CallIdle:    90 * time.Second,
	RaftMsg:     5 * time.Minute,
}

// Handler serves one connection of a protocol, its protocol byte read,
// and closes it when done.
type Handler func(net.Conn, Peer)

// Config configures a Server.
type Config struct {
	TLS      *TLS                 // nil: plain TCP
	MaxConns int                  // authenticated connections at once; default DefaultMaxConns
	Logf     func(string, ...any) // the port's log lines
}

// Server is the cluster port's one mux: it accepts, completes each
// connection's handshake under HandshakeTimeout, reads the protocol byte
// and hands the connection to the handler registered for it, within a
// cap of authenticated connections.
type Server struct {
	tls  *TLS
	logf func(string, ...any)

	// slots bounds concurrent authenticated connections: a connection
	// takes one once its handshake is done and its protocol byte read
	// (promote), and gives it back when it is closed, whichever protocol
	// it speaks (Raft's included). Until then it is pending: at most
	// maxPending are, apart from the slots, so connections that never
	// finish a handshake cannot use up the slots of those that do; a new
	// connection over that bound closes the oldest pending one, which
	// has had the most time (each has HandshakeTimeout in all).
	slots      chan struct{}
	maxPending int
	rejected   atomic.Int64 // connections closed for lack of a slot, not yet logged
	lastLog    atomic.Int64 // unix nanoseconds of the last rejection log line
	evicted    atomic.Int64 // pending connections closed for newer ones, not yet logged
	lastEvict  atomic.Int64

	mu      sync.Mutex
	protos  map[byte]protocol
	ln      net.Listener
	pending []*slotConn // oldest first
	lns     []*Listener
	// live are the accepted connections still open: closing the server
	// closes them, so a peer waiting on one (a Raft pipeline, a kept
	// call) sees the node go instead of waiting for an answer.
	live map[*slotConn]struct{}

	wg   sync.WaitGroup
	once sync.Once
}

// protocol is one row of the server's protocol table.
type protocol struct {
	name string
	h    Handler
}

// NewServer returns a server with only Ping in its protocol table.
func NewServer(cfg Config) *Server {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Server{
		tls:        cfg.TLS,
		logf:       cfg.Logf,
		slots:      make(chan struct{}, cfg.MaxConns),
		maxPending: max(cfg.MaxConns/4, minPending),
		protos:     map[byte]protocol{},
		live:       map[*slotConn]struct{}{},
	}
	s.Register(ProtoPing, "ping", servePing)
	return s
}

// Register serves proto with h. It panics on a protocol registered twice.
func (s *Server) Register(proto byte, name string, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.protos[proto]; ok {
		panic(fmt.Sprintf("cluster port: protocol %q registered twice (%s, %s)", proto, p.name, name))
	}
	s.protos[proto] = protocol{name, h}
}

// Listener registers proto as a protocol whose connections a consumer
// accepts (Raft's transport), each passed through wrap when it is not nil.
// Closing the server closes the listener.
func (s *Server) Listener(proto byte, name string, wrap func(net.Conn) net.Conn) *Listener {
	l := &Listener{s: s, conns: make(chan net.Conn, 16), done: make(chan struct{})}
	s.mu.Lock()
	s.lns = append(s.lns, l)
	s.mu.Unlock()
	s.Register(proto, name, func(c net.Conn, _ Peer) {
		if wrap != nil {
			c = wrap(c)
		}
		if !l.deliver(c) {
			c.Close()
		}
	})
	return l
}

// Listen accepts on ln in the background (through the server's TLS when it
// has one) and serves each connection in a goroutine of its own.
func (s *Server) Listen(ln net.Listener) {
	ln = s.tls.wrapListener(ln)
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sc := &slotConn{Conn: c, s: s, pending: true}
			var oldest *slotConn
			s.mu.Lock()
			if len(s.pending) >= s.maxPending {
				oldest, s.pending = s.pending[0], s.pending[1:]
			}
			s.pending = append(s.pending, sc)
			s.live[sc] = struct{}{}
			s.mu.Unlock()
			if oldest != nil {
				oldest.Conn.Close() // its handshake fails, and ServeConn closes it
				s.noteEvicted(oldest)
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.ServeConn(sc)
			}()
		}
	}()
}

// Addr is the address the server listens on; nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Conns is how many authenticated connections hold a slot now.
func (s *Server) Conns() int { return len(s.slots) }

// ServeConn serves one connection: it completes the TLS handshake (a
// connection accepted by Listen; tests pass one end of a net.Pipe), reads
// the protocol byte and hands the connection to its handler.
func (s *Server) ServeConn(c net.Conn) {
	var b [1]byte
	c.SetDeadline(time.Now().Add(HandshakeTimeout))
	// The TLS handshake (mutual TLS, or the gossip key's) completes before
	// anything of a protocol is read: a peer without the credential is
	// closed here, and no handler sees it. The handshake is bounded by its
	// deadline, not by a context: a stopping server still takes the new
	// leader's connections until Raft has removed it, and Close ends what
	// is left.
	if tc := tlsConn(c); tc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), HandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			s.logf("cluster port: refused %s: TLS handshake failed (a peer without this cluster's credential?): %v", c.RemoteAddr(), err)
			c.Close()
			return
		}
	}
	if _, err := c.Read(b[:]); err != nil {
		s.logf("cluster port: %s sent no protocol byte: %v", c.RemoteAddr(), err)
		c.Close()
		return
	}
	if sc, ok := c.(*slotConn); ok && !sc.promote() {
		s.reject(c)
		return
	}
	c.SetDeadline(time.Time{})
	s.mu.Lock()
	p, ok := s.protos[b[0]]
	s.mu.Unlock()
	if !ok {
		s.logf("cluster port: %s sent unknown protocol byte %#x; closing", c.RemoteAddr(), b[0])
		c.Close()
		return
	}
	peer := PeerOf(c)
	if b[0] == ProtoRaft {
		if why := s.refuseRaft(peer); why != "" {
			s.logf("cluster port: refused Raft from %s: %s", c.RemoteAddr(), why)
			c.Close()
			return
		}
	}
	p.h(c, peer)
}

// refuseRaft says why a Raft connection may not be served, "" when it
// may: a client node's certificate, this node's or the peer's, takes no
// part in Raft (no AppendEntries, RequestVote, InstallSnapshot or
// TimeoutNow, whichever end sends it).
func (s *Server) refuseRaft(p Peer) string {
	if s.tls.ClientOnly() {
		return "this node's certificate is a client node's (" + s.tls.CertFile() + "); it takes no part in Raft"
	}
	if p.Role == RoleClient {
		return fmt.Sprintf("its certificate (%q) is a client node's (toolnode tls cert -client), and a client sends no Raft RPC", p.Name)
	}
	return ""
}

// servePing answers the protocol byte: the port is reachable and speaks
// this protocol.
func servePing(c net.Conn, _ Peer) {
	c.SetWriteDeadline(time.Now().Add(HandshakeTimeout))
	c.Write([]byte{ProtoPing})
	c.Close()
}

// noteEvicted logs, at most once per rejectLogPeriod, how many pending
// connections were closed to make room for newer ones.
func (s *Server) noteEvicted(c net.Conn) {
	n := s.evicted.Add(1)
	now := time.Now().UnixNano()
	last := s.lastEvict.Load()
	if now-last < int64(rejectLogPeriod) || !s.lastEvict.CompareAndSwap(last, now) {
		return
	}
	s.evicted.Add(-n)
	s.logf("cluster port: %d connection(s) still in their handshake closed for newer ones (latest from %s): at most %d may be unauthenticated at once",
		n, c.RemoteAddr(), s.maxPending)
}

// reject closes a connection over the cap, logging at most once per
// rejectLogPeriod how many were closed.
func (s *Server) reject(c net.Conn) {
	c.Close()
	n := s.rejected.Add(1)
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(rejectLogPeriod) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.rejected.Add(-n)
	s.logf("cluster port: %d connection(s) closed at once (latest from %s): this node already serves %d, its limit",
		n, c.RemoteAddr(), cap(s.slots))
}

// Close stops accepting, closes the protocols' listeners and every
// connection still open, and waits for the accept loop and the handlers
// it started.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		ln, lns := s.ln, s.lns
		live := make([]*slotConn, 0, len(s.live))
		for c := range s.live {
			live = append(live, c)
		}
		s.mu.Unlock()
		if ln != nil {
			ln.Close()
		}
		for _, l := range lns {
			l.Close()
		}
		for _, c := range live {
			c.Close()
		}
	})
	s.wg.Wait()
}

// slotConn is an accepted connection: pending until promoted, then
// holding a slot, which it gives back once when closed.
type slotConn struct {
	net.Conn
	s    *Server
	once sync.Once
	// under s.mu:
	pending bool
	closed  bool
}

// promote moves a connection whose handshake is done from pending into a
// slot; false when every slot is taken (or it was closed meanwhile).
func (c *slotConn) promote() bool {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed {
		return false
	}
	if !c.pending {
		return true
	}
	select {
	case s.slots <- struct{}{}:
	default:
		return false
	}
	s.unpend(c)
	return true
}

// unpend removes c from the pending list (if it is still on it); under s.mu.
func (s *Server) unpend(c *slotConn) {
	c.pending = false
	for i, p := range s.pending {
		if p == c {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return
		}
	}
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		s := c.s
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.live, c)
		c.closed = true
		if c.pending {
			s.unpend(c)
		} else {
			<-s.slots
		}
	})
	return err
}

// ErrClosed is what a protocol's Listener returns once the server closed.
var ErrClosed = errors.New("cluster listener closed")

// Listener is the net.Listener one protocol's consumer accepts from.
type Listener struct {
	s     *Server
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *Listener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the protocol's next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, ErrClosed
	}
}

// Close ends Accept; the server's other protocols go on.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the server's listening address.
func (l *Listener) Addr() net.Addr { return l.s.Addr() }

// RequestDeadline gives the serving side of a request-answer protocol a
// message deadline: hashicorp/raft reads a request and writes its answer,
// in turn, and sets no deadline of its own on the accepting side. Once a
// request has begun to arrive, the rest of it (up to the answer) must come
// within timeout; between requests the connection may idle, as Raft's
// pooled connections do.
func RequestDeadline(c net.Conn, timeout time.Duration) net.Conn {
	return &requestConn{Conn: c, timeout: timeout}
}

type requestConn struct {
	net.Conn
	timeout time.Duration
	mu      sync.Mutex
	started bool // a request has begun and no answer has been written
}

func (c *requestConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.started {
			c.started = true
			c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *requestConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.started {
		c.started = false
		c.Conn.SetReadDeadline(time.Time{})
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}
