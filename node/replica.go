package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/stream"
	"github.com/toolnode/toolnode/tlsutil"
)

// Servers and clients (DESIGN §4). A node whose name is in Raft's
// configuration is a server: Raft feeds its FSM, and its Hub serves the
// change stream of what the FSM applies. Any other node is a client: a
// stream.Follower feeds the same FSM from a server's stream, so the node
// serves the same tree from a full local replica, and forwards writes to
// the leader the stream names. A client that joined with no Raft state
// has not opened Raft (lazyraft.go); one restarted on Raft state has, idle
// (in no configuration, it neither votes nor campaigns). Either way a
// client the leader adds to Raft becomes a server without a restart: the
// leader's first request opens Raft if need be, and the role loop sees the
// node in the configuration and stops following.
//
// One FSM, two feeds: feedMu orders them. Raft's feed marks the FSM as
// Raft's (raftFed) and the stream's feed stops when it sees that; an
// entry at or below the FSM's index has been applied from the stream
// already (the same log) and is skipped, so a client that becomes a
// server, replicated from the start of the log or from a snapshot, never
// applies an entry twice. A server taken out of the configuration hands
// its FSM back to the stream.

// roleEvery is how often a server checks whether it is still in the
// Raft configuration (a server the leader removes may never be sent the
// entry that removes it). A client does not tick: it becomes a server
// only through Raft, and Raft tells it at once: the first command or
// snapshot Raft feeds it takes the FSM from the stream (takeFeed), and a
// configuration entry Raft commits on it kicks the check too. Each
// wake-up of an idle node costs CPU, so the check is not more often.
const roleEvery = 5 * time.Second

// statusEvery bounds how often a server reads Raft for the status its
// stream heartbeats carry, however many clients follow it.
const statusEvery = 250 * time.Millisecond

// streamDialTimeout bounds one dial of a server's stream.
const streamDialTimeout = 2 * time.Second

// replica is the node's state of the server/client split.
type replica struct {
	feedMu  sync.Mutex // held while either feed changes the FSM
	raftFed bool       // Raft has fed the FSM since it was last handed to the stream

	hub      *stream.Hub
	isServer atomic.Bool
	quiet    atomic.Bool   // Raft's timers are a client's (quietRaft)
	roleKick chan struct{} // check the role now

	mu       sync.Mutex
	follower *stream.Follower // nil on a server
	stop     context.CancelFunc
	done     chan struct{}

	statusMu sync.Mutex
	status   stream.Status
	statusAt time.Time
}

// fsmFeed is the raft.FSM Raft is given: the node's FSM, fed under
// feedMu, each applied command published to the stream's Hub. It takes
// Raft's committed entries a batch at a time (raft.BatchingFSM), so that
// the leader tells every server of each batch once (raftnode).
type fsmFeed struct{ n *Node }

var _ raft.BatchingFSM = fsmFeed{}

func (f fsmFeed) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies the commands of a batch of committed entries (Raft
// also hands it configuration entries, which the FSM does not hold).
func (f fsmFeed) ApplyBatch(logs []*raft.Log) []any {
	r := &f.n.rep
	out := make([]any, len(logs))
	r.feedMu.Lock()
	for i, l := range logs {
		if l.Type == raft.LogConfiguration {
			kick(r.roleKick) // perhaps this node's own addition
		}
		if l.Type != raft.LogCommand {
			continue
		}
		r.takeFeed(f.n.fsm.LastIndex())
		if l.Index <= f.n.fsm.LastIndex() {
			continue // applied from the stream before this node joined Raft
		}
		out[i] = f.n.fsm.Apply(l)
		r.hub.Publish(l.Index, l.Data)
	}
	r.feedMu.Unlock()
	if len(logs) > 0 {
		last := logs[len(logs)-1]
		f.n.commits.Committed(last.Index, last.Term)
	}
	return out
}

func (f fsmFeed) Snapshot() (raft.FSMSnapshot, error) { return f.n.fsm.Snapshot() }

// takeFeed marks the FSM as Raft's; the first time, the role is checked
// at once (the stream stops) and the Hub's window restarts at the FSM's
// index: what the stream applied before was never published, so a
// client asking from an older index must be sent a snapshot, not the
// entries from here on. feedMu is held.
func (r *replica) takeFeed(index uint64) {
	if !r.raftFed {
		r.raftFed = true
		r.hub.Reset(index)
		kick(r.roleKick)
	}
}

func (f fsmFeed) Restore(rc io.ReadCloser) error {
	r := &f.n.rep
	r.feedMu.Lock()
	defer r.feedMu.Unlock()
	r.takeFeed(f.n.fsm.LastIndex())
	err := f.n.fsm.Restore(rc)
	r.hub.Reset(f.n.fsm.LastIndex())
	return err
}

// watchStatus tells the stream's clients at once when the leader
// changes (on every server) or the servers do (on the leader), rather
// than at their next heartbeat.
func (n *Node) watchStatus(ch <-chan raft.Observation) {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-ch:
			n.rep.statusMu.Lock()
			n.rep.statusAt = time.Time{}
			n.rep.statusMu.Unlock()
			n.rep.hub.StatusChanged()
		}
	}
}

