package node

import (
	"context"
	"strings"
	"time"

	"github.com/toolnode/toolnode/audit"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// The audit log (Config.AuditFile) has one line per state change and per
// call. 9P requests are recorded by auditBackend, the Backend each 9P
// connection is bound to, with the connection's principal; the node's own
// publications from its directories with who "node:NAME"; a call routed
// here from another node with the principal the caller sent and via the
// calling node (the calling node records the same call as its own).

// auditBackend is the Backend of one principal on a 9P connection: the
// node's, with every state-changing method timed and recorded (when the
// audit log is on), and sessions kept to their makers (owner.go).
type auditBackend struct {
	*Node
	who    string
	role   p9.Role
	secret string   // the token it attached with, "" without one
	tools  []string // its token's tools allow-list (nil: every tool)
}

var (
	_ p9.Backend     = auditBackend{}
	_ p9.CallStarter = auditBackend{}
)

// bind is p9.Options.Bind.
func (n *Node) bind(p p9.Principal) p9.Backend {
	return auditBackend{Node: n, who: p.Name, role: p.Role, secret: p.Secret, tools: p.Tools}
}

// caller is whom the principal's writes are made for, as the leader
// authorizes them when they are forwarded.
func (a auditBackend) caller() caller { return caller{who: a.who, token: a.secret, tools: a.tools} }

// record writes one audit line for an action that started at start; it
// does nothing without the audit log.
func (n *Node) record(start time.Time, who, action, target string, err error) {
	n.recordVia(start, who, "", action, target, err)
}

// recordVia is record for an action another node sent here for who: a
// forwarded write, on the leader.
func (n *Node) recordVia(start time.Time, who, via, action, target string, err error) {
	if n.audit == nil {
		return
	}
	n.audit.Write(audit.Record{
		Time: start, Node: n.cfg.Name, Who: who, Via: via, Action: action, Target: target,
		Err: err, Duration: time.Since(start),
	})
}

// recordRouted records a call routed here from another node: who the
// caller called for (else the calling node), via the calling node.
func (n *Node) recordRouted(start time.Time, req callRequest, err error) {
	if n.audit == nil {
		return
	}
	who := req.Who
	if who == "" {
		who = "node:" + req.From
	}
	n.audit.Write(audit.Record{
		Time: start, Node: n.cfg.Name, Who: who, Via: req.From, Action: "call",
		Target: req.Session + "/" + req.Agent + "/" + req.Tool, Err: err, Duration: time.Since(start),
	})
}

// applyOwn is apply for the node's own publications from its
// directories, recorded with who "node:NAME" and the names as target.
func (n *Node) applyOwn(action string, names []string, t raftfsm.CommandType, body any) (raftfsm.Result, error) {
	start := time.Now()
	r, err := n.apply(t, body)
	if n.audit != nil {
		n.record(start, "node:"+n.cfg.Name, action, strings.Join(names, ","), err)
	}
	return r, err
}

func toolNames(specs []raftfsm.ToolSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

func profileNames(specs []raftfsm.ProfileSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// ReopenAudit reopens the audit log file (after logrotate moved it).
func (n *Node) ReopenAudit() error {
	if n.audit == nil {
		return nil
	}
	if err := n.audit.Reopen(); err != nil {
		n.logger.Printf("audit: reopening %s: %v", n.audit.Path(), err)
		return err
	}
	n.logger.Printf("audit: reopened %s", n.audit.Path())
	return nil
}

func (a auditBackend) PublishToolMeta(name string, data []byte) error {
	start := time.Now()
	err := a.Node.publishToolMeta(a.caller(), name, data)
	a.record(start, a.who, "publish-meta", name, err)
	return err
}

func (a auditBackend) PublishToolExec(name string, up p9.ExecUpload, size int64, mode uint32) error {
	start := time.Now()
	err := a.Node.publishToolExec(a.caller(), name, up, size, mode)
	a.record(start, a.who, "publish-exec", name, err)
	return err
}

func (a auditBackend) ChmodToolExec(name string, mode uint32) error {
	start := time.Now()
	err := a.Node.chmodToolExec(a.caller(), name, mode)
	a.record(start, a.who, "publish-exec", name, err)
	return err
}

func (a auditBackend) WithdrawTool(name string) error {
	start := time.Now()
	err := a.Node.withdrawTool(a.caller(), name)
	a.record(start, a.who, "withdraw-tool", name, err)
	return err
}

func (a auditBackend) RemoveToolExec(name string) error {
	start := time.Now()
	err := a.Node.removeToolExec(a.caller(), name)
	a.record(start, a.who, "remove-exec", name, err)
	return err
}

func (a auditBackend) PublishProfile(name string, data []byte) error {
	start := time.Now()
	err := a.Node.publishProfile(a.caller(), name, data)
	a.record(start, a.who, "publish-profile", name, err)
	return err
}

func (a auditBackend) WithdrawProfile(name string) error {
	start := time.Now()
	err := a.Node.withdrawProfile(a.caller(), name)
	a.record(start, a.who, "withdraw-profile", name, err)
	return err
}

func (a auditBackend) NewSession(spec string) (string, error) {
	start := time.Now()
	name, err := a.Node.newSession(a.caller(), spec)
	target := name
	if err != nil {
		target = spec
	}
	a.record(start, a.who, "new-session", target, err)
	return name, err
}

func (a auditBackend) KillSession(session string) error {
	if err := a.mayUse(session); err != nil {
		return err
	}
	start := time.Now()
	err := a.Node.killSession(a.caller(), session)
	a.record(start, a.who, "kill-session", session, err)
	return err
}

func (a auditBackend) NewAgent(session, spec string) (string, error) {
	if err := a.mayUse(session); err != nil {
		return "", err
	}
	start := time.Now()
	name, err := a.Node.newAgent(a.caller(), session, spec)
	target := session + "/" + name
	if err != nil {
		target = session + " " + spec
	}
	a.record(start, a.who, "new-agent", target, err)
	return name, err
}

func (a auditBackend) KillAgent(session, agent string) error {
	if err := a.mayUse(session); err != nil {
		return err
	}
	start := time.Now()
	err := a.Node.killAgent(a.caller(), session, agent)
	a.record(start, a.who, "kill-agent", session+"/"+agent, err)
	return err
}

func (a auditBackend) Load(session, agent string, names []string) error {
	if err := a.mayUse(session); err != nil {
		return err
	}
	start := time.Now()
	err := a.Node.load(a.caller(), session, agent, names)
	a.record(start, a.who, "load", session+"/"+agent+"/"+strings.Join(names, ","), err)
	return err
}

func (a auditBackend) Unload(session, agent string, names []string) error {
	if err := a.mayUse(session); err != nil {
		return err
	}
	start := time.Now()
	err := a.Node.unload(a.caller(), session, agent, names)
	a.record(start, a.who, "unload", session+"/"+agent+"/"+strings.Join(names, ","), err)
	return err
}

func (a auditBackend) Call(ctx context.Context, session, agent, tool string, args []byte) ([]byte, error) {
	if err := a.mayUse(session); err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := a.Node.Call(withCaller(ctx, a.caller()), session, agent, tool, args)
	a.record(start, a.who, "call", session+"/"+agent+"/"+tool, err)
	return out, err
}

// StartCall is p9.CallStarter with the audit line: a call refused by its
// checks is recorded at once, a call that ran when its run ends, with the
// time from the write to the end.
func (a auditBackend) StartCall(ctx context.Context, session, agent, tool string, args []byte) (func(context.Context) ([]byte, error), error) {
	if err := a.mayUse(session); err != nil {
		return nil, err
	}
	start := time.Now()
	target := session + "/" + agent + "/" + tool
	run, err := a.Node.StartCall(withCaller(ctx, a.caller()), session, agent, tool, args)
	if err != nil {
		a.record(start, a.who, "call", target, err)
		return nil, err
	}
	return func(ctx context.Context) ([]byte, error) {
		out, err := run(withCaller(ctx, a.caller()))
		a.record(start, a.who, "call", target, err)
		return out, err
	}, nil
}

type callerKey struct{}

// withCaller carries the caller of a call: its principal to the node the
// call is routed to, its token to the writes a built-in makes.
func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

func whoOf(ctx context.Context) string { return callerOf(ctx).who }
