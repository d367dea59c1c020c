package node

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/raftfsm"
)

// Reads of agent state on a follower are never silently stale: before a
// follower answers one it asks the leader for its commit index (a
// ReadIndex, over the forwarding connection) and waits until its own FSM
// has applied that far. A node that restarted, or lags, thus answers with
// every write acknowledged before the read, or with an error saying it is
// catching up. The leader's own state is current: it acknowledges a write
// only once its FSM has applied it.

const (
	// readIndexWait bounds how long a read waits for a leader to answer
	// and for this node to apply up to the leader's index before it
	// answers "catching up": long enough to ride out a failover (about
	// 1.6 s on a LAN).
	readIndexWait = 5 * time.Second
)

// readIndex keeps the last index fetched from the leader, and when its
// fetch started, and
// holds the highest index of a write acknowledged through this node before
// this node applied it (see appliedLater).
type readIndex struct {
	mu    sync.Mutex // held across the fetch: one at a time
	at    time.Time  // when the fetch that got index started
	index uint64

	acked atomic.Uint64
	// expect is the highest index the leader may send this node a commit
	// notice for: that of its last forwarded write or ReadIndex. A notice
	// that comes before the entry is refused, and Raft warns of it; that
	// is expected below this index (logging.go).
	expect atomic.Uint64
}

// expectNotice records that the leader may tell this node of index.
func (r *readIndex) expectNotice(index uint64) {
	for {
		old := r.expect.Load()
		if index <= old || r.expect.CompareAndSwap(old, index) {
			return
		}
	}
}

// ack records that a write at index was acknowledged through this node.
func (r *readIndex) ack(index uint64) {
	for {
		old := r.acked.Load()
		if index <= old || r.acked.CompareAndSwap(old, index) {
			return
		}
	}
}

// appliedLater: a forwarded command whose effect only reads that check
// show is acknowledged as soon as the leader committed it, and this node
// applies it afterwards, so the writer does not wait for the commit to
// reach this node before it writes again. Load and unload change agent
// state, which every read checks (caughtUp). A created session or agent
// is read by walks, which find a name this node has at once and wait for
// every write acknowledged through this node before they look again
// (WalkSession, WalkAgent), and by listings, which check (Sessions,
// Agents); so the writer always finds what it made here. Kills still
// wait: a walk finds a name this node still has without checking.
func appliedLater(t raftfsm.CommandType) bool {
	switch t {
	case raftfsm.CmdLoad, raftfsm.CmdUnload, raftfsm.CmdCreateSession, raftfsm.CmdCreateAgent:
		return true
	}
	return false
}

// noticeAtCommit: the leader tells the forwarding node that such a write
// is committed at once (raftnode), though that node does not wait for
// it, since what the writer does next is walk into what it made. Load
// and unload have none: the next agent read's ReadIndex brings one.
func noticeAtCommit(t raftfsm.CommandType) bool {
	return t != raftfsm.CmdLoad && t != raftfsm.CmdUnload
}

// ownWritesApplied waits, without asking the leader, until this node has
// applied every write acknowledged through it, for at most noticeGrace
// (the commit notice is on its way), and reports whether it has.
func (n *Node) ownWritesApplied() bool {
	return n.waitApplied(n.ri.acked.Load(), noticeGrace)
}

// waitApplied waits, for at most d, until this node has applied the
// entry at index, and reports whether it has.
func (n *Node) waitApplied(index uint64, d time.Duration) bool {
	if n.fsm.LastIndex() >= index {
		return true
	}
	done := make(chan struct{})
	t := time.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	return n.fsm.WaitApplied(index, done)
}

// errCatchingUp wraps the answer of a node that cannot yet show every
// acknowledged write; 9P clients see EAGAIN (p9/doc.go).
var errCatchingUp = errors.New("temporarily unavailable: catching up")

