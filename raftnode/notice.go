package raftnode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The commit notice: how the leader tells a server that an entry is
// committed, without a second log entry and without waiting for Raft's
// next AppendEntries.
//
// A follower answers a forwarded write once it has applied the write
// itself (read-your-writes), and hashicorp/raft tells a follower that an
// entry is committed only with the leader's next AppendEntries: at once
// when more entries follow, otherwise after CommitTimeout. Appending a
// Barrier makes that prompt, but costs a second log write (an fsync) on
// the leader and on the follower before the follower applies anything.
// Instead, once an entry has committed, the leader sends the follower an
// AppendEntries of its own through Raft's transport: no entries,
// PrevLogEntry and PrevLogTerm the committed entry's index and term,
// LeaderCommitIndex that index, Term the term the leader leads. The
// follower's Raft handles it like any AppendEntries, in turn with the
// others on its main loop.
//
// It is safe whenever it arrives, because it says only what stays true
// once said: this entry is committed. The follower refuses it when its
// term is newer (a later leader speaks for the log now), or when its log
// does not hold that index with that term; otherwise, by Raft's log
// matching property, its log up to the entry is the leader's, and it marks
// the entry committed and applies up to it, exactly as the leader's next
// AppendEntries would have. The term the notice carries is one this node
// leads, so it never makes a follower adopt a term nobody led. Nothing
// depends on timing: a notice that arrives before the follower has stored
// the entry is refused, and is sent again a few times over a few
// milliseconds (the entry is on its way); one for a forwarded write or a
// ReadIndex is then replaced by the Barrier nudge (nudge.go), as is such
// a one that fails on the network.
//
// After every commit the leader tells every server, not only the one
// that forwarded a write (broadcast): the leader's FSM, once it has
// applied a batch of committed entries (raft.BatchingFSM, fsmFeed), hands
// the batch's last index and term to one goroutine, which queues a notice
// of it to every other server in Raft's configuration, voters and
// non-voters. So a write made on the leader, or through a client whose
// server is not the forwarding node, is applied on every server within a
// round trip, and a client's stream carries it on as its server applies
// it; Raft's CommitTimeout is then only a fallback, and can be long
// (DefaultCommitTimeout). A broadcast notice
// never falls back to the Barrier (a follower that lacks the entry is
// being sent it, and learns the commit with it or at the next
// CommitTimeout), and skips a server whose last notice failed on the
// network for noticeBackoff, so a dead server costs one dial a second at
// most. It waits broadcastWait first: when another entry is appended
// meanwhile, its AppendEntries carries the commit index to every follower
// (it is sent after the commit), and no notice is sent.
//
// Every notice is of the term this node leads when it sends it (leaderTerm),
// as the leader's own AppendEntries are, and names the entry's own term
// as PrevLogTerm: an entry of an earlier leader's term that this leader
// committed is told too, and a follower that has heard of this term
// does not refuse it as stale.
//
// Notices to one server coalesce: while one is in flight, further
// requests are merged into one for the highest index, and one that names
// an entry the server already accepted as committed is dropped; so a
// server gets one notice per batch of commits at most, and fewer under
// load, when a batch commits while the previous notice travels.

// noticeRetries bounds how often a refused notice is sent again, waiting
// 1, 2, 4, ... ms between tries, before the leader falls back to the nudge.
const noticeRetries = 5

// noticeBackoff is how long broadcast notices skip a server whose last
// notice failed on the network.
const noticeBackoff = time.Second

// broadcastWait is how long the leader waits after a commit for another
// entry, whose AppendEntries carries the commit to every follower, before
// it sends the broadcast notices: a writer that writes again at once
// (one client writing in turn, through a follower) costs no notices, a
// last write a few milliseconds more before other servers see it.
const broadcastWait = 2 * time.Millisecond

type noticeTarget struct {
	addr        raft.ServerAddress
	pending     bool
	index, term uint64    // the highest committed entry to tell, and its term
	nudge       bool      // a pending request falls back to the Barrier nudge
	told        uint64    // the highest entry the server accepted as committed
	failedAt    time.Time // its last notice's network failure
	running     bool
}

