// Package reconcile keeps Raft's membership in step with gossip, on the
// leader (DESIGN §4 "Replication"). It owns which nodes are servers:
//
//   - alive nodes not in Raft's configuration whose cluster port answers
//     are added, as voters while there are fewer than -voters, then as
//     non-voters while there are fewer live servers than -servers or when
//     the node asks to be a server (-server); the others stay clients.
//     Nodes that ask are taken first, then by name, so the choice is the
//     same whichever node leads;
//   - a node whose cluster address changed is re-added at the new one,
//     the leader's own entry first;
//   - nodes that left are removed;
//   - a dead voter is replaced: a healthy non-voter is promoted, then the
//     dead voter demoted, so the quorum stays made of live nodes;
//   - non-voters are promoted while there are fewer voters than -voters;
//   - a node whose certificate is a client node's is never added, and is
//     removed if it is in.
//
// Plan is the decision: from Raft's configuration and the gossip members
// it yields the changes to make, in order, asking Peers only whether an
// address may be added (a client node's certificate seen lately, its
// cluster port answering). Leader applies a plan on Raft one
// configuration entry at a time, stopping at the first failure, and runs
// the leader loop: for each term, a Barrier and the node's own first
// step (Config.TermStart), then a round at once, on every trigger and
// periodically. It logs each change, and once per node
// and reason why a node is kept out.
//
// reconcile knows Raft through the Raft interface (*raft.Raft's public
// API) and the node through Config's values and funcs; of toolnode it
// imports only cluster, for Member.
package reconcile
