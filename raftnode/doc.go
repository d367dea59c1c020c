// Package raftnode holds the parts of a node's Raft host that stand
// apart from the node: where a server is (addr.go: gossip's address of
// a live member before the one Raft's configuration recorded, and the
// recovery of a lost quorum from DATA/raft/peers.json); how the leader
// tells the other servers that
// entries are committed (notice.go: the commit notice, an AppendEntries
// without entries sent through Raft's own transport, with its safety
// argument; nudge.go: the Barrier that is its fallback).
//
// It imports hashicorp/raft, cluster (for gossip's members) and raftfsm
// (a scratch FSM for recovery); a node hands it
// its Raft, its transport and its log store (Config) and calls Committed
// from its FSM, TellCommitted when a forwarded write or a read index
// needs a follower told, and Run while it is open.
package raftnode
