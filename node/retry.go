package node

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/toolnode/toolnode/raftfsm"
)

// The write path's retry rules, and how the leader tells followers that a
// forwarded write is committed.
//
// A forwarded write fails in one of two ways. Either it certainly was not
// applied (errUnsent: the dial failed, the leader refused it as no longer
// the leader, the connection was closed before the command left), or the
// answer was lost after the command left (errAmbiguous). Both are retried
// until the write timeout, the leader re-resolved each time: a command
// applies once however often it is proposed, load and unload because
// applying them twice changes nothing, every other command because it is
// proposed as a request with an id, which the FSM applies once and answers
// alike ever after (raftfsm/dedupe.go).

const (
	// fwdDialTimeout bounds one dial of the leader. The cluster port is on
	// a LAN: a leader that does not accept within it is cut off or dead,
	// and Raft will elect another within about a second; the write is
	// retried against whichever leader Raft names then.
	fwdDialTimeout = time.Second
	// fwdAnswerTimeout bounds the wait for the leader's answer to an
	// idempotent command. A leader cut off from its majority steps down
	// after LeaderLeaseTimeout and answers; one that cannot answer at all
	// is given up on here and the command retried elsewhere.
	fwdAnswerTimeout = 3 * time.Second
)

// errAmbiguous marks a write whose command left this node but whose answer
// did not arrive: it may or may not have been applied.
var errAmbiguous = errors.New("the write may or may not have been applied")

// idempotent reports whether applying the command twice changes nothing
// beyond applying it once (DESIGN §2: loading a loaded tool changes
// nothing). Those are proposed without a request id: their retries need
// none, and they are most of the writes.
func idempotent(t raftfsm.CommandType) bool {
	return t == raftfsm.CmdLoad || t == raftfsm.CmdUnload
}

// retrySucceeded: an unload retried after an ambiguous failure finds the
// tool no longer loaded, which is the state the first attempt would have
// left, so the retry succeeded. (A retried load already succeeds: loading
// a loaded tool is no change.)
func retrySucceeded(t raftfsm.CommandType, err error) bool {
	return t == raftfsm.CmdUnload && errors.Is(err, raftfsm.ErrNotLoaded)
}

// nudger makes the leader tell every follower at once that the entries
// it has are committed, by appending a Barrier: its AppendEntries carries
// the new commit index within a round trip, where hashicorp/raft would
// otherwise wait for the next write or CommitTimeout (50 ms to 100 ms at
// the library's default). It costs a log write (an fsync) on the leader
// and on each follower, so it is the fallback of the commit notice
// (notice.go), used when a notice cannot be delivered, and the way of
// -raft-nudge-barrier. Nudges coalesce: while one Barrier is being
// enqueued, further requests make at most one more.
type nudger struct {
	want    atomic.Bool
	running atomic.Bool
}

func (n *Node) nudgeFollowers() {
	if n.cfg.NoNudge {
		return
	}
	n.nudge.want.Store(true)
	if !n.nudge.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for n.nudge.want.Swap(false) {
				// Not waited for: the entry's AppendEntries is the point,
				// not its own commit.
				n.raft.Barrier(fwdDialTimeout)
			}
			n.nudge.running.Store(false)
			if !n.nudge.want.Load() || !n.nudge.running.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}
