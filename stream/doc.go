// Package stream is the ordered change stream that keeps a client's
// replica of the state current without putting the client in Raft (as
// Consul's and Nomad's clients stay out of theirs).
//
// A server (a node in the Raft configuration) runs a Hub: its FSM's
// wrapper publishes every command entry it applies, in log order, and the
// Hub keeps a bounded in-memory window of the recent ones. A client runs
// a Follower: it dials one server's cluster port, says which index its
// replica has applied, and receives
//
//   - a snapshot of the server's state (the FSM's own Snapshot/Persist
//     encoding) when that index is older than the window, then
//   - every committed entry after it (index and the command bytes, as in
//     the Raft log), in order, as the server's FSM applies them, and
//   - a heartbeat every ten seconds when idle, and at once when the
//     status changes, carrying the server's applied index and the
//     cluster's status (the leader, the servers), which is how a client
//     knows where to forward writes. One ticker beats for all of a
//     Hub's subscribers, so an idle server wakes once an interval
//     however many clients follow it, and a client decodes a status
//     only when it differs from the last.
//
// A client leaves a server silent for five heartbeats; the node leaves
// one sooner (Follower.Leave) when gossip calls it failed or left, as a
// partition keeps the connection open and silent. A server cut off from
// the leader alone stays heard but gets no new entries; its heartbeat
// says it has no leader, and a client that has heard that for
// FollowerConfig.Leaderless (5 s, longer than an election) moves to a
// server not left for this in the last 30 s, if there is one; back on
// the server it left, it leaves again at once while that server still
// has no leader.
//
// The stream is resumable from any index, so a client whose server dies
// dials the next one (servers are ranked per client by rendezvous hashing
// of the client's name, which spreads clients over the servers and moves
// only a dead server's clients) and resumes from its last applied index:
// no entry is missed or applied twice. A subscriber that falls further
// behind than the window is closed; it reconnects and gets a snapshot.
//
// The package knows nothing of Raft, raftfsm or the network beyond a
// net.Conn: the node hands it a snapshot function, an apply function and
// a dialer, and carries the connection on its cluster port, under the
// port's authentication (DESIGN §7).
package stream