// observeStatus registers watchStatus with Raft.
func (n *Node) observeStatus(r *raft.Raft) {
	ch := make(chan raft.Observation, 16)
	r.RegisterObserver(raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.PeerObservation:
			return true
		}
		return false
	}))
	n.wg.Add(1)
	go n.watchStatus(ch)
}

// newHub makes the server side of the stream.
func (n *Node) newHub() *stream.Hub {
	n.rep.roleKick = make(chan struct{}, 1)
	return stream.NewHub(stream.HubConfig{
		Snapshot: n.streamSnapshot,
		Status:   n.streamStatus,
		Logf:     n.logger.Printf,
	})
}

// streamSnapshot captures the FSM for a client the window does not
// cover, with the index it includes; under feedMu nothing is applied
// meanwhile.
func (n *Node) streamSnapshot() (uint64, func(io.Writer) error, error) {
	n.rep.feedMu.Lock()
	snap, err := n.fsm.Snapshot()
	index := n.fsm.LastIndex()
	n.rep.feedMu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	return index, func(w io.Writer) error {
		defer snap.Release()
		return snap.Persist(&writerSink{w: w})
	}, nil
}

// writerSink is a raft.SnapshotSink that writes to a stream.
type writerSink struct{ w io.Writer }

func (s *writerSink) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s *writerSink) Close() error                { return nil }
func (s *writerSink) ID() string                  { return "stream" }
func (s *writerSink) Cancel() error               { return nil }

// streamStatus is the cluster as this server sees it: the leader and the
// servers. It is read from Raft at most every statusEvery, however many
// clients follow this node.
func (n *Node) streamStatus() stream.Status {
	r := &n.rep
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	if time.Since(r.statusAt) < statusEvery {
		return r.status
	}
	var st stream.Status
	rf := n.raftNode()
	if rf == nil {
		return st // a client: it serves no stream
	}
	addr, id := rf.LeaderWithID()
	st.Leader, st.LeaderAddr = string(id), string(addr)
	if f := rf.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			st.Servers = append(st.Servers, stream.Server{Name: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
		}
	}
	r.status, r.statusAt = st, time.Now()
	return st
}

// serveStream answers a client's stream request on the cluster port; a
// client closes it at once and asks another node.
func (n *Node) serveStream(c net.Conn) {
	if !n.rep.isServer.Load() || n.tls.ClientOnly() {
		n.logger.Printf("stream: %s asked this node, a client, for the change stream; closing", c.RemoteAddr())
		c.Close()
		return
	}
	if err := n.rep.hub.Serve(n.ctx, c); err != nil && n.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		n.logger.Printf("stream: client %s: %v", c.RemoteAddr(), err)
	}
}

