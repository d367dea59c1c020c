package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The cluster port carries several protocols; the first byte a dialer
// sends picks the handler (as consul's rpc.go and rqlite's cluster
// service do). With -tls-* the whole port is mutual TLS, the protocol byte
// included.
const (
	protoRaft    byte = 'R' // hashicorp/raft's NetworkTransport
	protoForward byte = 'F' // writes forwarded to the leader
	protoPing    byte = 'P' // the leader checks a node's cluster port before admitting it
	protoStream  byte = 'S' // a client follows a server's change stream (replica.go)
)

// handshakeTimeout bounds how long an accepted connection may take to
// finish TLS and send its protocol byte.
const handshakeTimeout = 5 * time.Second

// Bounds of the cluster port (DESIGN §7 "Cluster port"). Each protocol has
// an idle deadline (how long the port waits for the next message to start)
// and a message deadline (how long one message may take to arrive once it
// has started), and a cap on one message's size (forward.go, route.go).
// A limit that trips closes the connection with a log line naming it, and
// answers with an error message when the protocol has a way to say one.
const (
	// DefaultMaxClusterConns bounds the port's concurrent connections.
	// Raft keeps up to 3 pooled connections per peer plus its heartbeat and
	// pipeline ones, and a follower up to fwdIdleMax idle forwarding
	// connections: 256 leaves room for a few dozen nodes.
	DefaultMaxClusterConns = 256

	rejectLogPeriod = 10 * time.Second // excess connections are logged at most this often

	// minPending is the least number of connections that may be in their
	// handshake at once (a quarter of the cap when that is more).
	minPending = 16
)

// portLimits are the cluster port's deadlines (tests shorten them).
type portLimits struct {
	fwdIdle  time.Duration // a pooled forwarding connection between writes
	fwdMsg   time.Duration // one forwarded write (up to an executable) to arrive
	callMsg  time.Duration // a routed call's request (arguments up to 1 MiB)
	callIdle time.Duration // a kept routed-call connection between calls
	raftMsg  time.Duration // one Raft RPC (a snapshot included) once it has started
}

var defaultPortLimits = portLimits{
	fwdIdle:  5 * time.Minute,
	fwdMsg:   60 * time.Second,
	callMsg:  10 * time.Second,
	callIdle: 90 * time.Second,
	raftMsg:  5 * time.Minute,
}

var errMuxClosed = errors.New("cluster listener closed")

// mux accepts on the cluster port and hands each connection to the node.
type mux struct {
	ln   net.Listener
	raft *muxListener // the connections Raft accepts

	// slots bounds concurrent authenticated connections: a connection
	// takes one once its handshake is done and its protocol byte read
	// (promote), and gives it back when it is closed, whichever protocol
	// it speaks (Raft's included). Until then it is pending: at most
	// maxPending are, apart from the slots, so connections that never
	// finish a handshake cannot use up the slots of those that do; a new
	// connection over that bound closes the oldest pending one, which
	// has had the most time (each has handshakeTimeout in all).
	slots      chan struct{}
	maxPending int
	pending    []*slotConn  // oldest first; under mu
	rejected   atomic.Int64 // connections closed for lack of a slot, not yet logged
	lastLog    atomic.Int64 // unix nanoseconds of the last rejection log line
	evicted    atomic.Int64 // pending connections closed for newer ones, not yet logged
	lastEvict  atomic.Int64
	logf       func(string, ...any)

	// live are the accepted connections still open: closing the mux
	// closes them, so a peer waiting on one (a Raft pipeline, a kept
	// call) sees the node go instead of waiting for an answer.
	mu   sync.Mutex
	live map[*slotConn]struct{}

	wg   sync.WaitGroup
	once sync.Once
}

func newMux(ln net.Listener, maxConns int, logf func(string, ...any)) *mux {
	if maxConns <= 0 {
		maxConns = DefaultMaxClusterConns
	}
	return &mux{
		ln:         ln,
		raft:       &muxListener{addr: ln.Addr(), conns: make(chan net.Conn, 16), done: make(chan struct{})},
		slots:      make(chan struct{}, maxConns),
		maxPending: max(maxConns/4, minPending),
		logf:       logf,
		live:       map[*slotConn]struct{}{},
	}
}

func (m *mux) serve(route func(net.Conn)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			c, err := m.ln.Accept()
			if err != nil {
				return
			}
			sc := &slotConn{Conn: c, m: m, pending: true}
			var oldest *slotConn
			m.mu.Lock()
			if len(m.pending) >= m.maxPending {
				oldest, m.pending = m.pending[0], m.pending[1:]
			}
			m.pending = append(m.pending, sc)
			m.live[sc] = struct{}{}
			m.mu.Unlock()
			if oldest != nil {
				oldest.Conn.Close() // its handshake fails, and its handler closes it
				m.noteEvicted(oldest)
			}
			c = sc
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				route(c)
			}()
		}
	}()
}

