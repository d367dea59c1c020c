package node

import (
	"strings"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/raftfsm"
)

// Virtual servers (DESIGN §9): a token's and a profile's tools
// allow-lists. The FSM refuses a load the agent's profile does not
// allow; the node the client attached to refuses what its token does not
// allow (and fwdauth again on the leader for a forwarded load); a routed
// call carries the token's list and the node that runs it checks both
// lists again.

// checkLimit refuses the first name the list does not allow.
func checkLimit(names []string, tools []string) error {
	for _, name := range names {
		if err := acl.CheckAllowed(name, tools); err != nil {
			return err
		}
	}
	return nil
}

// agentTools are the allow-lists of an agent, its profile's and its
// maker's token's (none for no such agent: what is asked of it fails on
// its own).
func (n *Node) agentTools(session, agent string) [][]string {
	if a, err := n.agent(session, agent); err == nil {
		return [][]string{a.Tools, a.Limit}
	}
	return nil
}

// allowedLines keeps the lines of a tools_all answer whose tool every
// list allows.
func allowedLines(text string, lists ...[]string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(text, "\n") {
		name, _, _ := strings.Cut(l, "\t")
		if l != "" && acl.Allowed(strings.TrimSpace(name), lists...) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// toolsSuffix is token/idx's third column.
func toolsSuffix(tools []string) string {
	if len(tools) == 0 {
		return ""
	}
	return " " + strings.Join(tools, ",")
}

// checkRoutedLimit checks a routed call against the list it carries, the
// list of the token it names (as this node has it) and the agent's.
func (n *Node) checkRoutedLimit(req callRequest, a *raftfsm.Agent) error {
	var token []string
	if t, ok := n.fsm.Token(req.Who); ok {
		token = t.Tools
	}
	return acl.CheckAllowed(req.Tool, req.Tools, token, a.Tools, a.Limit)
}

// ToolsAll is tools_all for the principal: what its token allows too.
func (a auditBackend) ToolsAll(session, agent string) string {
	return allowedLines(a.Node.ToolsAll(session, agent), a.tools)
}
