package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/catalog"
	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/sandbox"
)

// The node serves the 9P tree.
var _ p9.Backend = (*Node)(nil)

// Built-in tools every agent has.
const (
	builtinLoad   = "tool_load"
	builtinUnload = "tool_unload"
	builtinAll    = "tools_all"
)

func isBuiltin(name string) bool {
	return name == builtinLoad || name == builtinUnload || name == builtinAll
}

// ToolIndex lists the tools visible on this node.
func (n *Node) ToolIndex() []p9.ToolEntry { return n.catalog.Visible() }

// ToolNames lists every published tool.
func (n *Node) ToolNames() []string {
	tools := n.liveTools()
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		// With or without metadata yet: t/ lists what it has, but for a
		// version whose signature does not verify now.
		if t.Published() && n.fsm.TrustError(t) != nil {
			continue
		}
		out = append(out, t.Name)
	}
	return out
}

// ToolMeta returns a tool's metadata as published.
func (n *Node) ToolMeta(name string) ([]byte, bool) {
	t, ok := n.liveTool(name)
	if !ok || !t.Published() {
		return nil, false
	}
	return t.Meta, true
}

// ToolExecutable returns a tool's published executable: its size, and
// its file in the blob store, fetched first when it is not here yet.
func (n *Node) ToolExecutable(name string) (p9.Executable, bool) {
	t, ok := n.liveTool(name)
	if !ok || t.ExecHash == "" {
		return p9.Executable{}, false
	}
	size, _ := n.execSize(t)
	return p9.Executable{Size: size, Open: func() (p9.ExecReader, error) {
		if err := n.waitBlob(n.ctx, t); err != nil {
			return nil, err
		}
		return n.blobs.Store().Open(t.ExecHash)
	}}, true
}

// execSize is the size of t's executable: the one its record carries, or,
// for a record without one (written before executables left the log, or
// an empty file), the stored blob's; false when neither is known.
func (n *Node) execSize(t *raftfsm.Tool) (int64, bool) {
	if t.ExecSize != 0 {
		return t.ExecSize, true
	}
	return n.blobs.Store().Stat(t.ExecHash)
}

// docMeta is the metadata a tool's documentation is drawn from: the
// variant this host resolved, else the published top level.
func (n *Node) docMeta(name string) (registry.Meta, error) {
	e, ok := n.catalog.Get(name)
	if !ok {
		return registry.Meta{}, fmt.Errorf("no tool %q in the cluster", name)
	}
	if errors.Is(e.Err, raftfsm.ErrDenied) {
		return registry.Meta{}, fmt.Errorf("tool %q is not served: %w", name, e.Err)
	}
	if e.Err != nil {
		return registry.Meta{}, fmt.Errorf("tool %q has metadata this node cannot read: %v", name, e.Err)
	}
	return docMetaOf(e, n.capableNodes(name)), nil
}

// docMetaOf is the metadata to document a readable tool by: this host's
// resolution when it can run it, else the variant of the first capable
// node (the host that will run it, as it reported it), else the top level.
func docMetaOf(e *catalog.Entry, capable []cluster.Capable) registry.Meta {
	switch {
	case e.Visible:
		return e.Resolved
	case len(capable) > 0:
		return e.Meta.WithVariant(capable[0].Variant)
	}
	return *e.Meta
}

// ToolDoc is a tool's full documentation.
func (n *Node) ToolDoc(name string) (string, error) {
	name = strings.TrimSpace(name)
	if isBuiltin(name) {
		return builtinDoc(name), nil
	}
	m, err := n.docMeta(name)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", name, m.Description)
	if m.Prompt != "" {
		b.WriteString("\n" + strings.TrimRight(m.Prompt, "\n") + "\n")
	}
	if len(m.Args) > 0 {
		fmt.Fprintf(&b, "\nArguments (JSON Schema): %s\n", compactJSON(m.Args))
	}
	if t, ok := n.liveTool(name); ok {
		how := "from its tools directory"
		if t.Origin == raftfsm.Origin9P {
			how = "through 9P"
		}
		fmt.Fprintf(&b, "\nPublished by %s, %s.\n", t.Owner, how)
	}
	return b.String(), nil
}

func compactJSON(b []byte) string {
	var out strings.Builder
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSpace(out.String())
}

func builtinDoc(name string) string {
	switch name {
	case builtinLoad:
		return "tool_load: load a tool for this agent\n\nCall tool_load {\"name\":\"NAME\"} to make NAME callable; its documentation joins the preamble.\n"
	case builtinUnload:
		return "tool_unload: unload a tool\n\nCall tool_unload {\"name\":\"NAME\"} to remove NAME from this agent's loaded tools.\n"
	default:
		return "tools_all: list every tool in the cluster\n\nCall tools_all {} for NAME<TAB>description<TAB>nodes, one line per tool.\n"
	}
}