// clientOnlyStart makes a node whose cluster certificate is a client
// node's (toolnode tls cert -client) a client for good: it never opens
// Raft (not even on Raft state it kept from when it was a server), so it
// never votes, campaigns or serves the change stream; it follows the
// stream, forwards writes and runs routed calls. A node that cannot be
// one (it would bootstrap, or asks to be a server) refuses to start.
func (n *Node) clientOnlyStart() error {
	if !n.tls.ClientOnly() {
		return nil
	}
	cert := n.tls.CertFile()
	if n.cfg.Server {
		return fmt.Errorf("refusing to start: -server asks this node to be a server, but its certificate %s is a client node's (toolnode tls cert -client); give it a server's certificate, or drop -server", cert)
	}
	if !n.joins() {
		return fmt.Errorf("refusing to start: the certificate %s is a client node's (toolnode tls cert -client), and a client cannot bootstrap a cluster; give -join with a member's gossip address", cert)
	}
	if !n.raftLazy.Load() {
		if raftStateOnDisk(n.raftDir()) {
			n.logger.Printf("cluster TLS: the Raft state in %s is left unused: this node's certificate is a client node's", n.raftDir())
		}
		n.raftLazy.Store(true)
		n.procs.StartAsClient()
	}
	n.logger.Printf("cluster TLS: this node's certificate %s is a client node's (%s): it stays a client: it follows the change stream, forwards writes and runs routed calls, and never opens Raft, votes or serves the stream", cert, tlsutil.ClientRoleURI)
	return nil
}

// inRaft reports whether this node is in Raft's latest configuration.
func (n *Node) inRaft() (bool, error) {
	r := n.raftNode()
	if r == nil {
		return false, nil // a client that has not opened Raft
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.Name {
			return true, nil
		}
	}
	return false, nil
}

// checkRole makes the node a server or a client by whether it is in
// Raft's configuration.
func (n *Node) checkRole() {
	in, err := n.inRaft()
	if err != nil {
		return
	}
	was := n.rep.isServer.Swap(in)
	switch {
	case in && !was:
		n.quietRaft(false)
		n.stopFollowing()
		if n.started() {
			n.logger.Printf("role: this node is in the Raft configuration: a server")
		}
		kick(n.metaKick)
	case !in:
		if was {
			n.logger.Printf("role: this node is not in the Raft configuration: a client, following the change stream")
			kick(n.metaKick)
		}
		n.quietRaft(true)
		n.startFollowing()
	}
	n.procs.Role(!n.rep.isServer.Load())
}

// clientRaftTimeout is a client's Raft heartbeat and election timeout.
// A client's Raft is in no configuration: when its follower loop's timer
// fires it finds it may not campaign and sleeps again, so the timer only
// costs a wake-up (one to two a second at a server's 800 ms, a sizeable
// part of an idle client's CPU). The leader's first AppendEntries still
// reaches it at once, and the node becomes a server with the server's
// timeouts (the shorter timeout wakes the loop, see raft.ReloadConfig).
const clientRaftTimeout = 5 * time.Minute

// quietRaft gives Raft a client's long timeouts (quiet) or a server's.
func (n *Node) quietRaft(quiet bool) {
	r := n.raftNode()
	if r == nil || n.rep.quiet.Load() == quiet {
		return // no Raft: no timers
	}
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = raftHeartbeatTimeout, raftElectionTimeout
	if quiet {
		rc.HeartbeatTimeout, rc.ElectionTimeout = clientRaftTimeout, clientRaftTimeout
	}
	if err := r.ReloadConfig(rc); err != nil {
		n.logger.Printf("[WARN] raft: cannot change its timeouts (client: %t): %v", quiet, err)
		return
	}
	n.rep.quiet.Store(quiet)
}

// started: the node's start has gone past Raft (a role is news then).
func (n *Node) started() bool { return n.gossip != nil }

// watchRole checks the node's role when kicked and, on a server, every
// roleEvery.
func (n *Node) watchRole() {
	defer n.wg.Done()
	defer n.stopFollowing()
	t := time.NewTimer(roleEvery)
	defer t.Stop()
	for {
		if !n.rep.isServer.Load() {
			t.Stop()
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.rep.roleKick:
		}
		n.checkRole()
		if n.rep.isServer.Load() {
			t.Reset(roleEvery)
		}
	}
}

