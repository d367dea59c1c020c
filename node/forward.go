package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/fwdauth"
	"github.com/toolnode/toolnode/raftfsm"
)

// Writes reach the leader: a follower forwards each command over the
// cluster port (clusterport.ProtoForward) and, once the leader has committed
// it, either waits until its own FSM has applied the same index, or, for
// the writes whose readers check (appliedLater: load, unload, creations),
// answers at once and makes those readers wait; either way the writer
// reads its own write back from the node it wrote through.
//
// The wire format is the cluster port's codec (clusterport.WriteMsg,
// ReadMsg): fwdRequest one way, fwdResponse the other, in turn, on a
// connection the follower reuses.

// maxForward bounds one forwarded message. Executables are named by
// digest, never carried (blobs.go), so the largest command is a batch of
// tool metadata (publishBatchBytes, base64-encoded in JSON).
const maxForward = 4*publishBatchBytes/3 + 2<<20

// maxFwdResponse bounds the leader's answer: an index, a name, an error.
const maxFwdResponse = 1 << 20

type fwdRequest struct {
	Cmd []byte `json:"cmd"`
	// Who the write is made for (fwdauth, DESIGN §7 "Cluster port"):
	// Token, the caller's token, sent to servers only (the port is
	// authenticated), which the leader resolves and authorizes the write
	// against; else Anon, a token-less caller's anon@IP, which the leader
	// grants the call role at most; neither: Node itself, node:NODE.
	Token string `json:"token,omitempty"`
	Anon  string `json:"anon,omitempty"`
	Node  string `json:"node,omitempty"` // the forwarding node's name
	Read  bool   `json:"read,omitempty"` // a ReadIndex: no Cmd (readindex.go)
	// From and Addr are the Raft server ID and address the leader sends
	// its commit notice to (raftnode), the sender's own or, on a client,
	// the server it follows; Applied the index the sender's FSM has
	// applied. Empty: no notice.
	From    string `json:"from,omitempty"`
	Addr    string `json:"addr,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
}

type fwdResponse struct {
	Index uint64 `json:"index,omitempty"`
	Name  string `json:"name,omitempty"`
	Err   string `json:"err,omitempty"`
	Kind  string `json:"kind,omitempty"` // the error's sentinel, see errKinds
}

// errKinds name the errors that cross the wire, so errors.Is still works
// on the follower.
var errKinds = clusterport.ErrorKinds{
	"notfound":  raftfsm.ErrNotFound,
	"exists":    raftfsm.ErrExists,
	"notloaded": raftfsm.ErrNotLoaded,
	"invalid":   raftfsm.ErrInvalid,
	"notleader": raft.ErrNotLeader,
	"noleader":  ErrNoLeader,
	"ambiguous": errAmbiguous,
	"denied":    fwdauth.ErrDenied,
	"unsigned":  raftfsm.ErrDenied,
}

func errKind(err error) string { return errKinds.Kind(err) }

// serveForward applies the commands a follower forwards, one at a time
// per connection, until the connection closes.
func (n *Node) serveForward(c net.Conn) {
	defer c.Close()
	go func() {
		<-n.ctx.Done()
		c.Close()
	}()
	br := bufio.NewReader(c)
	for {
		var req fwdRequest
		if _, err := clusterport.ReadMsgTimed(br, c, &req, maxForward, n.lim.ForwardIdle, n.lim.ForwardMsg); err != nil {
			n.logForwardEnd(c, err)
			return
		}
		if req.Read {
			if err := clusterport.WriteMsg(c, n.serveReadIndex(req)); err != nil {
				return
			}
			continue
		}
		if len(req.Cmd) == 0 {
			n.logger.Printf("forwarding: %s sent an empty command; closing", c.RemoteAddr())
			return
		}
		resp, tell := n.forwarded(req, c.RemoteAddr().String())
		err := clusterport.WriteMsg(c, resp)
		if tell != 0 {
			n.commits.TellCommitted(raft.ServerID(req.From), raft.ServerAddress(req.Addr), tell)
		}
		if err != nil {
			return
		}
	}
}

// logForwardEnd logs why a forwarding connection ended, when it is worth
// a line, and answers a message over the cap with the reason.
func (n *Node) logForwardEnd(c net.Conn, err error) {
	switch {
	case errors.Is(err, clusterport.ErrTooBig):
		n.logger.Printf("forwarding: %s: %v; closing", c.RemoteAddr(), err)
		c.SetWriteDeadline(time.Now().Add(clusterport.HandshakeTimeout))
		clusterport.WriteMsg(c, fwdResponse{Err: "forwarded write refused: " + err.Error(), Kind: "invalid"})
	case clusterport.IsTimeout(err) && !clusterport.MidMessage(err):
		// A pooled connection left idle for ForwardIdle: the follower
		// dials again when it next writes.
	case clusterport.IsTimeout(err):
		n.logger.Printf("forwarding: %s: closing: no complete message within the deadline (%v idle, %v per message)", c.RemoteAddr(), n.lim.ForwardIdle, n.lim.ForwardMsg)
	case !errors.Is(err, io.EOF) && n.ctx.Err() == nil && !errors.Is(err, net.ErrClosed):
		n.logger.Printf("forwarding: %s: %v", c.RemoteAddr(), err)
	}
}

// forwarded applies one forwarded command on the leader, once it is
// valid and its principal may (authorize), and returns the answer, and
// the entry the sender should be told is committed once it
// has the answer (0: none). The forwarding node applies a write at once
// (it waits for it, or its next walk may); it is told once it has its
// answer, which the notice need not delay. For load and unload its next
// read of agent state waits, and that read's ReadIndex brings the notice.
// Notices to one server coalesce while one is in flight (raftnode), so a
// follower whose writers keep the leader busy gets one per round trip,
// not one per write.
func (n *Node) forwarded(req fwdRequest, from string) (fwdResponse, uint64) {
	var resp fwdResponse
	if !n.leading() {
		resp.Err, resp.Kind = "this node is no longer the leader", "notleader"
	} else if err := n.validate(req.Cmd, "node at "+from); err != nil {
		resp.Err, resp.Kind = err.Error(), errKind(err)
	} else if p, err := n.authorize(req, from); err != nil {
		resp.Err, resp.Kind = err.Error(), errKind(err)
	} else {
		start := time.Now()
		r, index, err := n.propose(req.Cmd, applyTimeout)
		if n.audit != nil {
			action, target := fwdauth.Describe(req.Cmd)
			n.recordVia(start, p.Name, p.Via, action, target, err)
		}
		if err != nil {
			resp.Err, resp.Kind = err.Error(), errKind(err)
		} else {
			resp.Index, resp.Name = index, r.Name
		}
	}
	if resp.Index != 0 && noticeAtCommit(raftfsm.TypeOf(req.Cmd)) {
		return resp, resp.Index
	}
	return resp, 0
}

// authorize resolves whom a forwarded command is for and checks the
// command against that principal's role, on the leader's state
// (fwdauth): a member's credential alone makes no write. A refusal is
// logged and audited under the principal, via the forwarding node.
func (n *Node) authorize(req fwdRequest, from string) (fwdauth.Principal, error) {
	if req.Token != "" {
		if _, ok := n.fsm.TokenByHash(acl.Hash(req.Token)); !ok {
			// A token committed a moment ago that this FSM has not
			// applied yet is found once it has.
			n.caughtUp()
		}
	}
	p, err := fwdauth.Resolve(n.fsm, req.Token, req.Anon, req.Node)
	if err == nil {
		err = fwdauth.Check(n.fsm, p, req.Cmd)
	}
	if err != nil {
		who, via := p.Name, p.Via
		if who == "" {
			who, via = "node at "+from, ""
		}
		action, target := fwdauth.Describe(req.Cmd)
		n.logger.Printf("refused %s %s forwarded from %s for %s: %v", action, target, from, who, err)
		n.recordVia(time.Now(), who, via, action, target, err)
	}
	return p, err
}

// fwdIdleMax is how many idle forwarding connections a node keeps per
// leader address.
const fwdIdleMax = 64

// fwdRequest fills in who the leader's commit notice goes to: this node
// on a server; on a client, the server whose change stream it follows,
// since the client applies the write once that server has (a client is
// in no Raft configuration, so a notice to it would be refused).
func (n *Node) fwdRequest(req fwdRequest) fwdRequest {
	req.From, req.Addr = n.noticeTarget()
	req.Applied = n.fsm.LastIndex()
	return req
}

// errUnsent marks a forwarding failure before the command left this node:
// retrying it cannot apply it twice.
var errUnsent = errors.New("not sent")

// forward sends one command to the leader at addr for this node itself
// and returns its answer.
func (n *Node) forward(addr string, cmd []byte, timeout time.Duration) (fwdResponse, error) {
	return n.forwardAs(addr, cmd, timeout, caller{})
}

// forwardAs is forward for caller c: the request carries its token, or
// its anon@IP name without one.
func (n *Node) forwardAs(addr string, cmd []byte, timeout time.Duration, cl caller) (fwdResponse, error) {
	var resp fwdResponse
	req := fwdRequest{Cmd: cmd, Node: n.cfg.Name, Token: cl.token}
	if cl.token == "" {
		req.Anon = cl.who
	} else if !n.isServerAddr(addr) {
		return resp, fmt.Errorf("%w: the leader's address %s is not a server's this node knows; a caller's token goes to servers only", errUnsent, addr)
	}
	c := n.fwd.Get(addr)
	if c == nil {
		var err error
		if c, err = n.dialer.Dial(addr, clusterport.ProtoForward, min(timeout, fwdDialTimeout)); err != nil {
			return resp, fmt.Errorf("%w: %v", errUnsent, err)
		}
	}
	c.SetDeadline(time.Now().Add(timeout))
	if err := clusterport.WriteMsg(c, n.fwdRequest(req)); err != nil {
		c.Close()
		// A pooled connection the leader closed fails here, before the
		// command was read: safe to retry on a fresh one.
		return resp, fmt.Errorf("%w: %v", errUnsent, err)
	}
	if err := clusterport.ReadMsg(c, &resp, maxFwdResponse); err != nil {
		c.Close()
		return resp, fmt.Errorf("the leader at %s did not answer (%v): %w", addr, err, errAmbiguous)
	}
	c.SetDeadline(time.Time{})
	n.fwd.Put(addr, c)
	return resp, nil
}

// isServerAddr reports whether addr is a Raft server's cluster address as
// this node knows it: the leader Raft names on a server; on a client, one
// of the servers the change stream it follows lists.
func (n *Node) isServerAddr(addr string) bool {
	if r := n.raftNode(); r != nil {
		if a, _ := r.LeaderWithID(); string(a) == addr {
			return true
		}
	}
	st, f := n.followerState()
	if f == nil {
		return false
	}
	for _, s := range st.Status.Servers {
		if s.Addr == addr {
			return true
		}
	}
	return false
}
