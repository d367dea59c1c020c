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
// the leader, the connection was closed before the command left) and it is
// retried until the write timeout, the leader re-resolved each time; or the
// answer was lost after the command left (errAmbiguous), and only a command
// whose second application changes nothing is retried: load and unload.

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
// nothing). Those are retried after an ambiguous failure.
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

// nudger makes the leader tell followers at once that a forwarded write is
// committed (not for load and unload: see appliedLater). hashicorp/raft sends a follower the commit index only with
// AppendEntries: at once when there are new entries, otherwise after
// CommitTimeout (50 ms to 100 ms at the library's default). A follower
// that forwarded a write waits to have applied it before answering its
// writer (read-your-writes), so after a forwarded write commits the leader
// appends a Barrier: its AppendEntries carries the new commit index to
// every follower within a round trip. Nudges coalesce: while one Barrier is
// being enqueued, further requests make at most one more.
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
