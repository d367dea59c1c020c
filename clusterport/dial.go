package clusterport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// ErrClientPeer: a peer presented a client node's certificate where only
// a server may answer (Raft, the change stream, forwarded writes) or
// where the leader looks for a server to add.
var ErrClientPeer = errors.New("its certificate is a client node's (toolnode tls cert -client), and a client is never a server")

// Dialer connects to peers' cluster ports with the same TLS the Server
// accepts with, and applies the client-node rules before it sends a byte.
type Dialer struct {
	TLS *TLS // nil: plain TCP
	// Connect, when set, replaces connecting and the TLS handshake (tests
	// connect in-process nodes with net.Pipe and Server.ServeConn).
	Connect func(addr string, timeout time.Duration) (net.Conn, error)
	// ClientPeer, when set, is told each address whose certificate was a
	// client node's where a server's was wanted.
	ClientPeer func(addr string)
}

// Dial connects to addr's cluster port, its handshake done, and
// announces proto. A node whose own certificate is a client node's sends
// no Raft; a peer whose certificate is a client node's is hung up on
// before anything is sent for a protocol only a server answers
// (ServerOnly), with an error that wraps ErrClientPeer.
func (d *Dialer) Dial(addr string, proto byte, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	var err error
	if d.Connect != nil {
		c, err = d.Connect(addr, timeout)
	} else {
		c, err = d.TLS.Dial(addr, timeout)
	}
	if err != nil {
		return nil, err
	}
	if proto == ProtoRaft && d.TLS.ClientOnly() {
		c.Close()
		return nil, fmt.Errorf("dial %s: this node's certificate is a client node's; it sends no Raft RPC", addr)
	}
	if ServerOnly(proto) {
		if p := PeerOf(c); p.Role == RoleClient {
			c.Close()
			d.clientPeer(addr)
			return nil, fmt.Errorf("dial %s (%q) for %q: %w", addr, p.Name, proto, ErrClientPeer)
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

// Ping checks that addr's cluster port answers, through the TLS when
// there is one, and that its certificate is not a client node's (an
// error wrapping ErrClientPeer): a node the cluster cannot talk to, or a
// client, must not get a vote.
func (d *Dialer) Ping(addr string, timeout time.Duration) error {
	c, err := d.Dial(addr, ProtoPing, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return fmt.Errorf("no answer from %s: %v", addr, err)
	}
	if b[0] != ProtoPing {
		return fmt.Errorf("%s answered %#x, not a toolnode cluster port", addr, b[0])
	}
	if p := PeerOf(c); p.Role == RoleClient {
		d.clientPeer(addr)
		return fmt.Errorf("%s (%q): %w", addr, p.Name, ErrClientPeer)
	}
	return nil
}

func (d *Dialer) clientPeer(addr string) {
	if d.ClientPeer != nil {
		d.ClientPeer(addr)
	}
}
