package node

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// Canaries (DESIGN §8): this node serves in t/ and runs the version of
// each tool live for it (raftfsm.FSM.ToolFor), its canary's when it is
// one of the canary's nodes; v/NAME/ctl proposes canary, promote and
// abort.

var _ p9.Canaries = (*Node)(nil)

// liveTool is the record of tool name live on this node.
func (n *Node) liveTool(name string) (*raftfsm.Tool, bool) {
	return n.fsm.ToolFor(name, n.cfg.Name)
}

// liveTools lists every tool's record live on this node, sorted by name.
func (n *Node) liveTools() []*raftfsm.Tool {
	return n.fsm.ToolsFor(n.cfg.Name)
}

// Canary marks tool name's next publish as a canary live on nodes only.
func (n *Node) Canary(name string, nodes []string, manual bool) error {
	return n.canary(caller{}, name, nodes, manual)
}

func (n *Node) canary(c caller, name string, nodes []string, manual bool) error {
	_, err := n.applyFor(c, raftfsm.CmdCanary, raftfsm.SetCanary{
		Name: name, Nodes: nodes, Manual: manual, Publisher: publisherName(c.who), Time: nowNano(),
	})
	if err != nil {
		n.logger.Printf("versions: refused the canary of %s on %s by %s: %v", name, strings.Join(nodes, ","), orNode(c.who), err)
		return canaryErr("canary", name, err)
	}
	how := ""
	if manual {
		how = " (manual)"
	}
	n.logger.Printf("versions: %s made the next publish of %s a canary on %s%s", orNode(c.who), name, strings.Join(nodes, ","), how)
	return nil
}

// Promote makes tool name's canary live everywhere and returns its version.
func (n *Node) Promote(name string) (uint64, error) { return n.promote(caller{}, name) }

func (n *Node) promote(c caller, name string) (uint64, error) {
	r, err := n.applyFor(c, raftfsm.CmdPromote, raftfsm.Promote{Name: name, Publisher: publisherName(c.who), Time: nowNano()})
	if err != nil {
		n.logger.Printf("versions: refused the promote of %s by %s: %v", name, orNode(c.who), err)
		return 0, canaryErr("promote", name, err)
	}
	v, err := strconv.ParseUint(r.Name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("promote of %s: the cluster answered %q, not a version", name, r.Name)
	}
	n.logger.Printf("versions: %s promoted the canary of %s: live everywhere as version %d", orNode(c.who), name, v)
	return v, nil
}

// Abort drops tool name's canary: its nodes go back to the live version.
func (n *Node) Abort(name string) error { return n.abort(caller{}, name, "") }

func (n *Node) abort(c caller, name, reason string) error {
	_, err := n.applyFor(c, raftfsm.CmdAbort, raftfsm.Abort{Name: name, Publisher: publisherName(c.who), Time: nowNano(), Reason: reason})
	if err != nil {
		n.logger.Printf("versions: refused the abort of the canary of %s by %s: %v", name, orNode(c.who), err)
		return canaryErr("abort", name, err)
	}
	n.logger.Printf("versions: %s aborted the canary of %s", orNode(c.who), name)
	return nil
}

// canaryErr names the command in an error that does not already say
// what was refused.
func canaryErr(cmd, name string, err error) error {
	if strings.HasPrefix(err.Error(), "invalid") || strings.HasPrefix(err.Error(), "permission denied") {
		return err
	}
	return fmt.Errorf("%s of %s: %w", cmd, name, err)
}

// checkCanary is the leader's check of a canary, promote or abort command
// before it appends it: the state's (raftfsm.FSM.CheckCanary), and, for
// a canary, that each node it names is a member (of gossip or of the Raft
// configuration).
func (n *Node) checkCanary(data []byte) error {
	if err := n.fsm.CheckCanary(raftfsm.Unwrap(data)); err != nil {
		return err
	}
	cmd := raftfsm.Unwrap(data)
	if len(cmd) == 0 || raftfsm.CommandType(cmd[0]) != raftfsm.CmdCanary {
		return nil
	}
	var c raftfsm.SetCanary
	if json.Unmarshal(cmd[1:], &c) != nil {
		return nil // Validate has refused it
	}
	known := map[string]string{}
	roles, _ := n.roles()
	for id, r := range roles {
		known[id] = r
	}
	for _, m := range n.gossip.Members() {
		known[m.Name] = "member"
	}
	for _, name := range c.Nodes {
		if _, ok := known[name]; !ok {
			return fmt.Errorf("%w canary: no node %s", raftfsm.ErrInvalid, name)
		}
	}
	return nil
}

