package node

import (
	"errors"
	"sync/atomic"
	"time"
)

// The write path's retry rules, and how the leader tells followers that a
// forwarded write is committed.
//
// A forwarded write fails in one of two ways. Either it certainly was not
// applied (errUnsent: the dial failed, the leader refused it as no longer
// the leader, the connection was closed before the command left), or the
// answer was lost after the command left (errAmbiguous). Both are retried
// until the write timeout, the leader re-resolved each time: every command
// is proposed as a request with an id, the same for each try, which the
// FSM applies once and answers alike ever after (raftfsm/dedupe.go). So a
// retried create answers the name the first try made, and a retried
// unload answers what the first try did ("not loaded" included), where
// guessing from the state after the fact could not tell.

const (
	// fwdDialTimeout bounds one dial of the leader. The cluster port is on
	// a LAN: a leader that does not accept within it is cut off or dead,
	// and Raft will elect another within about a second; the write is
	// retried against whichever leader Raft names then.
	fwdDialTimeout = time.Second
	// fwdAnswerTimeout bounds the wait for the leader's answer to a
	// command under 1 MiB (a larger one may take its time to travel). A leader cut off from its majority steps down
	// after LeaderLeaseTimeout and answers; one that cannot answer at all
	// is given up on here and the command retried elsewhere.
	fwdAnswerTimeout = 3 * time.Second
)

// errAmbiguous marks a write whose command left this node but whose answer
// did not arrive: it may or may not have been applied.
var errAmbiguous = errors.New("the write may or may not have been applied")

// nudger makes the leader tell every follower at once that the entries
// it has are committed, by appending a Barrier: its AppendEntries carries
// the new commit index within a round trip, where hashicorp/raft would
// otherwise wait for the next write or CommitTimeout (250 to 500 ms at
// the node's default). It costs a log write (an fsync) on the leader
// and on each follower, so it is the fallback of the commit notice
// (notice.go), used when a notice for a forwarded write or a ReadIndex
// cannot be delivered. Nudges coalesce: while one Barrier is being
// enqueued, further requests make at most one more.
type nudger struct {
	want    atomic.Bool
	running atomic.Bool
}

func (n *Node) nudgeFollowers() {
	n.nudge.want.Store(true)
	if !n.nudge.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for n.nudge.want.Swap(false) {
				// Not waited for: the entry's AppendEntries is the point,
				// not its own commit.
				if r := n.raftNode(); r != nil {
					r.Barrier(fwdDialTimeout)
				}
			}
			n.nudge.running.Store(false)
			if !n.nudge.want.Load() || !n.nudge.running.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}
