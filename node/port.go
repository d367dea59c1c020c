package node

import (
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/clusterport"
)

// The cluster port (package clusterport) carries this node's protocols:
// Raft, forwarded writes (forward.go), routed calls (route.go),
// executables (blobs.go) and the change stream (replica.go); the port
// answers the leader's ping itself.

// DefaultMaxClusterConns bounds the cluster port's concurrent
// connections (Config.MaxClusterConns).
const DefaultMaxClusterConns = clusterport.DefaultMaxConns

// errClientPeer: a peer presented a client node's certificate where only
// a server may answer, or where the leader looks for a server to add.
var errClientPeer = clusterport.ErrClientPeer

// newPort makes the cluster port's server with this node's protocol
// table; Raft's is added where Raft's transport runs over the port
// (startClusterPort).
func (n *Node) newPort() *clusterport.Server {
	s := clusterport.NewServer(clusterport.Config{TLS: n.tls, MaxConns: n.cfg.MaxClusterConns, Logf: n.logger.Printf})
	s.Register(clusterport.ProtoForward, "forwarded writes", func(c net.Conn, _ clusterport.Peer) { n.serveForward(c) })
	s.Register(clusterport.ProtoCall, "routed calls", func(c net.Conn, _ clusterport.Peer) { n.serveCall(c) })
	s.Register(clusterport.ProtoBlob, "executables", func(c net.Conn, _ clusterport.Peer) { n.blobs.Serve(c) })
	s.Register(clusterport.ProtoStream, "change stream", func(c net.Conn, _ clusterport.Peer) { n.serveStream(c) })
	return s
}

// newDialer dials peers with this node's cluster TLS, or Config.Dial.
func (n *Node) newDialer() clusterport.Dialer {
	return clusterport.Dialer{TLS: n.tls, Connect: n.cfg.Dial, ClientPeer: n.noteClientPeer}
}

// ServeClusterConn serves one connection of the cluster port. Tests call
// it to connect in-process nodes with net.Pipe.
func (n *Node) ServeClusterConn(c net.Conn) { n.port.ServeConn(c) }

// reachable checks that a peer's cluster port answers and that its
// certificate is not a client node's: a node the cluster cannot talk to,
// or a client, must not get a vote.
func (n *Node) reachable(addr string) error { return n.dialer.Ping(addr, 2*time.Second) }

// raftLayer is raft's StreamLayer over the cluster port.
type raftLayer struct {
	*clusterport.Listener
	advertise net.Addr
	n         *Node
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func (r *raftLayer) Addr() net.Addr { return r.advertise }

// Accept hands Raft's transport the next Raft connection; the first opens
// Raft on a client that has not (lazyraft.go).
func (r *raftLayer) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err == nil {
		r.n.wantRaft()
	}
	return c, err
}

// Dial connects to a peer's cluster port and announces Raft.
func (r *raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return r.n.dialer.Dial(string(addr), clusterport.ProtoRaft, timeout)
}