func (a auditBackend) Canary(name string, nodes []string, manual bool) error {
	start := time.Now()
	err := a.Node.canary(a.caller(), name, nodes, manual)
	a.record(start, a.who, "canary", name+"@"+strings.Join(nodes, ","), err)
	return err
}

func (a auditBackend) Promote(name string) (uint64, error) {
	start := time.Now()
	v, err := a.Node.promote(a.caller(), name)
	a.record(start, a.who, "promote", name, err)
	return v, err
}

func (a auditBackend) Abort(name string) error {
	start := time.Now()
	err := a.Node.abort(a.caller(), name, "")
	a.record(start, a.who, "abort", name, err)
	return err
}

// The automatic abort (DESIGN §8): each canary node counts the outcomes
// of the canary version's calls it runs and reports them to the leader
// at most once a second while it has new ones (a canary-report command);
// the leader aborts a canary that is Failing, with a log line, an audit
// line and the abort event.

// canaryReportEvery is how often a canary node reports new outcomes and
// the leader looks for failing canaries.
const canaryReportEvery = time.Second

// canaryOutcome is the count of a canary version's calls not yet
// reported.
type canaryOutcome struct {
	version       uint64
	calls, failed int64
}

// canaryTally holds the outcomes of the canary calls run here since the
// last report, by tool.
type canaryTally struct {
	mu  sync.Mutex
	out map[string]canaryOutcome
}

// noteCanaryCall counts one call of t run here when t is the canary
// version live on this node.
func (n *Node) noteCanaryCall(t *raftfsm.Tool, err error) {
	c, ok := n.fsm.Canary(t.Name)
	if !ok || !c.On(n.cfg.Name) || c.Tool.Version != t.Version {
		return
	}
	n.tally.mu.Lock()
	defer n.tally.mu.Unlock()
	if n.tally.out == nil {
		n.tally.out = map[string]canaryOutcome{}
	}
	o := n.tally.out[t.Name]
	if o.version != t.Version {
		o = canaryOutcome{version: t.Version}
	}
	o.calls++
	if err != nil {
		o.failed++
	}
	n.tally.out[t.Name] = o
}

// watchCanaries reports this node's canary outcomes and, on the leader,
// aborts the failing canaries, each canaryReportEvery.
func (n *Node) watchCanaries() {
	defer n.wg.Done()
	tick := time.NewTicker(canaryReportEvery)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		n.reportCanaries()
		if n.leading() {
			n.abortFailing()
		}
	}
}

// reportCanaries proposes the outcomes counted since the last report.
func (n *Node) reportCanaries() {
	n.tally.mu.Lock()
	out := n.tally.out
	n.tally.out = nil
	n.tally.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(out)) {
		o := out[name]
		_, err := n.apply(raftfsm.CmdCanaryReport, raftfsm.CanaryReport{
			Name: name, Version: o.version, Node: n.cfg.Name, Calls: o.calls, Failed: o.failed,
		})
		if err != nil {
			// A canary promoted or aborted since: nothing to count.
			n.logger.Printf("versions: the report of %d calls (%d failed) of canary %s version %d was not counted: %v", o.calls, o.failed, name, o.version, err)
		}
	}
}

// abortFailing aborts every failing canary; run on the leader.
func (n *Node) abortFailing() {
	for _, c := range n.fsm.Canaries() {
		if !c.Failing() {
			continue
		}
		start := time.Now()
		reason := fmt.Sprintf("%d of its %d calls failed", c.Failed, c.Calls)
		err := n.abort(caller{}, c.Name, "automatic: "+reason)
		n.record(start, "node:"+n.cfg.Name, "abort", c.Name+"@"+strconv.FormatUint(c.Tool.Version, 10)+" (automatic: "+reason+")", err)
		if err == nil {
			n.logger.Printf("versions: aborted the canary of %s, version %d on %s: %s (more than half of at least %d)", c.Name, c.Tool.Version, strings.Join(c.Nodes, ","), reason, raftfsm.FailMinCalls)
		}
	}
}
