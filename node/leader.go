package node

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
)

// reconcileEvery is how often the leader reconciles Raft's configuration
// with gossip when nothing has changed (membership events trigger it at
// once); reconcileRetry, how soon after a round that left work undone.
const (
	reconcileEvery = 5 * time.Second
	reconcileRetry = 500 * time.Millisecond
)

// watchLeadership runs the leader loop while this node leads. It listens
// on raft.Config.NotifyCh, which, unlike LeaderCh, never drops a change.
func (n *Node) watchLeadership(notify <-chan bool) {
	defer n.wg.Done()
	var loop *leaderRun
	defer func() { loop.stop() }()
	for {
		select {
		case <-n.ctx.Done():
			return
		case leading := <-notify:
			n.notices.leading.Store(leading)
			switch {
			case leading && loop == nil:
				loop = n.startLeaderLoop()
			case !leading:
				loop.stop()
				loop = nil
			}
		}
	}
}

// leaderRun is one term's leader loop.
type leaderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (n *Node) startLeaderLoop() *leaderRun {
	ctx, cancel := context.WithCancel(n.ctx)
	r := &leaderRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		n.leaderLoop(ctx)
	}()
	return r
}

// stop ends the loop and waits for it; a nil run is a no-op.
func (r *leaderRun) stop() {
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// leaderLoop, on the leader: wait until every earlier entry is applied,
// then reconcile Raft's configuration with gossip now, on every
// membership change, and periodically (consul's leader loop is the model).
func (n *Node) leaderLoop(ctx context.Context) {
	n.logger.Printf("leading the cluster")
	if err := n.raftNode().Barrier(applyTimeout).Error(); err != nil {
		n.warnf("leader barrier: %v", err)
	}
	n.setKeepVersions(ctx)
	for {
		next := reconcileEvery
		if !n.reconcileMembers() {
			next = reconcileRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-n.reconcile:
		case <-time.After(next):
		}
	}
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

// noteUnreachable logs, once per node and reason, why a node is kept out
// of Raft, and when it is let in after all.
func (n *Node) noteUnreachable(name string, err error) {
	n.unreachMu.Lock()
	defer n.unreachMu.Unlock()
	if n.unreach == nil {
		n.unreach = map[string]string{}
	}
	prev, had := n.unreach[name]
	switch {
	case err == nil && had:
		delete(n.unreach, name)
		n.logger.Printf("reconcile: %s's cluster port answers now", name)
	case err != nil && prev != err.Error():
		n.unreach[name] = err.Error()
		if errors.Is(err, errClientPeer) {
			n.logger.Printf("reconcile: keeping %s out of Raft: %v; it stays a client", name, err)
			return
		}
		n.warnf("reconcile: keeping %s out of Raft: its cluster port does not answer: %v", name, err)
	}
}

// reconcileMembers makes Raft's configuration follow gossip:
//   - alive nodes not in it whose cluster port answers (through mutual
//     TLS when configured) are added: as voters while there are fewer
//     than Config.Voters, else as non-voters while there are fewer live
//     servers than Config.Servers or when the node asks to be a server
//     (-server); the others stay clients (replica.go). Nodes that ask
//     are taken first, then by name;
//   - a node whose cluster address changed is re-added at the new one;
//   - nodes that left are removed;
//   - a dead voter is replaced: a healthy non-voter is promoted and the
//     dead voter demoted, keeping the quorum made of live nodes;
//   - non-voters are promoted while there are fewer voters than wanted;
//   - a node whose certificate is a client node's (toolnode tls cert
//     -client) is never added, and is removed if it is in (it restarted
//     with one): reachable and Raft's dials tell (mux.go).
//
// It reads first and changes Raft only where something differs; each
// change is one configuration entry, and it stops at the first failure.
// It reports whether everything was done; if not, the leader loop tries
// again soon.
func (n *Node) reconcileMembers() (done bool) {
	r := n.raftNode() // the leader's: never nil here
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		n.warnf("reconcile: reading the raft configuration: %v", err)
		return false
	}
	servers := map[string]raft.Server{}
	voters := 0
	for _, s := range f.Configuration().Servers {
		servers[string(s.ID)] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	members := map[string]cluster.Member{}
	for _, m := range n.gossip.Members() {
		members[m.Name] = m
	}
	change := func(what string, fut raft.IndexFuture) bool {
		if err := fut.Error(); err != nil {
			n.warnf("reconcile: %s: %v", what, err)
			return false
		}
		n.logger.Printf("reconcile: %s", what)
		return true
	}
	const wait = 10 * time.Second
	// A node gets a place in Raft only once its cluster port answers us:
	// one that cannot talk to the cluster (wrong TLS CA, a firewall) would
	// count toward the quorum without ever voting.
	done = true
	reachable := func(name, addr string) bool {
		if n.knownClientPeer(addr) {
			return false // a client node's certificate: never a server
		}
		err := n.reachable(addr)
		n.noteUnreachable(name, err)
		if err != nil && !errors.Is(err, errClientPeer) {
			done = false
		}
		return err == nil
	}

	healthy := func(name string) bool {
		m, ok := members[name]
		return ok && m.State == "alive" && !m.Meta.Leaving
	}
	// Servers in all the leader keeps: -servers, at least -voters. A
	// dead server does not count, so a client takes its place; nodes that
	// ask to be servers (-server) are always added.
	wantServers := max(n.cfg.Voters, n.cfg.Servers)
	live := 0
	for name := range servers {
		if name == n.cfg.Name || healthy(name) {
			live++
		}
	}
	// This node's own entry first: a leader restarted on another cluster
	// address (a port the kernel picked) still has its old one in the
	// configuration. The other servers would ask it for votes there in
	// vain, and a member given that address since could not be added
	// ("found duplicate address in configuration").
	if self, ok := servers[n.cfg.Name]; ok && self.Address != n.transport.LocalAddr() {
		if !change("moved this node to "+string(n.transport.LocalAddr()), r.AddVoter(self.ID, n.transport.LocalAddr(), 0, wait)) {
			return false
		}
	}
	for _, m := range serverCandidates(members) {
		name := m.Name
		if m.State != "alive" || m.Meta.Cluster == "" || m.Meta.Leaving || name == n.cfg.Name {
			continue
		}
		s, known := servers[name]
		if !known && voters >= n.cfg.Voters && live >= wantServers && !m.Meta.Want {
			continue // a client: it follows the change stream
		}
		addr := raft.ServerAddress(m.Meta.Cluster)
		if (!known || s.Address != addr) && !reachable(name, m.Meta.Cluster) {
			continue
		}
		switch {
		case !known && voters < n.cfg.Voters:
			if !change("added "+name+" as a voter", r.AddVoter(raft.ServerID(name), addr, 0, wait)) {
				return false
			}
			voters++
			live++
		case !known:
			if !change("added "+name+" as a non-voter", r.AddNonvoter(raft.ServerID(name), addr, 0, wait)) {
				return false
			}
			live++
		case s.Address != addr && s.Suffrage == raft.Voter:
			if !change("moved "+name+" to "+string(addr), r.AddVoter(s.ID, addr, 0, wait)) {
				return false
			}
		case s.Address != addr:
			if !change("moved "+name+" to "+string(addr), r.AddNonvoter(s.ID, addr, 0, wait)) {
				return false
			}
		}
	}

	var spares []raft.Server // healthy non-voters, in configuration order
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter && healthy(string(s.ID)) && reachable(string(s.ID), string(s.Address)) {
			spares = append(spares, s)
		}
	}
	for _, s := range f.Configuration().Servers {
		name := string(s.ID)
		m, seen := members[name]
		if name == n.cfg.Name || !seen {
			continue
		}
		switch {
		case n.knownClientPeer(string(s.Address)):
			// Its node restarted with a client node's certificate: it
			// takes no part in Raft (mux.go), so a place in the
			// configuration would only count toward the quorum.
			if !change("removed "+name+": its certificate is a client node's (toolnode tls cert -client)", r.RemoveServer(s.ID, 0, wait)) {
				return false
			}
			if s.Suffrage == raft.Voter {
				voters--
			}
		case m.State == "left" || (m.State == "alive" && m.Meta.Leaving):
			if !change("removed "+name+", which left", r.RemoveServer(s.ID, 0, wait)) {
				return false
			}
			if s.Suffrage == raft.Voter {
				voters--
			}
		case m.State == "dead" && s.Suffrage == raft.Voter && len(spares) > 0:
			p := spares[0]
			spares = spares[1:]
			if !change("promoted "+string(p.ID)+" to replace the failed voter "+name, r.AddVoter(p.ID, p.Address, 0, wait)) {
				return false
			}
			if !change("demoted the failed voter "+name, r.DemoteVoter(s.ID, 0, wait)) {
				return false
			}
		}
	}
	for ; voters < n.cfg.Voters && len(spares) > 0; voters++ {
		p := spares[0]
		spares = spares[1:]
		if !change("promoted "+string(p.ID)+" to voter", r.AddVoter(p.ID, p.Address, 0, wait)) {
			return false
		}
	}
	return done
}
