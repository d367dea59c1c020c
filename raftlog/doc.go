// Package raftlog owns a node's durable Raft log and stable store: a
// raft-wal write-ahead log in DATA/raft/wal (segment files and a meta
// database holding the segment list and Raft's term and vote), behind a
// cache of its most recent entries (cache.go).
//
// A Store is opened once per Raft instance and closed after Raft's
// Shutdown returns, since Raft may write to it until then. Closing it
// releases the meta database's file lock, so the same directory can be
// opened again in the same process (a restarted node in a test, or a
// client promoted to server).
package raftlog