// caughtUp returns nil once this node has applied every write the leader
// had applied when the read began and every write acknowledged through
// this node, or an error wrapping errCatchingUp.
func (n *Node) caughtUp() error {
	began := time.Now()
	deadline := began.Add(readIndexWait)
	index := n.ri.acked.Load()
	for !n.leading() {
		// The leader is re-resolved at each try: while it fails over,
		// the read waits for the next one rather than failing.
		li, err := n.leaderCommitIndex(began)
		if err == nil {
			index = max(index, li)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: this node cannot confirm with the leader that it is current: %v", errCatchingUp, err)
		}
		select {
		case <-n.ctx.Done():
			return fmt.Errorf("%w: the node is shutting down", errCatchingUp)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !n.waitApplied(index, max(time.Until(deadline), 100*time.Millisecond)) {
		return fmt.Errorf("%w: this node has applied the log up to %d of the leader's %d; try again", errCatchingUp, n.fsm.LastIndex(), index)
	}
	return nil
}

// leaderCommitIndex asks the leader for its applied index, for a read
// that began at began. An index whose fetch started after the read began
// serves it too: reads waiting on the lock while a fetch is under way
// share the next one, so concurrent reads cost one round trip between
// them, and no read is answered from an index older than itself (a write
// acknowledged before the read began is always at or below it).
func (n *Node) leaderCommitIndex(began time.Time) (uint64, error) {
	n.ri.mu.Lock()
	defer n.ri.mu.Unlock()
	if !n.ri.at.IsZero() && !n.ri.at.Before(began) {
		return n.ri.index, nil
	}
	addr, _ := n.leaderAddr()
	if addr == "" {
		return 0, ErrNoLeader
	}
	start := time.Now()
	resp, err := n.ask(string(addr), n.fwdRequest(fwdRequest{Read: true}), fwdDialTimeout)
	if err != nil {
		return 0, err
	}
	if resp.Err != "" {
		return 0, errors.New(resp.Err)
	}
	n.ri.at, n.ri.index = start, resp.Index
	n.ri.expectNotice(resp.Index)
	return resp.Index, nil
}

// serveReadIndex answers a follower's ReadIndex once this node has
// confirmed with a quorum that it still leads (a deposed leader's index
// could be behind): the index of the last command its FSM applied. Not
// Raft's commit index: that counts entries no FSM sees (Barriers, no-ops,
// configurations), so a follower's FSM may never reach it; and a leader
// acknowledges a write only once its FSM has applied it, so every write
// acknowledged before the read is at or below this index. A follower that
// has not applied that far is sent a commit notice for it (raftnode), so
// its read need not wait for the leader's next AppendEntries.
func (n *Node) serveReadIndex(req fwdRequest) fwdResponse {
	r := n.raftNode()
	if r == nil || r.State() != raft.Leader {
		return fwdResponse{Err: "this node is no longer the leader", Kind: "notleader"}
	}
	if err := r.VerifyLeader().Error(); err != nil {
		return fwdResponse{Err: "this node could not confirm it leads: " + err.Error(), Kind: "notleader"}
	}
	index := n.fsm.LastIndex()
	if req.Applied < index && req.From != "" {
		n.commits.TellCommitted(raft.ServerID(req.From), raft.ServerAddress(req.Addr), index)
	}
	return fwdResponse{Index: index}
}

// ask sends one request to the leader at addr on a pooled forwarding
// connection and returns its answer; for requests that change nothing.
func (n *Node) ask(addr string, req fwdRequest, timeout time.Duration) (fwdResponse, error) {
	var resp fwdResponse
	c := n.fwd.Get(addr)
	if c == nil {
		var err error
		if c, err = n.dialer.Dial(addr, clusterport.ProtoForward, timeout); err != nil {
			return resp, err
		}
	}
	c.SetDeadline(time.Now().Add(timeout))
	if err := clusterport.WriteMsg(c, req); err != nil {
		c.Close()
		return resp, err
	}
	if err := clusterport.ReadMsg(c, &resp, maxFwdResponse); err != nil {
		c.Close()
		return resp, fmt.Errorf("the leader at %s did not answer: %v", addr, err)
	}
	c.SetDeadline(time.Time{})
	n.fwd.Put(addr, c)
	return resp, nil
}
