package node

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// A client opens Raft only when the leader adds it (DESIGN §4: servers
// and clients). Most nodes of a large cluster are clients and never
// become servers; for them Raft's log (raft-wal: a segment file and a
// bolt store, created and synced), its snapshot store and its goroutines
// are start-up work and wake-ups for nothing. So a node that joins with
// no Raft state on disk starts with the cluster port alone: Raft's
// transport listens on it, and the first Raft connection to arrive (the
// leader's first AppendEntries once it has added this node) opens the
// log and starts Raft, which then answers the request that woke it. The
// leader waits meanwhile as for any slow follower. Until then the node
// is a client like any other: its FSM is fed by the change stream.
//
// A node that has Raft state, bootstraps, or runs on a transport given in
// its Config (the in-memory tests) opens Raft at start, as before.

// raftNode is this node's Raft, nil while it has not opened it.
func (n *Node) raftNode() *raft.Raft { return n.raftp.Load() }

// leading reports whether this node's Raft is the leader.
func (n *Node) leading() bool {
	r := n.raftNode()
	return r != nil && r.State() == raft.Leader
}

// raftStateOnDisk reports whether dir holds anything of Raft's: a log, a
// meta store or a snapshot. It reads directory listings only; the stores
// themselves are opened by openRaft, which then asks Raft.
func raftStateOnDisk(dir string) bool {
	for _, d := range []string{filepath.Join(dir, "wal"), filepath.Join(dir, "snapshots")} {
		if es, err := os.ReadDir(d); err == nil && len(es) > 0 {
			return true
		}
	}
	return false
}

// wantRaft is called for each Raft connection this node accepts: on a
// client that has not opened Raft, it opens it in the background. Raft's
// transport holds the request until Raft consumes it.
func (n *Node) wantRaft() {
	if !n.raftLazy.Load() || n.raftNode() != nil {
		return
	}
	n.raftMu.Lock()
	defer n.raftMu.Unlock()
	if n.raftLate || n.raftNode() != nil || n.ctx.Err() != nil {
		return
	}
	n.raftLate = true
	n.wg.Add(1)
	go n.openRaftLate()
}

// openRaftLate opens Raft on a client the leader contacts. Close waits
// for it (raftMu, then the node's WaitGroup). One that fails is tried
// again at the leader's next connection.
func (n *Node) openRaftLate() {
	defer n.wg.Done()
	n.raftMu.Lock()
	defer n.raftMu.Unlock()
	if n.ctx.Err() != nil {
		return
	}
	if err := n.openRaft(true); err != nil {
		n.logger.Printf("[ERROR] raft: opening Raft for the leader: %v; trying again at its next request", err)
		n.closeRaftStores()
		n.raftLate = false
		return
	}
	kick(n.metaKick)
}

// closeRaftStores closes Raft's log and meta store, if open.
func (n *Node) closeRaftStores() {
	if n.store != nil {
		n.store.Close()
		n.store = nil
	}
}
