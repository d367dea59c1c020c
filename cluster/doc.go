// Package cluster owns gossip membership: it runs hashicorp/memberlist,
// joins and leaves, turns membership changes into events for the node, and
// carries each node's small advertised facts (its cluster and 9P
// addresses, how many tools its host can run) in memberlist node meta.
//
// It knows nothing of Raft or 9P: the node reads Members and Events and
// decides what they mean for the replicated state.
package cluster
