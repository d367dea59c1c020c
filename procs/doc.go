// Package procs sets a node's GOMAXPROCS for its role and its calls.
//
// A client's processors. An idle node's CPU is its wake-ups, and with a
// second processor each event (a gossip tick, a probe, a heartbeat of the
// stream) wakes a second thread besides the one that handles it: the
// runtime starts a spinning thread for the idle processor, which finds
// nothing and sleeps again. A client's own work is gossip, the stream and
// serving 9P; the tools it runs are child processes, which the setting
// does not limit. So an idle client runs on Config.ClientProcs processors.
// A server, which replicates Raft and serves the stream, and a client
// while it runs calls (and callProcsLinger after the last) run on the
// runtime's default: a call's fork, exec and wait are system calls that
// hold a processor, and the rest of the node should not wait for them.
// GOMAXPROCS is the process's, so only a process that runs one node sets
// ClientProcs (cmd/toolnode does, unless $GOMAXPROCS is set).
//
// It imports no package of toolnode.
package procs