// startFollowing runs a Follower unless one runs; its FSM is the stream's
// from now on.
func (n *Node) startFollowing() {
	r := &n.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.follower != nil {
		return
	}
	r.feedMu.Lock()
	r.raftFed = false
	r.feedMu.Unlock()
	f := stream.NewFollower(stream.FollowerConfig{
		Name:    n.cfg.Name,
		Servers: n.streamServers,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return n.dialer.Dial(addr, clusterport.ProtoStream, streamDialTimeout)
		},
		Index:       n.fsm.LastIndex,
		Apply:       n.streamApply,
		Restore:     n.streamRestore,
		Logf:        n.logger.Printf,
		MaxEntry:    maxForward,
		MaxSnapshot: stream.DefaultMaxSnapshot,
		Leaderless:  n.cfg.StreamLeaderless,
	})
	ctx, cancel := context.WithCancel(n.ctx)
	done := make(chan struct{})
	r.follower, r.stop, r.done = f, cancel, done
	go func() {
		defer close(done)
		err := f.Run(ctx)
		if errors.Is(err, stream.ErrStop) {
			n.logger.Printf("stream: Raft feeds this node's state now; stopped following")
			kick(n.rep.roleKick)
		}
	}()
}

// stopFollowing stops the Follower, if one runs, and waits for it.
func (n *Node) stopFollowing() {
	r := &n.rep
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.follower, r.stop, r.done = nil, nil, nil
	r.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// followerState is the Follower's report and the Follower; nil on a
// server.
func (n *Node) followerState() (stream.State, *stream.Follower) {
	r := &n.rep
	r.mu.Lock()
	f := r.follower
	r.mu.Unlock()
	if f == nil {
		return stream.State{}, nil
	}
	return f.State(), f
}

// streamServers are the servers a client may follow: alive members that
// gossip they are in Raft.
func (n *Node) streamServers() []string {
	var out []string
	for _, m := range n.gossip.Members() {
		if m.State == "alive" && m.Meta.Server && !m.Meta.Leaving && m.Meta.Cluster != "" && m.Name != n.cfg.Name {
			out = append(out, m.Meta.Cluster)
		}
	}
	return out
}

func (n *Node) streamApply(index uint64, data []byte) error {
	r := &n.rep
	r.feedMu.Lock()
	defer r.feedMu.Unlock()
	if r.raftFed {
		return stream.ErrStop
	}
	if index <= n.fsm.LastIndex() {
		return nil
	}
	n.fsm.Apply(&raft.Log{Index: index, Term: 0, Type: raft.LogCommand, Data: data})
	return nil
}

func (n *Node) streamRestore(index uint64, rd io.Reader) error {
	r := &n.rep
	r.feedMu.Lock()
	defer r.feedMu.Unlock()
	if r.raftFed {
		return stream.ErrStop
	}
	if err := n.fsm.Restore(io.NopCloser(rd)); err != nil {
		return err
	}
	if got := n.fsm.LastIndex(); got != index {
		return fmt.Errorf("the snapshot restored index %d, not the %d it announced", got, index)
	}
	return nil
}

// leaderAddr is where writes go: Raft's leader on a server, the leader
// the stream names on a client.
func (n *Node) leaderAddr() (addr, id string) {
	if r := n.raftNode(); r != nil {
		if a, i := r.LeaderWithID(); a != "" {
			return string(a), string(i)
		}
	}
	if st, f := n.followerState(); f != nil && st.Server != "" {
		return st.Status.LeaderAddr, st.Status.Leader
	}
	return "", ""
}

// noticeTarget is the Raft server ID and address that learns a forwarded
// write's commit for this node (forward.go): this node on a server, the
// server it follows on a client, none while it follows none.
func (n *Node) noticeTarget() (id, addr string) {
	if n.rep.isServer.Load() {
		return n.cfg.Name, string(n.transport.LocalAddr())
	}
	st, f := n.followerState()
	if f == nil || st.Server == "" {
		return "", ""
	}
	for _, s := range st.Status.Servers {
		if s.Addr == st.Server {
			return s.Name, s.Addr
		}
	}
	return "", ""
}

// clientRoles are the roles a client knows from its server's status.
func (n *Node) clientRoles() (map[string]string, string) {
	st, _ := n.followerState()
	roles := map[string]string{}
	for _, s := range st.Status.Servers {
		role := "voter"
		if !s.Voter {
			role = "nonvoter"
		}
		if s.Name == st.Status.Leader {
			role = "leader"
		}
		roles[s.Name] = role
	}
	return roles, st.Status.Leader
}

// clientReady: a client follows a server heard from lately and has
// applied what that server reported.
func (n *Node) clientReady() error {
	_, f := n.followerState()
	if f == nil {
		return errors.New("not following any server")
	}
	return f.Ready()
}