// Config is what the commit notices need of the node's Raft.
type Config struct {
	// Self is this server's ID.
	Self raft.ServerID
	// Raft is the node's Raft, nil until it opens.
	Raft func() *raft.Raft
	// Transport is Raft's transport, which the notices travel on; nil
	// until Raft opens.
	Transport func() raft.Transport
	// Logs is Raft's log store, nil until Raft opens.
	Logs func() raft.LogStore
}

// Notices sends the leader's commit notices, and the Barrier nudge that
// is their fallback, for one node.
type Notices struct {
	cfg Config
	ctx context.Context

	mu      sync.Mutex
	targets map[raft.ServerID]*noticeTarget

	leading atomic.Bool   // this node leads: broadcast
	kick    chan struct{} // a batch was applied on the leader
	lastMu  sync.Mutex
	index   uint64 // the last entry the leader's FSM applied, and its term
	term    uint64

	nudge nudger
}

// New makes the notices of a node; they stop being sent when ctx ends.
func New(ctx context.Context, cfg Config) *Notices {
	return &Notices{cfg: cfg, ctx: ctx, kick: make(chan struct{}, 1)}
}

// SetLeading records whether this node leads, which the leader loop
// learns: only a leader broadcasts.
func (n *Notices) SetLeading(v bool) { n.leading.Store(v) }

// Leading reports what SetLeading last recorded.
func (n *Notices) Leading() bool { return n.leading.Load() }

// Committed is called by the FSM's feed after it applied a batch whose
// last entry is index, of term. On the leader it wakes broadcastCommits;
// it never blocks, and changes nothing the FSM holds.
func (n *Notices) Committed(index, term uint64) {
	cn := n
	if !cn.leading.Load() {
		return
	}
	cn.lastMu.Lock()
	if index > cn.index {
		cn.index, cn.term = index, term
	}
	cn.lastMu.Unlock()
	select {
	case cn.kick <- struct{}{}:
	default: // a wake-up is pending; it reads the newest index
	}
}

// Run, while this node leads, queues a commit notice of the
// last applied entry to every other server after each applied batch.
func (n *Notices) Run(ctx context.Context) {
	cn := n
	self := n.cfg.Self
	for {
		select {
		case <-ctx.Done():
			return
		case <-cn.kick:
		}
		if _, ok := LeaderTerm(n.cfg.Raft()); !ok {
			continue
		}
		// An entry appended from now on is sent to every follower with a
		// commit index at or past the batch just applied: when the next
		// write comes within broadcastWait, its AppendEntries tells them,
		// and a notice would only add a message to its way.
		r := n.cfg.Raft() // Run starts once Raft is open
		last := r.LastIndex()
		select {
		case <-ctx.Done():
			return
		case <-time.After(broadcastWait):
		}
		if r.LastIndex() > last {
			continue
		}
		cn.lastMu.Lock()
		index, term := cn.index, cn.term
		cn.lastMu.Unlock()
		f := r.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		for _, s := range f.Configuration().Servers {
			if s.ID != self {
				n.queueNotice(s.ID, s.Address, index, term, false)
			}
		}
	}
}

// TellCommitted, on the leader, tells the follower id at addr that the
// entry at index is committed, or nudges every follower when it cannot.
// It returns at once; the notice goes from a goroutine per follower.
func (n *Notices) TellCommitted(id raft.ServerID, addr raft.ServerAddress, index uint64) {
	switch {
	case id == n.cfg.Self:
		return // this node applied it before it answered, and its stream's clients have it
	case id == "" || addr == "":
		n.Nudge()
		return
	}
	var l raft.Log
	logs := n.cfg.Logs()
	if logs == nil || logs.GetLog(index, &l) != nil {
		n.Nudge()
		return
	}
	n.queueNotice(id, addr, index, l.Term, true)
}

