package node

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
)

// Sessions lists the sessions.
func (n *Node) Sessions() ([]string, error) {
	if err := n.caughtUp(); err != nil {
		return nil, err
	}
	return n.fsm.SessionNames(), nil
}

// parseSpec splits "k=v k=v" into a map, allowing only the given keys.
func parseSpec(spec, usage string, keys ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Fields(spec) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("cannot read %q: write %s", f, usage)
		}
		known := false
		for _, key := range keys {
			known = known || key == k
		}
		if !known {
			return nil, fmt.Errorf("unknown key %q: write %s", k, usage)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s= given twice: write %s", k, usage)
		}
		out[k] = v
	}
	return out, nil
}

// NewSession creates a session from "name=S [agent=PROFILE] [cwd=DIR]",
// owned by no one, for the node itself: on the leader only, since a
// write the node forwards for itself may only publish (fwdauth); a 9P
// client's is owned by its principal (owner.go).
func (n *Node) NewSession(spec string) (string, error) { return n.newSession(caller{}, spec) }

// newSession is NewSession made by c, its owner.
func (n *Node) newSession(c caller, spec string) (string, error) {
	const usage = "name=S [agent=PROFILE] [cwd=DIR]"
	kv, err := parseSpec(spec, usage, "name", "agent", "cwd")
	if err != nil {
		return "", err
	}
	cwd := kv["cwd"]
	if cwd != "" {
		// Checked here, on the node the session is made on, before it is
		// replicated; a call re-checks it on the node that runs it.
		if cwd, err = n.checkCwd(cwd); err != nil {
			return "", err
		}
	}
	r, err := n.applyFor(c, raftfsm.CmdCreateSession, raftfsm.CreateSession{
		Name: kv["name"], Owner: c.who, Cwd: cwd, Profile: kv["agent"], Time: nowNano(), Limit: c.tools,
	})
	return r.Name, err
}

// KillSession removes a session for the node itself.
func (n *Node) KillSession(session string) error { return n.killSession(caller{}, session) }

func (n *Node) killSession(c caller, session string) error {
	_, err := n.applyFor(c, raftfsm.CmdKillSession, raftfsm.KillSession{Name: session})
	return err
}

// Agents lists a session's agents.
func (n *Node) Agents(session string) ([]string, error) {
	if err := n.caughtUp(); err != nil {
		return nil, err
	}
	names, ok := n.fsm.AgentNames(session)
	if !ok {
		return nil, fmt.Errorf("session %q does not exist: %w", session, p9.ErrNotFound)
	}
	return names, nil
}

// The node's walks find names at once (p9.Walker).
var _ p9.Walker = (*Node)(nil)

// WalkSession finds a session for a walk: at once when this node has it;
// else once this node has applied every write acknowledged through it (a
// session just made through this node, answered at commit, see
// appliedLater); else once the node is current with the leader (a session
// just created through another node is found, never "not found"). What
// the walk reaches checks again when it is read.
func (n *Node) WalkSession(session string) error {
	if n.fsm.HasSession(session) || n.ownWritesApplied() && n.fsm.HasSession(session) {
		return nil
	}
	_, err := n.Agents(session)
	return err
}

// WalkAgent finds an agent for a walk, as WalkSession does a session.
func (n *Node) WalkAgent(session, agent string) error {
	has := func() bool {
		_, err := n.fsm.Agent(session, agent)
		return err == nil
	}
	if has() || n.ownWritesApplied() && has() {
		return nil
	}
	_, err := n.agent(session, agent)
	return err
}

// NewAgent creates an agent from "name=A [profile=P]", for the node
// itself.
func (n *Node) NewAgent(session, spec string) (string, error) {
	return n.newAgent(caller{}, session, spec)
}

func (n *Node) newAgent(c caller, session, spec string) (string, error) {
	kv, err := parseSpec(spec, "name=A [profile=P]", "name", "profile")
	if err != nil {
		return "", err
	}
	r, err := n.applyFor(c, raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: session, Name: kv["name"], Profile: kv["profile"], Limit: c.tools})
	return r.Name, err
}

// KillAgent removes an agent for the node itself.
func (n *Node) KillAgent(session, agent string) error { return n.killAgent(caller{}, session, agent) }

func (n *Node) killAgent(c caller, session, agent string) error {
	_, err := n.applyFor(c, raftfsm.CmdKillAgent, raftfsm.KillAgent{Session: session, Name: agent})
	return err
}

