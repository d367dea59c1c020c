package node

import (
	"encoding/json"
	"os"
	"time"
)

// DATA/peers.json holds the gossip addresses of the members this node last
// saw alive: a node restarted without -join joins them again (and, having
// been in a cluster, does not bootstrap one of its own; node.go joins).
//
// Every join a node hears of changes the list, and while N nodes form a
// cluster each hears N joins: rewriting the file at each (a write and a
// rename, ~1 ms of CPU on a loaded host) would be N² writes across the
// cluster, ~10 % of a client's start at N=50. The file is written at the first
// join at once, so that a node killed right after it joined still knows
// it has been in a cluster; later changes at most every peersSaveEvery,
// and whatever is pending once more as the node stops.

// peersSaveEvery bounds how often DATA/peers.json is rewritten.
const peersSaveEvery = 5 * time.Second

// peerSaves decides when the members' addresses are written. It is used by
// one goroutine (watchMembers) and holds no lock.
type peerSaves struct {
	last  time.Time        // the last write; zero: none yet
	dirty bool             // a change since the last write
	timer <-chan time.Time // the pending write, nil: none
}

// changed records a change of the members and writes at once when no
// write happened in the last peersSaveEvery. save reports whether it
// wrote (a node's own join, the first event, has nothing to write).
func (p *peerSaves) changed(now time.Time, save func() bool) {
	p.dirty = true
	if p.last.IsZero() || now.Sub(p.last) >= peersSaveEvery {
		p.write(now, save)
		return
	}
	if p.timer == nil {
		p.timer = time.After(p.last.Add(peersSaveEvery).Sub(now))
	}
}

// due fires when a coalesced write is due (nil, which never fires, when
// none is pending).
func (p *peerSaves) due() <-chan time.Time { return p.timer }

// flush writes a pending change now.
func (p *peerSaves) flush(save func() bool) {
	p.timer = nil
	if p.dirty {
		p.write(time.Now(), save)
	}
}

func (p *peerSaves) write(now time.Time, save func() bool) {
	p.timer = nil
	if save() {
		p.dirty, p.last = false, now
	}
}

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
	b, _ := json.Marshal(addrs)
	tmp := n.peersFile() + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, n.peersFile())
	}
	if err != nil {
		n.logger.Printf("remembering the peers in %s: %v", n.peersFile(), err)
		return false
	}
	return true
}

func (n *Node) loadPeers() []string {
	b, err := os.ReadFile(n.peersFile())
	if err != nil {
		return nil
	}
	var addrs []string
	if json.Unmarshal(b, &addrs) != nil {
		n.logger.Printf("ignoring unreadable %s", n.peersFile())
		return nil
	}
	return addrs
}