// noteEvicted logs, at most once per rejectLogPeriod, how many pending
// connections were closed to make room for newer ones.
func (m *mux) noteEvicted(c net.Conn) {
	n := m.evicted.Add(1)
	now := time.Now().UnixNano()
	last := m.lastEvict.Load()
	if now-last < int64(rejectLogPeriod) || !m.lastEvict.CompareAndSwap(last, now) {
		return
	}
	m.evicted.Add(-n)
	m.logf("cluster port: %d connection(s) still in their handshake closed for newer ones (latest from %s): at most %d may be unauthenticated at once",
		n, c.RemoteAddr(), m.maxPending)
}

// reject closes a connection over the cap, logging at most once per
// rejectLogPeriod how many were closed.
func (m *mux) reject(c net.Conn) {
	c.Close()
	n := m.rejected.Add(1)
	now := time.Now().UnixNano()
	last := m.lastLog.Load()
	if now-last < int64(rejectLogPeriod) || !m.lastLog.CompareAndSwap(last, now) {
		return
	}
	m.rejected.Add(-n)
	m.logf("cluster port: %d connection(s) closed at once (latest from %s): this node already serves %d, its limit",
		n, c.RemoteAddr(), cap(m.slots))
}

// slotConn is an accepted connection: pending until promoted, then
// holding a slot, which it gives back once when closed.
type slotConn struct {
	net.Conn
	m    *mux
	once sync.Once
	// under m.mu:
	pending bool
	closed  bool
}

// promote moves a connection whose handshake is done from pending into a
// slot; false when every slot is taken (or it was closed meanwhile).
func (c *slotConn) promote() bool {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.closed {
		return false
	}
	if !c.pending {
		return true
	}
	select {
	case m.slots <- struct{}{}:
	default:
		return false
	}
	m.unpend(c)
	return true
}

// unpend removes c from the pending list (if it is still on it).
func (m *mux) unpend(c *slotConn) {
	c.pending = false
	for i, p := range m.pending {
		if p == c {
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			return
		}
	}
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		m := c.m
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.live, c)
		c.closed = true
		if c.pending {
			m.unpend(c)
		} else {
			<-m.slots
		}
	})
	return err
}

func (m *mux) close() {
	m.once.Do(func() {
		m.ln.Close()
		m.raft.Close()
		m.mu.Lock()
		live := make([]*slotConn, 0, len(m.live))
		for c := range m.live {
			live = append(live, c)
		}
		m.mu.Unlock()
		for _, c := range live {
			c.Close()
		}
	})
	m.wg.Wait()
}

// ServeClusterConn serves one connection of the cluster port: it reads the
// protocol byte and hands the connection to Raft or to the forwarding
// service. Tests call it to connect in-process nodes with net.Pipe.
func (n *Node) ServeClusterConn(c net.Conn) {
	var b [1]byte
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	// The TLS handshake (mutual TLS, or the gossip key's) completes before
	// anything of a protocol is read: a peer without the credential is
	// closed here, and no handler sees it. The handshake is bounded by its
	// deadline, not by the node's context: a stopping server still takes
	// the new leader's connections until Raft has removed it (stop.go),
	// and the mux's close ends what is left.
	if tc := tlsConn(c); tc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			n.logger.Printf("cluster port: refused %s: TLS handshake failed (a peer without this cluster's credential?): %v", c.RemoteAddr(), err)
			c.Close()
			return
		}
	}
	if _, err := c.Read(b[:]); err != nil {
		n.logger.Printf("cluster port: %s sent no protocol byte: %v", c.RemoteAddr(), err)
		c.Close()
		return
	}
	if sc, ok := c.(*slotConn); ok && !sc.promote() {
		sc.m.reject(c)
		return
	}
	c.SetDeadline(time.Time{})
	switch {
	case b[0] == protoRaft && n.mux != nil:
		if why := n.refuseRaft(c); why != "" {
			n.logger.Printf("cluster port: refused Raft from %s: %s", c.RemoteAddr(), why)
			c.Close()
			return
		}
		if !n.mux.raft.deliver(&raftConn{Conn: c, timeout: n.lim.raftMsg}) {
			c.Close()
		}
	case b[0] == protoForward:
		n.serveForward(c)
	case b[0] == protoCall:
		n.serveCall(c)
	case b[0] == protoBlob:
		n.blobs.Serve(c)
	case b[0] == protoStream:
		n.serveStream(c)
	case b[0] == protoPing:
		c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		c.Write([]byte{protoPing})
		c.Close()
	default:
		n.logger.Printf("cluster port: %s sent unknown protocol byte %#x; closing", c.RemoteAddr(), b[0])
		c.Close()
	}
}

