package node

import "github.com/toolnode/toolnode/cluster"

// savePeers writes the alive members' gossip addresses to
// DATA/peers.json; false when there was nothing to write (no other
// member yet) or the write failed.
func (n *Node) savePeers() bool {
	var addrs []string
	for _, m := range n.gossip.Members() {
		if m.Name != n.cfg.Name && m.State == "alive" {
			addrs = append(addrs, m.Addr)
		}
	}
	if len(addrs) == 0 {
		return false
	}
	if err := cluster.SavePeers(n.peersFile(), addrs); err != nil {
		n.logger.Printf("remembering the peers in %s: %v", n.peersFile(), err)
		return false
	}
	return true
}

// loadPeers reads DATA/peers.json; an unreadable one is logged and
// ignored.
func (n *Node) loadPeers() []string {
	addrs, err := cluster.LoadPeers(n.peersFile())
	if err != nil {
		n.logger.Printf("ignoring the last known peers: %v", err)
	}
	return addrs
}
