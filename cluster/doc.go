// Package cluster owns gossip membership: it runs hashicorp/memberlist,
// joins and leaves, turns membership changes into events for the node, and
// carries each node's small advertised facts (its cluster and 9P
// addresses, whether it is a Raft server) in memberlist node meta. Each
// change of meta is an alive message every node passes on, so meta holds
// only what rarely changes.
//
// It also spreads capabilities: which tools each node's host can run, and
// which variant matched there (caps.go). Node meta is capped at 512 bytes,
// so they travel beside it. Each node keeps a table node → tool → entry,
// and writes only its own entries, each stamped with a version from its
// clock that never goes back; a higher version wins everywhere, and a
// removed tool stays as a tombstone for TombstoneTTL. SetCapabilities
// gossips what changed at once, in messages of at most 1 KB that every
// node which learns from them passes on (gossip runs every
// DefaultGossipInterval, 500 ms, on the probes' grid, to DefaultGossipNodes,
// six nodes, so a change reaches a LAN cluster of a hundred nodes in
// about 0.9 s, BenchmarkBroadcastSpread); a change too large
// for a few messages, and a node's entries for a node that comes back
// from the dead, go directly over memberlist's reliable stream instead.
// The whole table goes with every push/pull, so a joining node learns it
// all from its first peer (and what that peer lacked from the settling
// push/pulls of its first 30 s), and whatever gossip lost is mended. A node that hears
// stale news about itself (from its own earlier run) answers it with a
// newer entry. Capable lists only members alive in this package's member
// table, so a node memberlist calls dead, or one leaving, is never chosen.
// The wire format is in wire.go.
//
// An idle node is mostly memberlist's timers (cluster.go, "memberlist's
// timers"): a gossip round every DefaultGossipInterval and a probe of a
// member every DefaultProbeInterval, on every node whatever its role.
//
// Messages go uncompressed (Config.Compress turns memberlist's LZW back
// on): memberlist compresses each message with a fresh 64 KiB table, and
// gossip fills a datagram before compressing it, so on a LAN compression
// cost CPU and bought nothing. Compressed messages are read either way.
//
// It heals partitions (reconnect.go): memberlist forgets a dead node
// after GossipToTheDeadTime and never contacts it again, so this package
// keeps every failed (not departed) member with its address and, as serf
// does, joins one of them at random every ReconnectInterval until
// ReconnectTimeout has passed since it failed.
//
// It knows nothing of Raft or 9P: the node reads Members, Events and
// Capable and decides what they mean for the replicated state and for
// routing calls.
//
// A node remembers its members' gossip addresses in a peers file
// (SavePeers, LoadPeers), written at most every PeersSaveEvery while a
// cluster forms (PeerSaves), to join them again after a restart.
package cluster