// queueNotice asks for a notice of the committed entry index, of term, to
// the server id at addr; nudge: fall back to the Barrier when it cannot be
// told.
func (n *Notices) queueNotice(id raft.ServerID, addr raft.ServerAddress, index, term uint64, nudge bool) {
	cn := n
	cn.mu.Lock()
	if cn.targets == nil {
		cn.targets = map[raft.ServerID]*noticeTarget{}
	}
	t := cn.targets[id]
	if t == nil {
		t = &noticeTarget{}
		cn.targets[id] = t
	}
	if t.addr != addr {
		t.addr, t.told = addr, 0 // another process under the name
	}
	if index <= t.told || (!nudge && !t.failedAt.IsZero() && time.Since(t.failedAt) < noticeBackoff) {
		cn.mu.Unlock()
		return
	}
	if !t.pending || index > t.index {
		t.index, t.term = index, term
	}
	t.pending = true
	t.nudge = t.nudge || nudge
	start := !t.running
	t.running = true
	cn.mu.Unlock()
	if start {
		go n.sendNotices(id, t)
	}
}

// sendNotices sends t's notices until none is pending.
func (n *Notices) sendNotices(id raft.ServerID, t *noticeTarget) {
	cn := n
	for {
		cn.mu.Lock()
		if !t.pending || t.index <= t.told || n.ctx.Err() != nil {
			t.pending, t.nudge, t.running = false, false, false
			cn.mu.Unlock()
			return
		}
		addr, index, term, nudge := t.addr, t.index, t.term, t.nudge
		t.pending, t.nudge = false, false
		cn.mu.Unlock()
		told, netErr := false, false
		if lt, ok := LeaderTerm(n.cfg.Raft()); ok {
			told, netErr = n.noticeOnce(id, addr, index, term, lt, nudge)
		}
		cn.mu.Lock()
		if told && index > t.told && addr == t.addr {
			t.told = index
		}
		if netErr {
			t.failedAt = time.Now()
		} else {
			t.failedAt = time.Time{}
		}
		cn.mu.Unlock()
	}
}

// LeaderTerm returns the term r leads, and false when it does
// not lead (or r is nil): the state is read between two reads of the term that agree,
// so the node led that term (a term never comes back).
func LeaderTerm(r *raft.Raft) (uint64, bool) {
	if r == nil {
		return 0, false
	}
	t := r.CurrentTerm()
	if r.State() != raft.Leader || r.CurrentTerm() != t {
		return 0, false
	}
	return t, true
}

// noticeOnce tells the follower that the entry at index, of logTerm, is
// committed, in a notice of term (one this node leads), sending again
// while the follower has yet to store it; with nudge, it nudges when it
// cannot. told: the follower took it; netErr: it did not answer.
func (n *Notices) noticeOnce(id raft.ServerID, addr raft.ServerAddress, index, logTerm, term uint64, nudge bool) (told, netErr bool) {
	wait := time.Millisecond
	for try := 0; ; try++ {
		resp, err := n.SendCommitNotice(id, addr, index, logTerm, term)
		switch {
		case err != nil:
			if nudge {
				n.Nudge()
			}
			return false, true
		case resp.Success:
			return true, false
		case resp.Term > term:
			// A later term's leader tells it now.
			return false, false
		case resp.LastLog >= index || try == noticeRetries:
			// Its log does not match at index (it will be corrected by the
			// leader's replication), or the entry is long in coming.
			if nudge {
				n.Nudge()
			}
			return false, false
		}
		select {
		case <-n.ctx.Done():
			return false, false
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// SendCommitNotice sends one commit notice: an AppendEntries of term
// without entries saying that the entry at index, of logTerm, is
// committed. term must be one this node led, at or after logTerm.
func (n *Notices) SendCommitNotice(id raft.ServerID, addr raft.ServerAddress, index, logTerm, term uint64) (*raft.AppendEntriesResponse, error) {
	tr := n.cfg.Transport()
	if tr == nil {
		return nil, fmt.Errorf("commit notice to %s: raft is not open", id)
	}
	me := tr.EncodePeer(n.cfg.Self, tr.LocalAddr())
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{
			ProtocolVersion: raft.ProtocolVersionMax,
			ID:              []byte(n.cfg.Self),
			Addr:            me,
		},
		Term:              term,
		Leader:            me,
		PrevLogEntry:      index,
		PrevLogTerm:       logTerm,
		LeaderCommitIndex: index,
	}
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries(id, addr, req, &resp); err != nil {
		return nil, fmt.Errorf("commit notice to %s: %w", id, err)
	}
	return &resp, nil
}