// refuseRaft says why a Raft connection may not be served, "" when it
// may: a client node's certificate, this node's or the peer's, takes no
// part in Raft (no AppendEntries, RequestVote, InstallSnapshot or
// TimeoutNow, whichever end sends it).
func (n *Node) refuseRaft(c net.Conn) string {
	if n.tls.isClientOnly() {
		return "this node's certificate is a client node's (" + n.tls.certFile + "); it takes no part in Raft"
	}
	if client, name := peerIsClient(c); client {
		return fmt.Sprintf("its certificate (%q) is a client node's (toolnode tls cert -client), and a client sends no Raft RPC", name)
	}
	return ""
}

// errClientPeer: a peer presented a client node's certificate where only
// a server may answer (Raft, the change stream, forwarded writes) or
// where the leader looks for a server to add.
var errClientPeer = errors.New("its certificate is a client node's (toolnode tls cert -client), and a client is never a server")

// serverProto reports whether only a server may answer proto: Raft, the
// change stream and forwarded writes (which carry callers' tokens, sent
// only to servers).
func serverProto(proto byte) bool {
	return proto == protoRaft || proto == protoStream || proto == protoForward
}

// tlsConn returns the TLS connection under c, or nil.
func tlsConn(c net.Conn) *tls.Conn {
	if s, ok := c.(*slotConn); ok {
		c = s.Conn
	}
	tc, _ := c.(*tls.Conn)
	return tc
}

// raftConn gives Raft's server side a message deadline: hashicorp/raft
// reads a request and writes its answer, in turn, and sets no deadline of
// its own on the accepting side. Once a request has begun to arrive, the
// rest of it (up to the answer) must come within timeout; between
// requests the connection may idle, as Raft's pooled connections do.
type raftConn struct {
	net.Conn
	timeout time.Duration
	mu      sync.Mutex
	started bool // a request has begun and no answer has been written
}

func (c *raftConn) Read(p []byte) (int, error) {
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

func (c *raftConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.started {
		c.started = false
		c.Conn.SetReadDeadline(time.Time{})
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// dialCluster connects to a peer's cluster port (TLS when configured, or
// the test dialer) and announces the protocol.
func (n *Node) dialCluster(addr string, proto byte, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	var err error
	if n.cfg.Dial != nil {
		c, err = n.cfg.Dial(addr, timeout)
	} else {
		c, err = n.tls.dial(addr, timeout)
	}
	if err != nil {
		return nil, err
	}
	if proto == protoRaft && n.tls.isClientOnly() {
		c.Close()
		return nil, fmt.Errorf("dial %s: this node's certificate is a client node's; it sends no Raft RPC", addr)
	}
	if serverProto(proto) {
		if client, name := peerIsClient(c); client {
			c.Close()
			n.noteClientPeer(addr)
			return nil, fmt.Errorf("dial %s (%q) for %q: %w", addr, name, proto, errClientPeer)
		}
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{proto}); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// reachable checks that a peer's cluster port answers, through mutual TLS
// when configured, and that its certificate is not a client node's: a
// node the cluster cannot talk to, or a client, must not get a vote.
func (n *Node) reachable(addr string) error {
	c, err := n.dialCluster(addr, protoPing, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("no answer from %s: %v", addr, err)
	}
	if b[0] != protoPing {
		return fmt.Errorf("%s answered %#x, not a toolnode cluster port", addr, b[0])
	}
	if client, name := peerIsClient(c); client {
		n.noteClientPeer(addr)
		return fmt.Errorf("%s (%q): %w", addr, name, errClientPeer)
	}
	return nil
}

// muxListener is the net.Listener one protocol sees.
type muxListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *muxListener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errMuxClosed
	}
}

func (l *muxListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *muxListener) Addr() net.Addr { return l.addr }

// raftLayer is raft's StreamLayer over the cluster port.
type raftLayer struct {
	*muxListener
	advertise net.Addr
	n         *Node
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func (r *raftLayer) Addr() net.Addr { return r.advertise }

// Accept hands Raft's transport the next Raft connection; the first opens
// Raft on a client that has not (lazyraft.go).
func (r *raftLayer) Accept() (net.Conn, error) {
	c, err := r.muxListener.Accept()
	if err == nil {
		r.n.wantRaft()
	}
	return c, err
}

// Dial connects to a peer's cluster port and announces Raft.
func (r *raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return r.n.dialCluster(string(addr), protoRaft, timeout)
}
