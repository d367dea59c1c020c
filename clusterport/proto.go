package clusterport

import (
	"crypto/tls"
	"net"

	"github.com/toolnode/toolnode/tlsutil"
)

// The protocols of the cluster port, told apart by the first byte a
// dialer sends (as consul's RPCType list and rqlite's tcp mux do). A
// Server serves the ones registered on it; Ping it answers itself.
const (
	ProtoRaft    byte = 'R' // hashicorp/raft's NetworkTransport
	ProtoForward byte = 'F' // writes forwarded to the leader
	ProtoCall    byte = 'C' // calls routed to a node that can run the tool
	ProtoBlob    byte = 'B' // an executable asked for by digest
	ProtoStream  byte = 'S' // a client follows a server's change stream
	ProtoPing    byte = 'P' // the leader checks a node's cluster port before admitting it
)

// ServerOnly reports whether only a server may answer proto: Raft, the
// change stream and forwarded writes (which carry callers' tokens, sent
// only to servers). A Dialer hangs up on a client node's certificate for
// these before it sends anything.
func ServerOnly(proto byte) bool {
	return proto == ProtoRaft || proto == ProtoStream || proto == ProtoForward
}

// Role is what a peer's certificate lets it be.
type Role int

const (
	// RoleServer: the peer may be a server: its certificate names no
	// role (mutual TLS with a server's certificate, the gossip key's
	// TLS), or the port is plain TCP.
	RoleServer Role = iota
	// RoleClient: the peer presented a client node's certificate
	// (tlsutil.ClientRoleURI, toolnode tls cert -client).
	RoleClient
)

// Peer is the authenticated other end of a cluster-port connection.
type Peer struct {
	Addr net.Addr
	Role Role
	Name string // the certificate's common name; "" without TLS
}

// PeerOf names the peer of a connection whose handshake is done (Server
// and Dialer complete it first); a connection without TLS has no
// certificate and the role RoleServer.
func PeerOf(c net.Conn) Peer {
	p := Peer{Addr: c.RemoteAddr()}
	tc := tlsConn(c)
	if tc == nil {
		return p
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return p
	}
	p.Name = certs[0].Subject.CommonName
	if tlsutil.IsClient(certs[0]) {
		p.Role = RoleClient
	}
	return p
}

// tlsConn returns the TLS connection under c, or nil.
func tlsConn(c net.Conn) *tls.Conn {
	for {
		switch x := c.(type) {
		case *tls.Conn:
			return x
		case *slotConn:
			c = x.Conn
		case *requestConn:
			c = x.Conn
		default:
			return nil
		}
	}
}
