package testcluster

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipNet is an in-memory network for memberlist; its zero value is
// ready. It plays the part of memberlist's MockNetwork, which cannot
// serve multi-node tests: MockNetwork
// delivers on unbuffered channels, so once a member stops reading (it
// crashed or left) every peer that gossips or probes it blocks for good and
// the failed member is never declared dead; and its NewTransport writes
// maps that running members read, so nodes cannot be added to a running
// cluster. Here a transport can go down (a crash, as its peers see it:
// packets to and from it are lost, streams refused), and a restart gets
// a fresh transport at the same address (Renew).
type GossipNet struct {
	mu     sync.Mutex
	port   int
	byAddr map[string]*GossipTransport
}

// NewTransport is a transport at a fresh address, down until Renew
// brings it up for a node to start on.
func (g *GossipNet) NewTransport() *GossipTransport {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.port++
	t := &GossipTransport{
		net:     g,
		addr:    fmt.Sprintf("127.0.0.1:%d", g.port),
		port:    g.port,
		packets: make(chan *memberlist.Packet, 256),
		streams: make(chan net.Conn),
		down:    make(chan struct{}),
	}
	close(t.down) // down until a node starts on it
	if g.byAddr == nil {
		g.byAddr = map[string]*GossipTransport{}
	}
	g.byAddr[t.addr] = t
	return t
}

// Renew gives old's address a fresh transport, up, as a restarted process
// gets fresh sockets: the stopped instance keeps old, so its late
// Shutdown, or a reader of its channels still draining, cannot touch the
// new one.
func (g *GossipNet) Renew(old *GossipTransport) *GossipTransport {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := &GossipTransport{
		net:     g,
		addr:    old.addr,
		port:    old.port,
		packets: make(chan *memberlist.Packet, 256),
		streams: make(chan net.Conn),
		down:    make(chan struct{}),
	}
	g.byAddr[t.addr] = t
	return t
}

// Lookup is the transport at addr, or nil.
func (g *GossipNet) Lookup(addr string) *GossipTransport {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byAddr[addr]
}

// GossipTransport is one member's memberlist.Transport on a GossipNet.
type GossipTransport struct {
	net     *GossipNet
	addr    string
	port    int
	packets chan *memberlist.Packet
	streams chan net.Conn

	mu   sync.Mutex
	down chan struct{} // closed while the transport is down
}

// Addr is the transport's address, for a memberlist Join.
func (t *GossipTransport) Addr() string { return t.addr }

var _ memberlist.Transport = (*GossipTransport)(nil)

type gossipAddr string

func (a gossipAddr) Network() string { return "inmem" }
func (a gossipAddr) String() string  { return string(a) }

func (t *GossipTransport) downCh() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down
}

// IsDown reports whether the transport is cut off.
func (t *GossipTransport) IsDown() bool {
	select {
	case <-t.downCh():
		return true
	default:
		return false
	}
}

// SetDown cuts the transport off: nothing more goes in or out.
func (t *GossipTransport) SetDown() {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.down:
	default:
		close(t.down)
	}
}

func (t *GossipTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.IPv4(127, 0, 0, 1), t.port, nil
}

// WriteTo delivers a packet, or loses it as UDP would: when either end is
// down, or the receiver does not take it within a second.
func (t *GossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	to := t.net.Lookup(addr)
	if to == nil || t.IsDown() {
		return now, nil
	}
	toDown := to.downCh()
	select {
	case <-toDown:
		return now, nil
	default:
	}
	p := &memberlist.Packet{Buf: append([]byte(nil), b...), From: gossipAddr(t.addr), Timestamp: now}
	select {
	case to.packets <- p:
	case <-toDown:
	case <-time.After(time.Second):
	}
	return now, nil
}

func (t *GossipTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// DialTimeout connects a stream, refused when either end is down.
func (t *GossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	to := t.net.Lookup(addr)
	if to == nil || t.IsDown() || to.IsDown() {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	mine, theirs := net.Pipe()
	select {
	case to.streams <- theirs:
		return mine, nil
	case <-to.downCh():
	case <-time.After(timeout):
	}
	mine.Close()
	theirs.Close()
	return nil, fmt.Errorf("dial %s: connection refused", addr)
}

func (t *GossipTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown is memberlist stopping: the member is gone from the network.
func (t *GossipTransport) Shutdown() error {
	t.SetDown()
	return nil
}
