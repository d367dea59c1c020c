// Package node is toolnode's composition root. It wires the replicated
// state (raftfsm under hashicorp/raft, durable in the data directory),
// gossip membership (cluster), the host-local catalog and execution
// (registry) and the 9P tree (p9), and owns their start and stop order.
//
// The node implements p9.Backend: every write becomes a Raft command
// (forwarded to the leader from a follower, forward.go; retried while
// certainly not applied, or, since every command but load and unload is
// proposed as a request with an id that the FSM applies once, when its
// answer was lost, retry.go), every read is served from this node's FSM
// and its own view of which tools this host can run (package catalog). A
// follower's read of agent state and its session listings first check
// the leader's index (readindex.go); loads, unloads and creates of
// sessions and agents through a follower are answered once the leader
// has committed them, and the follower's walks to a name it lacks wait
// until it has applied every write acknowledged through it (appliedLater,
// WalkSession); after each batch of commits the leader tells every
// other server, and the follower that forwarded a write or asked for its
// index, that the entry is committed with a commit notice, an
// AppendEntries of its own without entries (package raftnode; the broadcast is
// left out when another entry, which tells them too, follows within
// 2 ms), so they apply it without waiting for Raft's CommitTimeout,
// which is only a fallback (250 ms). The leader answers a forward first,
// then sends its notice; notices to one server coalesce while one is in
// flight. Raft's
// log is raft-wal behind a cache of its recent entries (raftlog),
// which the leader reads back to replicate and a follower to apply. It
// publishes the tools and agent profiles of its
// own directories (publish.go) and of writes into t/ and a/
// (publish9p.go); on the leader it keeps Raft's membership in step with
// gossip (package reconcile); it runs a call here when this host can,
// else on a node that can (route.go). Executables are not in the log: a command
// names one by digest and size, the node that publishes it keeps the bytes
// in its blob store (blobstore, DATA/blobs), and every other node fetches
// them over the cluster port, from the publisher first, checked against
// the digest; a call waits for a missing one, bounded, and blobs no tool
// refers to are collected after a grace period (package blobs). The cluster
// port (package clusterport: its mux, protocol table, codec, connection
// pool, limits and TLS) carries Raft, forwarded writes, routed calls,
// executables, the change stream and the leader's reachability check;
// port.go registers this node's protocols on it and runs Raft's stream
// layer over its Raft protocol. A node
// refuses ports that leave loopback without their credential (ports.go).
// A node in Raft's configuration is a server: Raft feeds its FSM and its
// stream.Hub serves the change stream of what the FSM applies (protocol
// byte 'S'); any other node is a client whose stream.Follower feeds the
// same FSM from a server, and whose writes go to the leader the stream
// names (replica.go). A node that joins with no Raft state opens Raft
// only when the leader's first Raft request reaches it (lazyraft.go): a
// client that is never added spends nothing on Raft. The leader keeps
// -voters voters and -servers servers in all, taking nodes that ask
// (-server) first (reconcile). With Config.ClientProcs a client runs on
// that many processors, from the start when it joins with no Raft state,
// and a server on the runtime's default (package procs). It remembers the
// gossip addresses of its members in DATA/peers.json, to rejoin them
// after a restart: at the first join at once, then at most every few
// seconds and at stop (cluster.PeerSaves).
// It checks 9P attaches against the tokens in its FSM,
// serves token/, ends a revoked token's connections and makes its own
// admin token at first start (tokens.go). With Config.AuditFile, every
// 9P fid is served through a Backend that records its state changes and
// calls with the fid's principal, and the node records its own
// publications and the calls routed to it (audit.go). A call is checked
// before it runs (Node.StartCall, p9.CallStarter: agent, tool, arguments
// against the schema, cwd, executable), so the 9P write answers while the
// tool runs and the read waits for its end (backend.go). Calls run here
// pass a first-come, first-served queue of -max-calls slots;
// a session's cwd obeys the rules of DESIGN §7, checked where the
// session is made and again where each call runs (both in package calls).
// It tells the runner what tools may not read and checks
// a published executable's digest before each run (sandbox.go).
// With -9p-tls-cert and -9p-tls-key the 9P listener speaks TLS 1.3, each
// handshake beside the accept loop under a deadline (package p9's
// LoadTLS and NewTLSListener).
// With -mcp it serves MCP over Streamable HTTP through package
// mcpserve, as its mcpserve.Host: the sessions' 9P connections are
// served by its own 9P server, their tokens checked against its FSM,
// their refusals audited, and a revoked token's toolnode sessions
// removed (mcp.go).
//
// Start order (New): the directories are watched, then the tools
// directory is read in the background while the cluster port opens and
// (unless the node joins with no Raft state) Raft opens its log,
// restores its snapshot and (a lone voter) elects itself at once; a
// restarted lone voter then waits on a Barrier until the log it found is
// applied. The catalog ignores the FSM's updates meanwhile and is built
// once after, on parallel workers, with the parses of that read. A
// leader then publishes only what differs from the state it holds (in
// batches proposed together) before 9P serves, so the tree is complete
// from its first read. Each step is logged at debug level ("start: ...",
// startlog.go).
//
// Every write forwarded to the leader carries the principal it is made
// for (the caller's token, anon@IP, or node:NAME for this node's own
// directories); the leader authorizes it with package fwdauth before it
// appends it, and audits it as that principal via the forwarding node.
// Every publish is the tool's next version (raftfsm), served in v/;
// once trust/ holds a key, a publish must be signed by one, and this
// node checks the signature of what it lists and runs against the keys
// trusted now (trust.go).
//
// Only node sees every other package; which package imports which is
// drawn in docs/layout.md.
package node
