// Package clusterport is toolnode's node-to-node port (DESIGN §7 "Cluster
// port"; docs/security.md, "The cluster port"): one listener, one mux, one
// protocol table, one framing for the messages of its own protocols, the
// pooled connections and the port's limits, and its TLS, set up here and
// nowhere else.
//
//   - TLS (tls.go, keytls.go): mutual TLS against a CA from files
//     (LoadTLS), or TLS 1.3 with certificates derived from the gossip key
//     (KeyTLS); the cluster secret a lone node keys it with (secret.go).
//     A certificate naming tlsutil.ClientRoleURI is a client node's
//     (Peer.Role, RoleClient).
//   - Server (server.go): accepts, completes each handshake under
//     HandshakeTimeout, reads the protocol byte (proto.go) and hands the
//     connection to the Handler registered for it, with the peer its
//     certificate names. It holds at most Config.MaxConns authenticated
//     connections and a quarter of that (at least 16) still in their
//     handshake; it answers ProtoPing itself and refuses ProtoRaft to and
//     from a client node's certificate. Listener hands one protocol's
//     connections to a consumer that accepts them (Raft's transport);
//     RequestDeadline bounds a request once it has begun.
//   - Dialer (dial.go): the same TLS the other way, and the client-node
//     rules: a client node sends no Raft, and nothing is sent for a
//     protocol only a server answers (ServerOnly) to a client node's
//     certificate (ErrClientPeer). Ping is the leader's check before it
//     admits a node.
//   - The codec (codec.go): a 4-byte length and a JSON body, read under a
//     cap and an idle and a body deadline (Limits), never allocated at
//     the size a header announces; errors that cross it keep their kind
//     (ErrorKinds, RemoteError).
//   - Pool (pool.go): idle connections per address, each checked with a
//     peek that does not wait before it is used again (alive_*.go).
//
// What each protocol means (forwarded writes, routed calls, the change
// stream, executables, Raft) belongs to the packages that register it;
// this package imports no other package of toolnode but tlsutil.
package clusterport