// ProfileNames lists the published profiles.
func (n *Node) ProfileNames() []string {
	ps := n.fsm.Profiles()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// Profile returns a profile as published.
func (n *Node) Profile(name string) ([]byte, bool) {
	p, ok := n.fsm.Profile(name)
	if !ok {
		return nil, false
	}
	return p.Data, true
}

// Events returns the node's events after an index.
func (n *Node) Events(ctx context.Context, after uint64) ([]p9.Event, error) {
	return n.events.Events(ctx, after)
}

// LastEvent is the newest event's index.
func (n *Node) LastEvent() uint64 { return n.events.LastEvent() }

// roles are the servers' Raft roles as cluster/members and node show
// them, and the leader's name; a node not among them is a client. A
// client knows them from its server's stream.
func (n *Node) roles() (map[string]string, string) {
	if !n.rep.isServer.Load() {
		return n.clientRoles()
	}
	r := n.raftNode()
	if r == nil {
		return n.clientRoles()
	}
	roles := map[string]string{}
	_, leaderID := r.LeaderWithID()
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			role := "voter"
			if s.Suffrage != raft.Voter {
				role = "nonvoter"
			}
			if s.ID == leaderID {
				role = "leader"
			}
			roles[string(s.ID)] = role
		}
	}
	return roles, string(leaderID)
}

// NodeInfo is the text of the node file.
func (n *Node) NodeInfo() string {
	roles, leader := n.roles()
	role := roles[n.cfg.Name]
	if role == "" {
		role = "client"
	}
	if leader == "" {
		leader = "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name %s\n", n.cfg.Name)
	fmt.Fprintf(&b, "os %s\narch %s\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "role %s\nleader %s\n", role, leader)
	fmt.Fprintf(&b, "gossip %s\ncluster %s\n9p %s\n", n.gossip.LocalAddr(), n.transport.LocalAddr(), n.P9Addr())
	fmt.Fprintf(&b, "tools %d\n", n.catalog.Count())
	fmt.Fprintf(&b, "9p-tls %s\n", onOff(n.p9tls))
	fmt.Fprintf(&b, "sandbox %s\n", n.sandbox)
	return b.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Members is the text of cluster/members.
func (n *Node) Members() string {
	roles, _ := n.roles()
	var b strings.Builder
	for _, m := range n.gossip.Members() {
		role := roles[m.Name]
		if role == "" {
			role = "client"
		}
		// What the node can run, from the capabilities it gossips; until
		// they arrive, the count its node meta carries, if any.
		tools := m.Meta.Tools
		if m.Name == n.cfg.Name {
			tools = n.catalog.Count()
		} else if caps, ok := n.gossip.Capabilities(m.Name); ok {
			tools = len(caps)
		}
		fmt.Fprintf(&b, "%s %s %s %s %d\n", m.Name, m.Addr, m.State, role, tools)
	}
	return b.String()
}

// Where lists the nodes that can run a tool, one a line.
func (n *Node) Where(tool string) (string, error) {
	tool = strings.TrimSpace(tool)
	if t, ok := n.fsm.Tool(tool); !ok || !t.Published() {
		return "", fmt.Errorf("no tool %q in the cluster", tool)
	}
	var b strings.Builder
	for _, c := range n.capableNodes(tool) {
		b.WriteString(c.Node + "\n")
	}
	if b.Len() == 0 {
		return "", noCapableNode(tool)
	}
	return b.String(), nil
}

// Call runs a tool (or a built-in) for an agent: here when this host can
// run it, else on a capable node (see route.go).
func (n *Node) Call(ctx context.Context, session, agent, tool string, args []byte) ([]byte, error) {
	run, err := n.StartCall(ctx, session, agent, tool, args)
	if err != nil {
		return nil, err
	}
	return run(ctx)
}

var _ p9.CallStarter = (*Node)(nil)

// StartCall is p9.CallStarter: it makes every check of a call that needs
// no run — the agent, the arguments (an object, and against the tool's
// schema when it runs here), the tool loaded and known, its executable
// and the session's cwd — and returns the run: the call queue, the
// sandboxed process, or the call routed to a capable node. A built-in
// (tool_load, tool_unload, tools_all) is done here and its run only
// answers.
func (n *Node) StartCall(ctx context.Context, session, agent, tool string, args []byte) (func(context.Context) ([]byte, error), error) {
	a, err := n.agent(session, agent)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		args = []byte("{}")
	}
	if isBuiltin(tool) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("the arguments of %s must be one JSON object", tool)
		}
		out, err := n.callBuiltin(callerOf(ctx), session, agent, tool, obj)
		if err != nil {
			return nil, err
		}
		return func(context.Context) ([]byte, error) { return out, nil }, nil
	}
	if err := acl.CheckAllowed(tool, a.Tools, a.Limit, callerOf(ctx).tools); err != nil {
		return nil, err
	}
	// The object is not decoded here: the Runner's schema check (or the
	// node the call is routed to) reads it; only its kind is checked.
	if !isObject(args) {
		return nil, fmt.Errorf("the arguments of %s must be one JSON object", tool)
	}
	if !a.IsLoaded(tool) {
		if t, known := n.fsm.Tool(tool); !known || !t.Published() {
			return nil, fmt.Errorf("no tool %q in the cluster", tool)
		}
		return nil, fmt.Errorf("tool %q is not loaded by agent %q: load it first with tool_load {\"name\":%q}", tool, agent, tool)
	}
	e, ok := n.catalog.Get(tool)
	if !ok {
		return nil, fmt.Errorf("no tool %q in the cluster", tool)
	}
	if errors.Is(e.Err, raftfsm.ErrDenied) {
		// Its signature does not verify against the keys trusted now:
		// no node runs it.
		return nil, fmt.Errorf("tool %q is not served: %w", tool, e.Err)
	}
	if !e.Visible {
		return func(ctx context.Context) ([]byte, error) {
			return n.callElsewhere(ctx, session, agent, tool, args)
		}, nil
	}
	if e.Tool.Origin == raftfsm.OriginMCP {
		return func(ctx context.Context) ([]byte, error) {
			return n.runUpstream(ctx, e, args, n.callLines.For(session, agent, tool))
		}, nil
	}
	c, err := n.checkHere(ctx, session, agent, e, args)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) ([]byte, error) {
		start := time.Now()
		ctx = sandbox.WithLines(ctx, n.callLines.For(session, agent, tool))
		out, err := n.runChecked(ctx, e, c)
		n.metrics.Call(tool, n.cfg.Name, time.Since(start), err)
		return out, err
	}, nil
}

