// Package node is toolnode's composition root. It wires the replicated
// state (raftfsm under hashicorp/raft, durable in the data directory),
// gossip membership (cluster), the host-local catalog and execution
// (registry) and the 9P tree (p9), and owns their start and stop order.
//
// The node implements p9.Backend: every write becomes a Raft command,
// every read is served from this node's FSM and its own view of which
// tools this host can run. The node also publishes the tools and agent
// profiles of its own directories, watched with fsnotify, into the
// replicated state.
//
// Only node sees every other package; the others stay ignorant of each
// other (registry ← raftfsm; p9 and cluster stand alone).
package node
