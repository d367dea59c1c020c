// Package raftfsm is toolnode's replicated state machine: the commands the
// cluster agrees on, the function that applies each one, and the snapshot
// and restore of the whole state.
//
// The state is the cluster's catalog (published tool metadata, the digest,
// size and mode of published executables, agent profiles), every tool's
// kept versions (versions.go: each publish is the tool's next version,
// with its publisher and time; a rollback copies a kept one; the newest
// -keep-versions are kept, the leader's value holding), the pending
// canaries (canary.go: a tool's next publish live only on named nodes
// until promoted or aborted, with the outcomes its nodes report), the
// trusted publisher keys (trust.go: every change after the first key, and every
// publish once a key is trusted, is refused by Apply itself unless a
// trusted key's SSH signature over its manifest verifies) and its agents
// (sessions, agents, loaded sets, revisions). Executable bytes are not in
// the log or the state: a command names an executable by its SHA-256 and
// size, and nodes keep and fetch the bytes outside Raft. Validate refuses
// a command naming a size over the leader's -max-exec-size
// (ValidateLimits). A snapshot records its format (SnapshotFormat);
// Restore refuses one of a format this build does not know, naming it.
// It follows hashicorp/raft's FSM contract:
//
//   - Apply is deterministic: it reads nothing but the log entry and the
//     state (no clock, no randomness, no host look-ups, no map iteration
//     order that reaches the state). Values such as creation times are
//     stamped into the command by the node that proposes it.
//   - Snapshot only captures (records are immutable once stored, so a
//     shallow copy of the maps is a consistent point-in-time view, but
//     for each session's map of agents, changed in place so that making
//     an agent costs the same in a session of ten thousand; Snapshot
//     copies those); Persist does the encoding and I/O.
//   - Restore discards all previous state.
//
// A command is one type byte followed by a JSON body (commands.go). The
// leader checks each one with Validate before it appends it (validate.go:
// a known type, a body that decodes strictly, valid names, origins,
// hashes, modes and sizes), so an invalid command is refused to its sender
// and never committed. Apply never panics: an entry it cannot decode or
// apply all the same (an unknown type, a forged or corrupt entry) is
// skipped with one log line and an error value, the same way on every
// node, so nothing in the log can stop a node. A command that is
// well-formed but refused (loading a tool the cluster does not know)
// returns an error value through the Raft future and changes nothing.
//
// A command may come wrapped in a request with its proposer's id
// (dedupe.go): the first entry with an id is applied, and later ones with
// the same id answer its recorded result and change nothing, so a write
// whose answer was lost can be proposed again. The record of ids is part
// of the state: bounded, kept in log order, in snapshots.
//
// raftfsm knows registry's rules for names but nothing of the network, 9P or
// the host: variant resolution and execution belong to registry and node.
package raftfsm
