package node

import (
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// The stop (DESIGN §5): 9P and MCP first (no new requests); then, if it
// leads, the node hands leadership to another voter; the publisher,
// watchers and leader loop stop; gossip leaves gracefully and a server
// waits for the leader to take it out of Raft; Raft shuts down, and its
// log is closed last, then the audit log. The graceful part (the
// handover, the leave, the wait) shares one budget, stopGrace, so that a
// node stopped by SIGTERM exits within the 5 s that service managers
// wait before they kill (systemd's and Docker's defaults are 90 s and
// 10 s; Kubernetes' 30 s); a step the budget cuts short only makes the
// others notice the node gone by failure detection instead of by its
// leave. Nothing acknowledged depends on it: the log is synced at each
// append. Each step is logged at debug level ("stop: STEP").
const stopGrace = 4400 * time.Millisecond

// handoverMax bounds the leadership transfer within the budget: a
// transfer waits for the target to catch up and win an election, about
// one election timeout on a healthy cluster.
const handoverMax = 1500 * time.Millisecond

// leaveDrain bounds how long a leaving server waits for the leader to
// take it out of Raft's configuration (within what stopGrace leaves):
// with two voters the removal needs this node's vote, and a node gone
// before it commits leaves the other without a quorum.
const leaveDrain = 3 * time.Second

// Close stops the node in the order above.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		steps := newStopSteps(n.cfg.Logger)
		deadline := time.Now().Add(stopGrace)
		left := func(most time.Duration) time.Duration {
			return max(min(most, time.Until(deadline)), 0)
		}
		if n.mcp != nil {
			n.mcp.Close()
		}
		if n.p9 != nil {
			n.p9.Close()
		} else if n.p9ln != nil {
			n.p9ln.Close()
		}
		n.closing.Store(true)
		steps.step("9P and MCP closed")
		if n.leading() && n.otherVoters() {
			n.handOver(left(handoverMax))
			steps.step("leadership handed over")
		}
		// Under raftMu: a late open of Raft (lazyraft.go) has ended or
		// will not begin.
		n.raftMu.Lock()
		n.cancel()
		n.raftMu.Unlock()
		n.stopUpstream()
		if n.rep.hub != nil {
			n.rep.hub.Close()
		}
		if n.gossip != nil {
			// Leave takes up to 1.75 times its timeout (cluster.Leave):
			// at most 1.5 s here.
			if err := n.gossip.Leave(left(1500*time.Millisecond) * 4 / 7); err != nil {
				n.warnf("gossip leave: %v", err)
			}
			steps.step("left gossip")
			n.awaitRemoval(left(leaveDrain))
			steps.step("out of Raft")
		}
		n.wg.Wait()
		if n.blobs != nil {
			n.blobs.Stop()
		}
		n.fwd.CloseAll()
		if n.runner != nil {
			if err := n.runner.Close(); err != nil {
				n.logger.Printf("removing the cgroups of calls: %v", err)
			}
		}
		n.callConns.CloseAll()
		steps.step("watchers, calls and connections stopped")
		if r := n.raftNode(); r != nil {
			if err := r.Shutdown().Error(); err != nil {
				n.closeErr = fmt.Errorf("raft shutdown: %w", err)
			}
		}
		if c, ok := n.transport.(io.Closer); ok && n.cfg.RaftTransport == nil {
			c.Close()
		}
		if n.port != nil {
			n.port.Close()
		}
		// The log store last: Raft may write to it until Shutdown returns.
		if n.store != nil {
			if err := n.store.Close(); err != nil && n.closeErr == nil {
				n.closeErr = fmt.Errorf("raft log close: %w", err)
			}
		}
		steps.step("raft stopped")
		// The audit log last: everything that records has stopped.
		if err := n.audit.Close(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	})
	return n.closeErr
}

// handOver transfers leadership to another voter, waiting at most d; a
// transfer still under way then goes on without this node waiting.
func (n *Node) handOver(d time.Duration) {
	fut := n.raftNode().LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- fut.Error() }()
	select {
	case err := <-done:
		if err != nil {
			n.warnf("handing over leadership: %v", err)
		}
	case <-time.After(d):
		n.warnf("handing over leadership: not done within %s; stopping anyway", d)
	}
}

// awaitRemoval, on a server that left gossip, waits until the leader has
// removed it from Raft's configuration, as a leaving Consul server does:
// the removal is a commit that may need this node's vote (two voters
// need both), so its Raft must answer until then. It gives up after d,
// and at once on a client or the last voter.
func (n *Node) awaitRemoval(d time.Duration) {
	if n.raftNode() == nil || !n.otherVoters() {
		return
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if in, err := n.inRaft(); err != nil || !in {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.warnf("leaving: the leader had not removed this node from Raft within %s; the others will once it is seen gone", d)
}

// otherVoters reports whether the configuration has a voter besides this
// node.
func (n *Node) otherVoters() bool {
	r := n.raftNode()
	if r == nil {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.Name {
			return true
		}
	}
	return false
}
