// Package acl owns toolnode's 9P tokens (DESIGN §7): making a token's
// secret, the hash the cluster stores in its place, the rules for token
// names and the names of the roles a token carries, and the tool
// allow-lists (glob patterns) a token or a profile may hold (DESIGN §9).
//
// A token is a name, a role and the SHA-256 of a secret of 32 random
// bytes. Only the hash is replicated (by raftfsm, through Raft): the
// secret is shown once, to whoever made the token, and a node that is
// given it as a 9P attach name hashes it and looks the hash up. So a
// token made on one node works on every node, and a copy of a node's
// data directory holds no secret but the node's own admin.token file.
//
// acl imports nothing of toolnode: raftfsm checks commands with it, node
// makes and checks secrets with it, and p9 keeps its own Role type.
package acl
