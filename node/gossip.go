package node

import (
	"strings"
	"time"

	"github.com/toolnode/toolnode/cluster"
)

func (n *Node) startGossip() error {
	g, err := cluster.Start(cluster.Config{
		Name:      n.cfg.Name,
		BindAddr:  n.cfg.GossipAddr,
		Advertise: n.cfg.Advertise,
		Key:       n.cfg.EncryptKey,
		Meta:      n.meta(),
		LogOutput: n.gossipLogOutput(),
		Transport: n.cfg.GossipTransport,

		ReconnectTimeout: n.cfg.ReconnectTimeout,
		CapsChanged:      n.capsChanged,
	})
	if err != nil {
		return err
	}
	n.gossip = g
	n.wg.Add(1)
	go n.watchMembers()
	join := n.cfg.Join
	if len(join) == 0 {
		// A restarted member finds the cluster again through the peers it
		// last knew, in the background: after a restart on new addresses
		// none of them answers, and each costs a dial timeout that must not
		// hold up the start (the others find this node through -join, or
		// through it).
		if peers := n.loadPeers(); len(peers) > 0 {
			go func() {
				if _, err := g.Join(peers); err != nil && n.ctx.Err() == nil {
					n.logger.Printf("none of the last known peers (%s) answered; waiting to be joined", strings.Join(peers, ","))
				}
			}()
		}
		return nil
	}
	if _, err := g.Join(join); err != nil {
		n.logger.Printf("[WARN] join %s: %v; trying again in the background", strings.Join(join, ","), err)
		n.wg.Add(1)
		go n.retryJoin(join)
	}
	return nil
}

// retryJoin tries -join again until one address answers or the node
// stops, as serf's retry_join does: a node started before the members it
// names (a Kubernetes pod before its Service's endpoints, a host booted
// first), or one whose join timed out in a storm of joins, serves alone
// meanwhile, saying so in its log, and joins as soon as it can.
func (n *Node) retryJoin(addrs []string) {
	defer n.wg.Done()
	wait := joinRetryMin
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := n.gossip.Join(addrs); err != nil {
			wait = min(2*wait, joinRetryMax)
			n.logger.Printf("[WARN] join %s: %v; trying again in %s", strings.Join(addrs, ","), err, wait)
			continue
		}
		n.logger.Printf("joined the cluster through %s", strings.Join(addrs, ","))
		return
	}
}

// joinRetryMin and joinRetryMax bound the wait between tries of -join.
const (
	joinRetryMin = time.Second
	joinRetryMax = 30 * time.Second
)

// watchMembers turns membership changes into node+/node- events, tells
// the leader to reconcile, and remembers the peers for a restart
// (cluster.PeerSaves): at the first join at once, then at most every
// cluster.PeersSaveEvery, and once more as the node stops.
func (n *Node) watchMembers() {
	defer n.wg.Done()
	var ps cluster.PeerSaves
	for {
		select {
		case <-n.ctx.Done():
			ps.Flush(n.savePeers)
			return
		case <-ps.Due():
			ps.Flush(n.savePeers)
		case ev := <-n.gossip.Events():
			switch ev.Kind {
			case cluster.NodeJoin:
				n.events.Add("node+", ev.Member.Name)
				ps.Changed(time.Now(), n.savePeers)
			case cluster.NodeLeave:
				n.events.Add("node-", ev.Member.Name)
				// A client following that server leaves it now, not
				// after five heartbeats of silence (a partition keeps
				// the connection open).
				if _, f := n.followerState(); f != nil && ev.Member.Meta.Cluster != "" {
					f.Leave(ev.Member.Meta.Cluster)
				}
			}
			kick(n.reconcile)
		}
	}
}

// kick signals ch without blocking; one pending signal is enough.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// advertise keeps what this node gossips current (what it can run, its
// role) as tools are published and variants re-resolved, and starts
// fetching newly published executables this node does not have.
func (n *Node) advertise() {
	defer n.wg.Done()
	var swept uint64
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.metaKick:
			if n.blobs.TakeRescan() {
				swept = 0
			}
			swept = n.fetchSince(swept)
			n.gossip.SetCapabilities(n.catalog.Caps())
			if err := n.gossip.SetMeta(n.meta()); err != nil {
				n.logger.Printf("gossip: advertising this node: %v", err)
			}
		}
	}
}
