package node

import (
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The cluster port carries several protocols; the first byte a dialer
// sends picks the handler (as consul's rpc.go and rqlite's cluster
// service do).
const (
	protoRaft byte = 'R'
)

// handshakeTimeout bounds how long an accepted connection may take to
// send its protocol byte.
const handshakeTimeout = 5 * time.Second

var errMuxClosed = errors.New("cluster listener closed")

// mux accepts on the cluster port and hands each connection to the
// listener of its protocol.
type mux struct {
	ln     net.Listener
	logger *log.Logger
	raft   *muxListener

	wg   sync.WaitGroup
	once sync.Once
}

func newMux(ln net.Listener, logger *log.Logger) *mux {
	m := &mux{ln: ln, logger: logger}
	m.raft = &muxListener{addr: ln.Addr(), conns: make(chan net.Conn, 16), done: make(chan struct{})}
	return m
}

func (m *mux) serve() {
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
				m.route(c)
			}()
		}
	}()
}

func (m *mux) route(c net.Conn) {
	var b [1]byte
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	if _, err := c.Read(b[:]); err != nil {
		m.logger.Printf("cluster port: %s sent no protocol byte: %v", c.RemoteAddr(), err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	switch b[0] {
	case protoRaft:
		if !m.raft.deliver(c) {
			c.Close()
		}
	default:
		m.logger.Printf("cluster port: %s sent unknown protocol byte %#x; closing", c.RemoteAddr(), b[0])
		c.Close()
	}
}

func (m *mux) close() {
	m.once.Do(func() {
		m.ln.Close()
		m.raft.Close()
	})
	m.wg.Wait()
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
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func (r *raftLayer) Addr() net.Addr { return r.advertise }

// Dial connects to a peer's cluster port and announces Raft.
func (r *raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{protoRaft}); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}
