package node

import (
	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/raftnode"
)

// Where a Raft server is, and peers.json recovery: package raftnode
// (addr.go).

// PeersFile is the recovery file in the Raft directory (DATA/raft).
const PeersFile = raftnode.PeersFile

// hostAddr is a cluster address whose host is a name.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

// raftAddrs is the transport's raft.ServerAddressProvider.
func (n *Node) raftAddrs() raftnode.Addrs {
	return raftnode.Addrs{
		Self:      raft.ServerID(n.cfg.Name),
		Transport: func() raft.Transport { return n.transport },
		Members: func() []cluster.Member {
			if n.gossip == nil {
				return nil
			}
			return n.gossip.Members()
		},
		Raft: n.raftNode,
	}
}

// recoverPeers recovers Raft from DATA/raft/peers.json when it exists
// (raftnode.RecoverPeers).
func (n *Node) recoverPeers(rc *raft.Config, snaps raft.SnapshotStore) error {
	servers, err := raftnode.RecoverPeers(n.raftDir(), rc, n.logs, n.store.Stable(), snaps, n.transport)
	if err != nil || servers == nil {
		return err
	}
	n.logger.Printf("[WARN] raft: recovered with the servers of %s: %v (the file is now %s.done)", n.raftDir()+"/"+PeersFile, servers, PeersFile)
	return nil
}