func (n *Node) agent(session, agent string) (*raftfsm.Agent, error) {
	if err := n.caughtUp(); err != nil {
		return nil, err
	}
	a, err := n.fsm.Agent(session, agent)
	if errors.Is(err, raftfsm.ErrNotFound) {
		return nil, fmt.Errorf("%v: %w", err, p9.ErrNotFound)
	}
	return a, err
}

// Loaded is an agent's loaded set.
func (n *Node) Loaded(session, agent string) ([]string, error) {
	a, err := n.agent(session, agent)
	if err != nil {
		return nil, err
	}
	return a.Loaded, nil
}

// Rev is an agent's revision.
func (n *Node) Rev(session, agent string) (uint64, error) {
	a, err := n.agent(session, agent)
	if err != nil {
		return 0, err
	}
	return a.Rev, nil
}

func checkNames(names []string) error {
	if len(names) == 0 {
		return errors.New("no tool name given")
	}
	for _, name := range names {
		if isBuiltin(name) {
			return fmt.Errorf("%s is built in: every agent always has it", name)
		}
		if err := registry.ValidName(name); err != nil {
			return err
		}
	}
	return nil
}

// Load loads tools for an agent, for the node itself.
func (n *Node) Load(session, agent string, names []string) error {
	return n.load(caller{}, session, agent, names)
}

func (n *Node) load(c caller, session, agent string, names []string) error {
	if err := checkNames(names); err != nil {
		return err
	}
	if err := checkLimit(names, c.tools); err != nil {
		return err
	}
	_, err := n.applyFor(c, raftfsm.CmdLoad, raftfsm.Load{Session: session, Agent: agent, Names: names})
	return err
}

// Unload unloads tools, for the node itself.
func (n *Node) Unload(session, agent string, names []string) error {
	return n.unload(caller{}, session, agent, names)
}

func (n *Node) unload(c caller, session, agent string, names []string) error {
	if err := checkNames(names); err != nil {
		return err
	}
	_, err := n.applyFor(c, raftfsm.CmdUnload, raftfsm.Unload{Session: session, Agent: agent, Names: names})
	return err
}

// ToolsAll is tools_all for an agent: the tools its profile's allow-list
// allows (toolsAll).
func (n *Node) ToolsAll(session, agent string) string {
	return allowedLines(n.toolsAll(), n.agentTools(session, agent)...)
}

// toolsAll lists every tool the cluster knows with the nodes that can run
// it ("-" for none).
func (n *Node) toolsAll() string {
	var b strings.Builder
	for _, t := range n.fsm.Tools() {
		if !t.Published() {
			continue
		}
		desc, where := "", "-"
		capable := n.capableNodes(t.Name)
		if e, ok := n.catalog.Get(t.Name); ok && e.Err == nil {
			desc = docMetaOf(e, capable).Description
		}
		var names []string
		for _, c := range capable {
			names = append(names, c.Node)
		}
		if len(names) > 0 {
			where = strings.Join(names, ",")
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\n", t.Name, oneLine(desc), where)
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Preamble is the agent's tool preamble: the compact listing of the tools
// it can discover, then the full prompt of each tool it has loaded.
func (n *Node) Preamble(session, agent string) (string, error) {
	a, err := n.agent(session, agent)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Tools\n\n")
	b.WriteString("Load a tool with tool_load {\"name\":\"NAME\"} before calling it; tool_unload {\"name\":\"NAME\"} unloads it; tools_all {} lists every tool in the cluster.\n\n")
	for _, t := range n.catalog.Visible() {
		fmt.Fprintf(&b, "%s: %s\n", t.Name, oneLine(t.Description))
	}
	if len(a.Loaded) > 0 {
		b.WriteString("\n# Loaded tools\n")
	}
	for _, name := range a.Loaded {
		m, err := n.docMeta(name)
		if err != nil {
			fmt.Fprintf(&b, "\n## %s\n\n(unavailable: %v)\n", name, err)
			continue
		}
		text := strings.TrimSpace(m.Prompt)
		if text == "" {
			text = m.Description
		}
		// Prompts usually open with their own heading ("## NAME").
		if !strings.HasPrefix(text, "#") {
			text = "## " + name + "\n\n" + text
		}
		fmt.Fprintf(&b, "\n%s\n", text)
	}
	return b.String(), nil
}
