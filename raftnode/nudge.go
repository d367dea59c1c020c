package raftnode

import (
	"sync/atomic"
	"time"
)

// nudgeTimeout bounds the enqueueing of one nudge's Barrier.
const nudgeTimeout = time.Second

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

// Nudge appends a Barrier, not waited for, so that every follower
// learns the commit index within a round trip.
func (n *Notices) Nudge() {
	n.nudge.want.Store(true)
	if !n.nudge.running.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for n.nudge.want.Swap(false) {
				// Not waited for: the entry's AppendEntries is the point,
				// not its own commit.
				if r := n.cfg.Raft(); r != nil {
					r.Barrier(nudgeTimeout)
				}
			}
			n.nudge.running.Store(false)
			if !n.nudge.want.Load() || !n.nudge.running.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}