// isObject reports whether b is one JSON object, without decoding it.
func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// runHere runs a tool this host can run.
func (n *Node) runHere(ctx context.Context, session, agent string, e *catalog.Entry, args []byte) ([]byte, error) {
	if e.Tool.Origin == raftfsm.OriginMCP {
		return n.runUpstream(ctx, e, args, n.callLines.For(session, agent, e.Tool.Name))
	}
	c, err := n.checkHere(ctx, session, agent, e, args)
	if err != nil {
		return nil, err
	}
	return n.runChecked(ctx, e, c)
}

// checkHere makes the checks of a call that runs here: its executable
// found (fetched when it is not here yet), the session's cwd, and the
// Runner's (the arguments against the schema, the command, the sandbox).
func (n *Node) checkHere(ctx context.Context, session, agent string, e *catalog.Entry, args []byte) (*registry.Checked, error) {
	// The catalog checked the signature when it resolved the tool; this
	// checks it against the keys trusted at the call.
	if err := n.fsm.TrustError(e.Tool); err != nil {
		return nil, fmt.Errorf("tool %q is not run: %w", e.Tool.Name, err)
	}
	exec, err := n.ownExecutable(ctx, e.Tool)
	if err != nil {
		return nil, err
	}
	cwd := ""
	if dir, _ := n.fsm.SessionCwd(session); dir != "" {
		if cwd, err = n.checkCwd(dir); err != nil {
			return nil, fmt.Errorf("session %q: %w", session, err)
		}
	}
	meta := e.Resolved
	return n.runner.Check(registry.Invocation{
		Tool: e.Tool.Name, Meta: &meta, Exec: exec, Args: args,
		Session: session, Agent: agent, Cwd: cwd,
	})
}

// runChecked runs a checked call once a slot of the call queue is free,
// counted among the running calls (-metrics) meanwhile.
func (n *Node) runChecked(ctx context.Context, e *catalog.Entry, c *registry.Checked) ([]byte, error) {
	n.metrics.Running(1)
	defer n.metrics.Running(-1)
	if err := n.calls.Acquire(ctx); err != nil {
		return nil, fmt.Errorf("tool %q: %w", e.Tool.Name, err)
	}
	defer n.calls.Release()
	n.procs.Call(1)
	defer n.procs.Call(-1)
	out, err := c.Run(ctx)
	n.rollout.NoteCall(e.Tool, err)
	return out, err
}

// ownExecutable finds the executable a tool runs: the file in this node's
// tools directory when this node published it, else the published
// executable from the blob store (fetched first if it is not here yet),
// else none.
func (n *Node) ownExecutable(ctx context.Context, t *raftfsm.Tool) (string, error) {
	if t.Owner == n.cfg.Name && t.Origin == raftfsm.OriginDir && n.cfg.ToolsDir != "" {
		p := filepath.Join(n.cfg.ToolsDir, t.Name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if t.ExecHash == "" {
		return "", nil
	}
	return n.storedExecutable(ctx, t)
}

// callBuiltin does a built-in for caller c: its loads are c's writes.
func (n *Node) callBuiltin(c caller, session, agent, tool string, args map[string]json.RawMessage) ([]byte, error) {
	if tool == builtinAll {
		return []byte(allowedLines(n.ToolsAll(session, agent), c.tools)), nil
	}
	var name string
	if raw, ok := args["name"]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return nil, fmt.Errorf("%s needs {\"name\":\"NAME\"}", tool)
	}
	if tool == builtinLoad {
		if err := n.load(c, session, agent, []string{name}); err != nil {
			return nil, err
		}
		return []byte("loaded " + name + "\n"), nil
	}
	if err := n.unload(c, session, agent, []string{name}); err != nil {
		return nil, err
	}
	return []byte("unloaded " + name + "\n"), nil
}
