package clusterport

import (
	"net"
	"sync"
	"time"
)

// Pool keeps idle cluster-port connections per address for the next
// request to the same peer (forwarded writes to the leader, routed calls
// to a node), so the handshake is paid once per peer. A kept connection is
// looked at before it is handed out again (alive): one its peer closed
// meanwhile is dropped.
type Pool struct {
	Max    int           // idle connections kept per address
	MaxAge time.Duration // an older idle connection is not reused; 0: no limit

	mu   sync.Mutex
	idle map[string][]pooledConn
}

type pooledConn struct {
	c     net.Conn
	since time.Time
}

// Get returns an idle connection to addr that is still open, or nil.
func (p *Pool) Get(addr string) net.Conn {
	for {
		p.mu.Lock()
		cs := p.idle[addr]
		if len(cs) == 0 {
			p.mu.Unlock()
			return nil
		}
		pc := cs[len(cs)-1]
		p.idle[addr] = cs[:len(cs)-1]
		p.mu.Unlock()
		if (p.MaxAge == 0 || time.Since(pc.since) < p.MaxAge) && alive(pc.c) {
			return pc.c
		}
		pc.c.Close()
	}
}

// Put keeps c for the next Get of addr, or closes it when Max are kept.
func (p *Pool) Put(addr string, c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		p.idle = map[string][]pooledConn{}
	}
	if len(p.idle[addr]) >= p.Max {
		c.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], pooledConn{c, time.Now()})
}

// CloseAll closes every kept connection.
func (p *Pool) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cs := range p.idle {
		for _, pc := range cs {
			pc.c.Close()
		}
	}
	p.idle = nil
}

// Idle lists the connections kept now, for every address.
func (p *Pool) Idle() []net.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []net.Conn
	for _, cs := range p.idle {
		for _, pc := range cs {
			out = append(out, pc.c)
		}
	}
	return out
}
