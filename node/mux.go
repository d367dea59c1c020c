package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
)

// handshakeTimeout bounds how long an accepted connection may take to
// finish TLS and send its protocol byte.
const handshakeTimeout = 5 * time.Second

var errMuxClosed = errors.New("cluster listener closed")

// mux accepts on the cluster port and hands each connection to the node.
type mux struct {
	ln   net.Listener
	raft *muxListener // the connections Raft accepts

	wg   sync.WaitGroup
	once sync.Once
}

func newMux(ln net.Listener) *mux {
	return &mux{ln: ln, raft: &muxListener{addr: ln.Addr(), conns: make(chan net.Conn, 16), done: make(chan struct{})}}
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
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				route(c)
			}()
		}
	}()
}

func (m *mux) close() {
	m.once.Do(func() {
		m.ln.Close()
		m.raft.Close()
	})
	m.wg.Wait()
}

// ServeClusterConn serves one connection of the cluster port: it reads the
// protocol byte and hands the connection to Raft or to the forwarding
// service. Tests call it to connect in-process nodes with net.Pipe.
func (n *Node) ServeClusterConn(c net.Conn) {
	var b [1]byte
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	if _, err := c.Read(b[:]); err != nil {
		n.logger.Printf("cluster port: %s sent no protocol byte: %v", c.RemoteAddr(), err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	switch {
	case b[0] == protoRaft && n.mux != nil:
		if !n.mux.raft.deliver(c) {
			c.Close()
		}
	case b[0] == protoForward:
		n.serveForward(c)
	case b[0] == protoCall:
		n.serveCall(c)
	case b[0] == protoPing:
		c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		c.Write([]byte{protoPing})
		c.Close()
	default:
		n.logger.Printf("cluster port: %s sent unknown protocol byte %#x; closing", c.RemoteAddr(), b[0])
		c.Close()
	}
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
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{proto}); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// reachable checks that a peer's cluster port answers, through mutual TLS
// when configured: a node the cluster cannot talk to must not get a vote.
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

// Dial connects to a peer's cluster port and announces Raft.
func (r *raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return r.n.dialCluster(string(addr), protoRaft, timeout)
}
