package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The commit notice: how the leader tells the follower that forwarded a
// write that it is committed, without a second log entry.
//
// A follower answers a forwarded write once it has applied the write
// itself (read-your-writes), and hashicorp/raft tells a follower that an
// entry is committed only with the leader's next AppendEntries: at once
// when more entries follow, otherwise after CommitTimeout (50–100 ms at
// the library's default). Appending a Barrier makes that prompt, but costs
// a second log write (an fsync) on the leader and on the follower before
// the follower applies anything. Instead, once a forwarded write has
// committed, the leader sends the forwarding node an AppendEntries of its
// own through Raft's transport: no entries, PrevLogEntry and PrevLogTerm
// the committed entry's index and term, LeaderCommitIndex that index, Term
// the term the leader appended it in. The follower's Raft handles it like
// any AppendEntries, in turn with the others on its main loop.
//
// It is safe whenever it arrives, because it says only what stays true
// once said: this entry is committed. The follower refuses it when its
// term is newer (a later leader speaks for the log now), or when its log
// does not hold that index with that term; otherwise, by Raft's log
// matching property, its log up to the entry is the leader's, and it marks
// the entry committed and applies up to it, exactly as the leader's next
// AppendEntries would have. The term the notice carries is the committed
// entry's, one this node led, so it never makes a follower adopt a term
// nobody led. Nothing depends on timing: a notice that arrives before the
// follower has stored the entry is refused, and is sent again a few times
// over a few milliseconds (the entry is on its way), then replaced by the
// Barrier nudge (retry.go); a notice that fails on the network is replaced
// by the nudge at once.
//
// Notices to one follower coalesce: while one is in flight, further
// requests are merged into one for the highest index.

// noticeRetries bounds how often a refused notice is sent again, waiting
// 1, 2, 4, ... ms between tries, before the leader falls back to the nudge.
const noticeRetries = 5

type noticeTarget struct {
	addr        raft.ServerAddress
	index, term uint64 // the highest committed entry to tell, and its term
	running     bool
}

type commitNotices struct {
	mu      sync.Mutex
	targets map[raft.ServerID]*noticeTarget
}

// tellCommitted, on the leader, tells the follower id at addr that the
// entry at index is committed, or nudges every follower when it cannot.
// It returns at once; the notice goes from a goroutine per follower.
func (n *Node) tellCommitted(id raft.ServerID, addr raft.ServerAddress, index uint64) {
	switch {
	case n.cfg.NoNudge, id == raft.ServerID(n.cfg.Name):
		return // this node applied it before it answered, and its stream's clients have it
	case n.cfg.NudgeBarrier || id == "" || addr == "":
		n.nudgeFollowers()
		return
	}
	var l raft.Log
	if err := n.logs.GetLog(index, &l); err != nil {
		n.nudgeFollowers()
		return
	}
	cn := &n.notices
	cn.mu.Lock()
	if cn.targets == nil {
		cn.targets = map[raft.ServerID]*noticeTarget{}
	}
	t := cn.targets[id]
	if t == nil {
		t = &noticeTarget{}
		cn.targets[id] = t
	}
	t.addr = addr
	if index > t.index {
		t.index, t.term = index, l.Term
	}
	start := !t.running
	t.running = true
	cn.mu.Unlock()
	if start {
		go n.sendNotices(id, t)
	}
}

// sendNotices sends t's notices until none is pending.
func (n *Node) sendNotices(id raft.ServerID, t *noticeTarget) {
	var sent uint64
	for {
		cn := &n.notices
		cn.mu.Lock()
		if t.index <= sent || n.ctx.Err() != nil {
			t.running = false
			cn.mu.Unlock()
			return
		}
		addr, index, term := t.addr, t.index, t.term
		cn.mu.Unlock()
		n.noticeOnce(id, addr, index, term)
		sent = index
	}
}

// noticeOnce tells the follower of one committed entry, sending again
// while the follower has yet to store it, and nudges when it cannot.
func (n *Node) noticeOnce(id raft.ServerID, addr raft.ServerAddress, index, term uint64) {
	wait := time.Millisecond
	for try := 0; ; try++ {
		resp, err := n.sendCommitNotice(id, addr, index, term, term)
		switch {
		case err != nil:
			n.nudgeFollowers()
			return
		case resp.Success, resp.Term > term:
			// Told; or a later term's leader tells it now.
			return
		case resp.LastLog >= index || try == noticeRetries:
			// Its log does not match at index (it will be corrected by the
			// leader's replication), or the entry is long in coming.
			n.nudgeFollowers()
			return
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// sendCommitNotice sends one commit notice: an AppendEntries of term
// without entries saying that the entry at index, of logTerm, is
// committed. term must be one this node led, at or after logTerm.
func (n *Node) sendCommitNotice(id raft.ServerID, addr raft.ServerAddress, index, logTerm, term uint64) (*raft.AppendEntriesResponse, error) {
	me := n.transport.EncodePeer(raft.ServerID(n.cfg.Name), n.transport.LocalAddr())
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax,
			ID:              []byte(n.cfg.Name),
			Addr:            me,
		},
		Term:              term,
		Leader:            me,
		PrevLogEntry:      index,
		PrevLogTerm:       logTerm,
		LeaderCommitIndex: index,
	}
	var resp raft.AppendEntriesResponse
	if err := n.transport.AppendEntries(id, addr, req, &resp); err != nil {
		return nil, fmt.Errorf("commit notice to %s: %w", id, err)
	}
	return &resp, nil
}
