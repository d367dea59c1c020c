package node

import (
	"context"
	"errors"
	"time"

	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/reconcile"
)

// watchLeadership runs the leader loop (package reconcile) while this
// node leads, until the node stops. notify is raft.Config.NotifyCh.
func (n *Node) watchLeadership(notify <-chan bool) {
	defer n.wg.Done()
	reconcile.New(reconcile.Config{
		Name:           n.cfg.Name,
		LocalAddr:      n.transport.LocalAddr(),
		Voters:         n.cfg.Voters,
		Servers:        n.cfg.Servers,
		Raft:           n.raftNode(),
		Members:        func() []cluster.Member { return n.gossip.Members() },
		Trigger:        n.reconcile,
		Probe:          n.probeServer,
		ClientOnly:     n.knownClientPeer,
		OnLeading:      n.commits.SetLeading,
		BarrierTimeout: applyTimeout,
		TermStart:      func(ctx context.Context) { n.rollout.SetKeepVersions(ctx, n.cfg.KeepVersions) },
		Logf:           n.logger.Printf,
		Warnf:          n.warnf,
	}).Watch(n.ctx, notify)
}

// probeServer is the leader's check before it gives the node at addr a
// place in Raft: its cluster port answers (clusterport), and not with a client
// node's certificate.
func (n *Node) probeServer(addr string) error {
	err := n.reachable(addr)
	if errors.Is(err, errClientPeer) {
		return reconcile.ClientPeer(err)
	}
	return err
}

// clientPeerRecheck is how long a cluster address whose certificate was a
// client node's is taken for one before the leader dials it again to
// look (its node may restart with a server's certificate).
const clientPeerRecheck = time.Minute

// noteClientPeer records that addr presented a client node's certificate.
func (n *Node) noteClientPeer(addr string) { n.clientPeers.Store(addr, time.Now()) }

// knownClientPeer reports whether addr presented a client node's
// certificate within clientPeerRecheck.
func (n *Node) knownClientPeer(addr string) bool {
	v, ok := n.clientPeers.Load(addr)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) > clientPeerRecheck {
		n.clientPeers.Delete(addr)
		return false
	}
	return true
}
