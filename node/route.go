package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/fwdauth"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/upstream"
)

// A call of a tool this host cannot run goes to an alive node that can
// (gossip tells which), over the cluster port (clusterport.ProtoCall: calls
// one at a time on a connection, which the caller keeps for the next call
// to that node, so the cluster port's handshake is paid once, not per
// call). The result, the error and the exit status come back as
// the runner produced them there, with TOOLNODE_NODE naming that host.
//
// The caller sends its applied Raft index, and the runner first catches
// up to it, so a tool loaded a moment ago through the caller is loaded
// there too. Closing the connection cancels the call (a Tflush on the
// caller's fid, or the caller's node stopping).

// Caps of a routed call's messages, in the cluster port's codec: the
// request carries arguments of at most 1 MiB (DESIGN §3) and a few names;
// the answer, a tool's output up to the runner's cap, base64 in JSON, or
// an error.
const (
	maxCallRequest  = 2 << 20
	maxCallResponse = 4*registry.DefaultOutputCap/3 + 1<<20
)

// callGrace is how long past the call timeout the caller waits for a
// remote answer before it gives up on that node.
const callGrace = 3 * time.Second

// badFor is how long a node that failed a call is passed over while
// another capable node exists.
const badFor = 10 * time.Second

type callRequest struct {
	Session string          `json:"session"`
	Agent   string          `json:"agent"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Index   uint64          `json:"index"`
	// From is the calling node, Who the principal it called for (for the
	// audit log of the node that runs it).
	From string `json:"from,omitempty"`
	Who  string `json:"who,omitempty"`
	// Tools is the allow-list of the caller's token (DESIGN §9), checked
	// again where the call runs.
	Tools []string `json:"tools,omitempty"`
}

type callResponse struct {
	Out []byte `json:"out,omitempty"`
	Err string `json:"err,omitempty"`
}

// router picks the node for a routed call.
type router struct {
	next atomic.Uint64 // round-robin among capable nodes
	mu   sync.Mutex
	bad  map[string]time.Time // node → passed over until
}

func (r *router) markBad(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad == nil {
		r.bad = map[string]time.Time{}
	}
	r.bad[node] = time.Now().Add(badFor)
}

// order returns the candidates to try, starting at the next in turn, the
// recently failed ones last.
func (r *router) order(cands []cluster.Capable) []cluster.Capable {
	if len(cands) == 0 {
		return nil
	}
	start := int(r.next.Add(1) % uint64(len(cands)))
	now := time.Now()
	var good, bad []cluster.Capable
	r.mu.Lock()
	for i := range cands {
		c := cands[(start+i)%len(cands)]
		if until, ok := r.bad[c.Node]; ok && now.Before(until) {
			bad = append(bad, c)
		} else {
			good = append(good, c)
		}
	}
	r.mu.Unlock()
	return append(good, bad...)
}

// capableNodes lists the live nodes that can run tool: this one when its
// catalog says so, and the others as gossip reports them.
func (n *Node) capableNodes(tool string) []cluster.Capable {
	var out []cluster.Capable
	if e, ok := n.catalog.Get(tool); ok && e.Visible {
		out = append(out, cluster.Capable{Node: n.cfg.Name, Variant: e.Variant, Meta: n.meta()})
	}
	for _, c := range n.gossip.Capable(tool) {
		if c.Node != n.cfg.Name {
			out = append(out, c)
		}
	}
	return out
}

// callElsewhere runs a call on another node that can run the tool.
func (n *Node) callElsewhere(ctx context.Context, session, agent, tool string, args []byte) ([]byte, error) {
	var cands []cluster.Capable
	for _, c := range n.gossip.Capable(tool) {
		if c.Node != n.cfg.Name && c.Meta.Cluster != "" {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil, noCapableNode(tool)
	}
	req := callRequest{Session: session, Agent: agent, Tool: tool, Args: args, Index: n.fsm.LastIndex(), From: n.cfg.Name, Who: whoOf(ctx), Tools: callerOf(ctx).tools}
	var lastErr error
	for _, c := range n.route.order(cands) {
		start := time.Now()
		out, err := n.callOn(ctx, c, req)
		if err == nil || !errors.Is(err, errUnsent) {
			n.metrics.Call(tool, c.Node, time.Since(start), err)
			n.metrics.Routed(c.Node, err)
			return out, err
		}
		// It never reached that node: another may do.
		n.route.markBad(c.Node)
		lastErr = err
	}
	return nil, fmt.Errorf("no node that can run tool %q could be reached: %v", tool, lastErr)
}

// callOn sends the call to one node and waits for its answer.
func (n *Node) callOn(ctx context.Context, c cluster.Capable, req callRequest) ([]byte, error) {
	addr := c.Meta.Cluster
	conn := n.callConns.Get(addr)
	if conn == nil {
		var err error
		if conn, err = n.dialer.Dial(addr, clusterport.ProtoCall, 5*time.Second); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", errUnsent, c.Node, err)
		}
	}
	keep := false
	defer func() {
		if !keep {
			conn.Close()
		}
	}()
	deadline := time.Now().Add(n.cfg.CallTimeout + callGrace)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // a flush cancels the call there
	if err := clusterport.WriteMsg(conn, req); err != nil {
		stop()
		return nil, fmt.Errorf("%w: %s: %v", errUnsent, c.Node, err)
	}
	var resp callResponse
	err := clusterport.ReadMsg(conn, &resp, maxCallResponse)
	if !stop() || err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("call of %s on %s cancelled: %w", req.Tool, c.Node, ctx.Err())
		}
		n.route.markBad(c.Node)
		return nil, fmt.Errorf("node %s stopped answering while running %s (it may have failed); the call did not complete: %v", c.Node, req.Tool, err)
	}
	conn.SetDeadline(time.Time{})
	keep = true
	n.callConns.Put(addr, conn)
	if resp.Err != "" {
		return nil, errors.New(resp.Err)
	}
	return resp.Out, nil
}

// Routed calls keep their connections in a clusterport.Pool. A
// connection idle for longer than callReuse is not reused: the runner
// closes connections idle for its CallIdle deadline, and one it is closing
// must not take a call.
const (
	callIdleMax = 16               // idle connections kept per node
	callReuse   = 30 * time.Second // well under the runner's callIdle
)

// serveCall runs the routed calls another node sends on one connection,
// one at a time, until it closes the connection or leaves it idle for
// CallIdle.
func (n *Node) serveCall(c net.Conn) {
	defer c.Close()
	// A node that stops closes the connections it keeps for callers.
	stop := context.AfterFunc(n.ctx, func() { c.Close() })
	defer stop()
	br := bufio.NewReader(c)
	for first := true; ; first = false {
		idle := n.lim.CallIdle
		if first {
			idle = clusterport.HandshakeTimeout
		}
		var req callRequest
		if _, err := clusterport.ReadMsgTimed(br, c, &req, maxCallRequest, idle, n.lim.CallMsg); err != nil {
			switch {
			case errors.Is(err, clusterport.ErrTooBig):
				n.logger.Printf("routed call from %s: %v; closing", c.RemoteAddr(), err)
				c.SetWriteDeadline(time.Now().Add(clusterport.HandshakeTimeout))
				clusterport.WriteMsg(c, callResponse{Err: "routed call refused: " + err.Error()})
			case !first && (errors.Is(err, io.EOF) || (clusterport.IsTimeout(err) && !clusterport.MidMessage(err))):
				// The caller closed its idle connection, or left it idle.
			case clusterport.IsTimeout(err):
				n.logger.Printf("routed call from %s: closing: no complete request within the deadline (%v)", c.RemoteAddr(), n.lim.CallMsg)
			case n.ctx.Err() == nil && !errors.Is(err, net.ErrClosed):
				n.logger.Printf("routed call from %s: %v", c.RemoteAddr(), err)
			}
			return
		}
		if !n.serveOneCall(c, br, req) {
			return
		}
	}
}

// serveOneCall runs one call and answers it; false: the connection is done.
func (n *Node) serveOneCall(c net.Conn, br *bufio.Reader, req callRequest) bool {
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	// The caller sends nothing until it has the answer: a read that
	// returns anything but the deadline set below means it closed the
	// connection (or broke the protocol), and the call is abandoned.
	gone := make(chan bool, 1)
	go func() {
		var b [1]byte
		_, err := br.Read(b[:])
		if err != nil && clusterport.IsTimeout(err) {
			gone <- false
			return
		}
		cancel()
		gone <- true
	}()
	resp := callResponse{}
	start := time.Now()
	out, err := n.runRouted(ctx, req)
	n.recordRouted(start, req, err)
	if err != nil {
		resp.Err = err.Error()
	} else {
		resp.Out = out
	}
	c.SetReadDeadline(time.Now()) // stops the watcher
	if <-gone {
		return false
	}
	c.SetReadDeadline(time.Time{})
	c.SetWriteDeadline(time.Now().Add(clusterport.HandshakeTimeout))
	if err := clusterport.WriteMsg(c, resp); err != nil {
		if ctx.Err() == nil {
			n.logger.Printf("routed call from %s: answering: %v", c.RemoteAddr(), err)
		}
		return false
	}
	c.SetWriteDeadline(time.Time{})
	return true
}

// runRouted checks a routed call against this node's state and runs it.
// A routed call is a call and nothing more (DESIGN §7 "Cluster port"):
// the principal is as the calling member states it, so the call runs a
// tool of the catalog and makes no write here; a built-in, whose loads
// are writes, is done on the node the caller attached to.
func (n *Node) runRouted(ctx context.Context, req callRequest) ([]byte, error) {
	if err := checkRoutedWho(req); err != nil {
		return nil, err
	}
	if isBuiltin(req.Tool) {
		return nil, fmt.Errorf("permission denied: a routed call runs a tool; %s is done on the node the caller attached to, not routed", req.Tool)
	}
	if !n.waitApplied(req.Index, applyTimeout) {
		return nil, fmt.Errorf("node %s has not caught up with the cluster's state; try again", n.cfg.Name)
	}
	a, err := n.agent(req.Session, req.Agent)
	if err != nil {
		return nil, err
	}
	if !a.IsLoaded(req.Tool) {
		return nil, fmt.Errorf("tool %q is not loaded by agent %q", req.Tool, req.Agent)
	}
	if err := n.checkRoutedLimit(req, a); err != nil {
		return nil, err
	}
	e, ok := n.catalog.Get(req.Tool)
	if ok && errors.Is(e.Err, raftfsm.ErrDenied) {
		return nil, fmt.Errorf("node %s does not run tool %q: %w", n.cfg.Name, req.Tool, e.Err)
	}
	if !ok || !e.Visible {
		return nil, fmt.Errorf("node %s cannot run tool %q any more", n.cfg.Name, req.Tool)
	}
	return n.runHere(ctx, req.Session, req.Agent, e, req.Args)
}

// checkRoutedWho refuses a routed call whose principal or calling node
// no node would send: the names land in the audit log as who and via.
func checkRoutedWho(req callRequest) error {
	if !fwdauth.ValidNode(req.From) {
		return errors.New("permission denied: a routed call must name the node that sends it")
	}
	if req.Who == "" || fwdauth.ValidAnon(req.Who) || acl.CheckName(req.Who) == nil {
		return nil // "": the calling node's own call, node:FROM
	}
	return fmt.Errorf("permission denied: a routed call from %s names %q, not a principal (a token's name or anon@IP)", req.From, req.Who)
}

// noCapableNode is the error of a tool no live node can run: for a tool
// of an upstream MCP server, that no live host runs the server; for any
// other, that no live host matches its variants.
func noCapableNode(tool string) error {
	if server, _, ok := upstream.SplitToolName(tool); ok {
		return fmt.Errorf("no live node can run tool %q: no live host runs MCP server %s (its match, its variables, or the server itself)", tool, server)
	}
	return fmt.Errorf("no live node can run tool %q: no live host matches its variants", tool)
}
