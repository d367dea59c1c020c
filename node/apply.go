package node

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/raftfsm"
)

// apply makes one write: on the leader it is applied here; on a follower
// it is forwarded to the leader, and this node waits until it has applied
// the write too, so the writer reads it back from the node it wrote
// through. A write that was certainly not applied is retried, the leader
// re-resolved each time, until applyTimeout; so is one whose answer was
// lost, since every command is proposed as a request with an id of its
// own, which applies once however often it is proposed (retry.go,
// raftfsm/dedupe.go). With no leader by then it fails with
// ErrNoLeader. No lock is held across raft.Apply.
func (n *Node) apply(t raftfsm.CommandType, body any) (raftfsm.Result, error) {
	return n.applyFor(caller{}, t, body)
}

// caller is who a write is made for. A write forwarded to the leader
// carries it (forward.go), and the leader authorizes the write against
// it: the token, when the caller attached with one; else who, a
// token-less caller's anon@IP; the zero caller is the node itself
// (node:NAME).
type caller struct {
	who   string // the principal's name: a token's, anon@IP; "" for the node
	token string // the secret it attached with; never logged or shown
}

// applyFor is apply for a caller.
func (n *Node) applyFor(c caller, t raftfsm.CommandType, body any) (raftfsm.Result, error) {
	data, err := raftfsm.Encode(t, body)
	if err != nil {
		return raftfsm.Result{}, err
	}
	if data, err = raftfsm.Request(rand.Text(), data); err != nil {
		return raftfsm.Result{}, err
	}
	deadline := time.Now().Add(applyTimeout)
	for {
		r, err := n.applyOnce(t, data, time.Until(deadline), c)
		if err == nil || !retryable(err) {
			return r, err
		}
		if time.Now().After(deadline) {
			if errors.Is(err, ErrNoLeader) || errors.Is(err, errAmbiguous) {
				return raftfsm.Result{}, err
			}
			return raftfsm.Result{}, fmt.Errorf("%w (%v)", ErrNoLeader, err)
		}
		select {
		case <-n.ctx.Done():
			return raftfsm.Result{}, errors.New("the node is shutting down")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// retryable: the write was certainly not applied, and may succeed later;
// or it may have been applied, and proposing it again cannot apply it a
// second time (its request id).
func retryable(err error) bool {
	return errors.Is(err, errUnsent) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, ErrNoLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		errors.Is(err, errAmbiguous)
}

// applyOnce proposes data once: on the leader, or forwarded to it.
func (n *Node) applyOnce(t raftfsm.CommandType, data []byte, timeout time.Duration, c caller) (raftfsm.Result, error) {
	if n.leading() {
		r, _, err := n.applyHere(data, timeout, "this node")
		return r, err
	}
	addr, _ := n.leaderAddr()
	if addr == "" {
		return raftfsm.Result{}, ErrNoLeader
	}
	wait := timeout
	if len(data) < 1<<20 {
		// Give up on a silent leader early: the retry is safe. (A large
		// command may take its time to travel.)
		wait = min(timeout, fwdAnswerTimeout)
	}
	resp, err := n.forwardAs(string(addr), data, wait, c)
	if err != nil {
		return raftfsm.Result{}, err
	}
	if resp.Err != "" {
		return raftfsm.Result{}, errKinds.Error(resp.Err, resp.Kind)
	}
	n.ri.expectNotice(resp.Index)
	if appliedLater(t) {
		n.ri.ack(resp.Index)
		return raftfsm.Result{Name: resp.Name}, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		// The commit notice (or the stream) brings the write at once. A
		// node whose role changed while the write was in flight (a client
		// the leader just made a server) may have been told nothing: after
		// a short wait, a ReadIndex round makes the leader tell it.
		if n.waitApplied(resp.Index, min(time.Until(deadline), noticeGrace)) {
			return raftfsm.Result{Name: resp.Name}, nil
		}
		if !time.Now().Before(deadline) {
			return raftfsm.Result{}, fmt.Errorf("the write was committed at index %d but this node has not caught up within %s; it will", resp.Index, timeout)
		}
		n.caughtUp()
	}
}

// noticeGrace is how long a forwarding node waits for its write to reach
// its state before it asks the leader again (applyOnce).
const noticeGrace = 250 * time.Millisecond

// applyHere applies a command on this node, which must be the leader, and
// returns its result and log index. Every command, proposed here or
// forwarded (from names its sender for the log), is validated first: an
// invalid one is refused with an error wrapping raftfsm.ErrInvalid and a
// log line, and never appended to the log.
func (n *Node) applyHere(data []byte, timeout time.Duration, from string) (raftfsm.Result, uint64, error) {
	if err := n.validate(data, from); err != nil {
		return raftfsm.Result{}, 0, err
	}
	return n.propose(data, timeout)
}

// validate is the leader's check of a command before it is appended
// (applyHere); a refusal is logged naming from.
func (n *Node) validate(data []byte, from string) error {
	err := raftfsm.ValidateLimits(data, raftfsm.Limits{MaxExecSize: n.cfg.MaxExecSize})
	if err == nil {
		err = n.fsm.CheckSigned(data)
	}
	if err == nil {
		err = n.rollout.Check(data)
	}
	if err != nil {
		n.logger.Printf("refused a command from %s: %v", from, err)
	}
	return err
}

// propose appends a validated command to the log on this node, the
// leader, and returns its result and log index.
func (n *Node) propose(data []byte, timeout time.Duration) (raftfsm.Result, uint64, error) {
	r := n.raftNode()
	if r == nil {
		return raftfsm.Result{}, 0, fmt.Errorf("%w (this node is a client)", ErrNoLeader)
	}
	f := r.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
			// Not in the log: safe to try again.
			return raftfsm.Result{}, 0, fmt.Errorf("%w (%v)", ErrNoLeader, err)
		case errors.Is(err, raft.ErrLeadershipLost):
			return raftfsm.Result{}, 0, fmt.Errorf("the leader lost its leadership while the write was in flight: %w", errAmbiguous)
		}
		return raftfsm.Result{}, 0, fmt.Errorf("write not committed: %w", err)
	}
	switch r := f.Response().(type) {
	case error:
		return raftfsm.Result{}, 0, r
	case raftfsm.Result:
		return r, f.Index(), nil
	default:
		return raftfsm.Result{}, f.Index(), nil
	}
}
