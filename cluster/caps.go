package cluster

import (
	"bytes"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Caps is what a host can run: tool name → index of the variant that
// matched on it (-1 for a tool without variants).
type Caps map[string]int

// Capable is a live node that can run a tool.
type Capable struct {
	Node    string
	Variant int  // the variant that matched on its host; -1 = the tool has none
	Meta    Meta // what the node advertises
}

// TombstoneTTL is how long a removed tool is remembered as removed. Past
// it the tombstone is dropped; should a stale copy of the entry come back
// from a lagging peer, its owner answers it with a newer tombstone.
const TombstoneTTL = time.Hour

// How capabilities travel.
const (
	// maxBroadcast is the size of the largest gossiped message: one fits in
	// a gossip packet next to memberlist's own messages.
	maxBroadcast = 1024
	// maxBroadcastMsgs: a change that takes more messages than this is not
	// gossiped but sent to each live member over memberlist's reliable
	// stream, as gossip would take seconds to carry it (a gossip packet
	// holds one message, and a round comes every DefaultGossipInterval:
	// three messages took 2 s to reach four nodes).
	maxBroadcastMsgs = 2
	// maxQueued bounds the broadcast queue; what it sheds, push/pull brings.
	maxQueued = 4096
	// retransmitMult is memberlist's RetransmitMult for our broadcasts. Each
	// node that learns from a delta passes it on; with memberlist's 4, in a
	// cluster of five a delta misses a node about once in a thousand (it is
	// then left to push/pull, up to 30 s later); with 6, once in 60,000.
	retransmitMult = 6
	// syncParallel bounds the direct sends in flight.
	syncParallel = 8
)

// entry is what a node's table holds for one tool of one node.
type entry struct {
	version uint64 // set by the owning node; higher wins
	variant int
	gone    bool  // a tombstone: the host can no longer run the tool
	at      int64 // when this node stored it (unix ns), to expire tombstones; not sent
}

// newer reports whether a supersedes b. Equal versions (only ever from a
// confused owner) are ordered by content, so that every node picks the same.
func newer(a, b entry) bool {
	if a.version != b.version {
		return a.version > b.version
	}
	if a.gone != b.gone {
		return a.gone
	}
	return !a.gone && a.variant > b.variant
}

// sameFacts reports whether a and b say the same, whatever their versions.
func sameFacts(a, b entry) bool {
	return a.gone == b.gone && (a.gone || a.variant == b.variant)
}

// SetCapabilities replaces this node's capabilities. What changed is
// gossiped at once (a large change is sent to each live member directly);
// the whole table also goes with every push/pull. Tools with an empty name
// are ignored. Cheap when nothing changed.
func (c *Cluster) SetCapabilities(caps Caps) {
	c.mu.Lock()
	own := c.caps[c.name]
	if own == nil {
		own = map[string]entry{}
		c.caps[c.name] = own
	}
	var delta []wireEntry
	var version uint64
	now := time.Now().UnixNano()
	set := func(tool string, e entry) {
		if version == 0 {
			version = c.nextVersionLocked(0)
		}
		e.version, e.at = version, now
		own[tool] = e
		delta = append(delta, wireEntry{tool, e})
	}
	for tool, v := range caps {
		cur, ok := own[tool]
		if tool == "" || ok && !cur.gone && cur.variant == v {
			continue
		}
		set(tool, entry{variant: v})
	}
	for tool, cur := range own {
		if _, ok := caps[tool]; !ok && !cur.gone {
			set(tool, entry{gone: true})
		}
	}
	c.mu.Unlock()
	sort.Slice(delta, func(i, j int) bool { return delta[i].tool < delta[j].tool })
	if len(delta) > 0 {
		tools := make([]string, len(delta))
		for i, we := range delta {
			tools[i] = we.tool
		}
		c.tell(tools)
	}
	c.announce(delta)
}

// tell passes tools to Config.CapsChanged.
func (c *Cluster) tell(tools []string) {
	if c.changed != nil && len(tools) > 0 {
		c.changed(tools)
	}
}

// Capable lists the nodes that can run tool and are alive (this node
// included), sorted by name, with the variant each matched and its Meta.
// A node memberlist calls dead, or one that is leaving, is never listed.
func (c *Cluster) Capable(tool string) []Capable {
	var out []Capable
	c.mu.Lock()
	for node, tbl := range c.caps {
		e, ok := tbl[tool]
		if !ok || e.gone {
			continue
		}
		var meta Meta
		if node == c.name {
			meta = c.meta
		} else {
			t, ok := c.members[node]
			if !ok || t.m.State != "alive" {
				continue
			}
			meta = t.m.Meta
		}
		if meta.Leaving {
			continue
		}
		out = append(out, Capable{Node: node, Variant: e.variant, Meta: meta})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Capabilities returns a copy of what a node (this one or another, alive
// or not) can run, as far as this node knows; false when it knows nothing
// of that node. For this node it is always true.
func (c *Cluster) Capabilities(node string) (Caps, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tbl, ok := c.caps[node]
	if !ok && node != c.name {
		return nil, false
	}
	out := Caps{}
	for tool, e := range tbl {
		if !e.gone {
			out[tool] = e.variant
		}
	}
	return out, true
}

// nextVersionLocked stamps a new version for this node's entries: later
// than any it issued and than above, and from the clock so that it keeps
// rising across restarts.
func (c *Cluster) nextVersionLocked(above uint64) uint64 {
	v := uint64(time.Now().UnixNano())
	v = max(v, c.lastVersion+1, above+1)
	c.lastVersion = v
	return v
}

// merge folds entries from another node into the table. It returns how
// many taught this node something, and the entries this node issues to
// contradict stale news about itself.
func (c *Cluster) merge(groups []group) (news int, refute []wireEntry) {
	var changed []string
	defer func() { c.tell(changed) }() // after the unlock below
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range groups {
		if g.node == c.name {
			for _, we := range g.entries {
				if r, ok := c.refuteLocked(we, now); ok {
					refute = append(refute, r)
				}
			}
			continue
		}
		for _, we := range g.entries {
			tbl := c.caps[g.node]
			if tbl == nil {
				tbl = map[string]entry{}
				c.caps[g.node] = tbl
			}
			if cur, ok := tbl[we.tool]; !ok || newer(we.e, cur) {
				if !ok && !we.e.gone || ok && !sameFacts(we.e, cur) {
					changed = append(changed, we.tool)
				}
				we.e.at = now
				tbl[we.tool] = we.e
				news++
			}
		}
	}
	return news, refute
}

// refuteLocked handles news about this node from elsewhere: only this
// node writes its entries, so a newer one that says what this node holds
// is adopted, and one that says otherwise (left by an earlier run of this
// node, say) is answered with a newer entry saying what is true.
func (c *Cluster) refuteLocked(we wireEntry, now int64) (wireEntry, bool) {
	own := c.caps[c.name]
	if own == nil {
		own = map[string]entry{}
		c.caps[c.name] = own
	}
	cur, have := own[we.tool]
	if have && !newer(we.e, cur) {
		return wireEntry{}, false
	}
	truth := cur
	if !have {
		truth = entry{gone: true}
	}
	if sameFacts(we.e, truth) {
		we.e.at = now
		own[we.tool] = we.e
		c.lastVersion = max(c.lastVersion, we.e.version)
		return wireEntry{}, false
	}
	truth.version, truth.at = c.nextVersionLocked(we.e.version), now
	own[we.tool] = truth
	return wireEntry{we.tool, truth}, true
}

// gcLocked drops the tombstones older than TombstoneTTL, and the tables
// left empty (except this node's).
func (c *Cluster) gcLocked(now int64) {
	for node, tbl := range c.caps {
		for tool, e := range tbl {
			if e.gone && now-e.at > int64(TombstoneTTL) {
				delete(tbl, tool)
			}
		}
		if len(tbl) == 0 && node != c.name {
			delete(c.caps, node)
		}
	}
}

// announce spreads this node's new entries: by gossip when they fit in a
// few messages, else directly to every live member.
func (c *Cluster) announce(delta []wireEntry) {
	if len(delta) == 0 {
		return
	}
	msgs, ok := splitDelta(c.name, delta, maxBroadcast)
	if !ok || len(msgs) > maxBroadcastMsgs {
		c.requestSync("")
		return
	}
	c.gossipMsgs(msgs...)
}

// gossipMsgs queues msgs to gossip, keeping at most maxQueued; the next
// gossip round takes them.
func (c *Cluster) gossipMsgs(msgs ...[]byte) {
	for _, m := range msgs {
		c.bq.QueueBroadcast(broadcast(m))
	}
	c.bq.Prune(maxQueued)
}

// notifyMsg takes a message from another node: a gossiped delta, which it
// passes on when it taught this node something, or a node's own entries
// sent directly.
func (c *Cluster) notifyMsg(buf []byte) {
	kind, groups, err := decode(buf)
	if err != nil {
		c.logger.Printf("cluster: ignoring an unreadable capabilities message (%d bytes): %v", len(buf), err)
		return
	}
	news, refute := c.merge(groups)
	if kind == msgDelta && news > 0 && len(buf) <= maxBroadcast {
		c.gossipMsgs(bytes.Clone(buf))
	}
	c.announce(refute)
}

// localState is the whole table, for push/pull.
func (c *Cluster) localState() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gcLocked(time.Now().UnixNano())
	nodes := make([]string, 0, len(c.caps))
	for node, tbl := range c.caps {
		if len(tbl) > 0 {
			nodes = append(nodes, node)
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	sort.Strings(nodes)
	b := []byte{msgState}
	for _, node := range nodes {
		b = appendGroup(b, node, sortedEntries(c.caps[node]))
	}
	return b
}

// mergeRemoteState takes another node's whole table, from push/pull.
func (c *Cluster) mergeRemoteState(buf []byte) {
	if len(buf) == 0 {
		return
	}
	_, groups, err := decode(buf)
	if err != nil {
		c.logger.Printf("cluster: ignoring unreadable capabilities from push/pull (%d bytes): %v", len(buf), err)
		return
	}
	_, refute := c.merge(groups)
	c.announce(refute)
}

func sortedEntries(tbl map[string]entry) []wireEntry {
	out := make([]wireEntry, 0, len(tbl))
	for tool, e := range tbl {
		out = append(out, wireEntry{tool, e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tool < out[j].tool })
	return out
}

// requestSync asks the sync loop to send this node's entries to a member
// ("" = every live member).
func (c *Cluster) requestSync(node string) {
	c.mu.Lock()
	if node == "" {
		c.syncAll = true
	} else {
		c.syncTo[node] = true
	}
	c.mu.Unlock()
	wake(c.kick)
}

// syncLoop sends this node's entries directly to the members asked for,
// over memberlist's reliable stream, until Shutdown. Requests made while
// it sends are served together in the next round.
func (c *Cluster) syncLoop() {
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		msg, targets := c.syncTargets()
		var wg sync.WaitGroup
		sem := make(chan struct{}, syncParallel)
		for _, n := range targets {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := c.ml.SendReliable(n, msg); err != nil {
					c.logger.Printf("cluster: sending capabilities to %s: %v", n.Name, err)
				}
			})
		}
		wg.Wait()
	}
}

// syncTargets takes the pending sync requests: this node's entries, and
// the live members to send them to.
func (c *Cluster) syncTargets() ([]byte, []*memberlist.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all, to := c.syncAll, c.syncTo
	c.syncAll, c.syncTo = false, map[string]bool{}
	var targets []*memberlist.Node
	for name, t := range c.members {
		if name == c.name || t.m.State != "alive" || !all && !to[name] {
			continue
		}
		host, port, err := splitHostPort(t.m.Addr)
		if ip := net.ParseIP(host); err == nil && ip != nil {
			targets = append(targets, &memberlist.Node{Name: name, Addr: ip, Port: uint16(port)})
		}
	}
	if len(targets) == 0 {
		// Asked to tell every member with none to tell (a node that set
		// a table too large to gossip before its first join): kept for
		// the join (Join), or the members would learn it only from
		// push/pulls with random peers.
		c.syncAll = all
		return nil, nil
	}
	return appendGroup([]byte{msgState}, c.name, sortedEntries(c.caps[c.name])), targets
}

// aliveCount is the number of live members, for the retransmit limit.
func (c *Cluster) aliveCount() int {
	n := 0
	c.mu.Lock()
	for _, t := range c.members {
		if t.m.State == "alive" {
			n++
		}
	}
	c.mu.Unlock()
	return max(n, 1)
}

// broadcast is one gossiped message; none replaces another (a newer entry
// wins on arrival anyway).
type broadcast []byte

var _ memberlist.UniqueBroadcast = broadcast(nil)

func (b broadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b broadcast) Message() []byte                       { return b }
func (b broadcast) Finished()                             {}
func (b broadcast) UniqueBroadcast()                      {}
