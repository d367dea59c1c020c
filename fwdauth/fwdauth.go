package fwdauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// ErrDenied is every refusal of Resolve and Check; its text starts the
// error's.
var ErrDenied = errors.New("permission denied")

// Kind is the kind of principal a forwarded command is made for.
type Kind uint8

// The kinds of principal.
const (
	Token Kind = iota + 1 // a token the leader resolved
	Anon                  // a token-less caller, anon@IP
	Node                  // the forwarding node itself, node:NAME
)

// Principal is who a forwarded command is made for, as the leader
// resolved it.
type Principal struct {
	Name string // the token's name, anon@IP or node:NAME
	Kind Kind
	Role p9.Role
	Via  string // the node that forwarded it
	// Tools is the token's allow-list (DESIGN §9; nil: every tool).
	Tools []string
}

// State is what Resolve and Check read of the leader's state
// (*raftfsm.FSM).
type State interface {
	TokenByHash(hash string) (*raftfsm.Token, bool)
	Token(name string) (*raftfsm.Token, bool)
	SessionOwner(name string) (string, bool)
}

// maxNodeName bounds a forwarding node's name as it reaches the audit log.
const maxNodeName = 128

// Resolve finds the principal of a command that node forwarded with
// token (the caller's, "" for none) and anon (a token-less caller's
// anon@IP, "" when the node writes for itself).
func Resolve(st State, token, anon, node string) (Principal, error) {
	if !ValidNode(node) {
		return Principal{}, fmt.Errorf("%w: a forwarded command must name the node that forwards it in at most %d printable characters", ErrDenied, maxNodeName)
	}
	switch {
	case token != "":
		t, ok := st.TokenByHash(acl.Hash(token))
		if !ok {
			return Principal{Name: "token", Kind: Token, Via: node}, fmt.Errorf("%w: a command forwarded by node:%s carries an unknown or revoked token", ErrDenied, node)
		}
		r, err := p9.ParseRole(t.Role)
		if err != nil {
			return Principal{Name: t.Name, Kind: Token, Via: node}, fmt.Errorf("%w: token %s has no valid role: %v", ErrDenied, t.Name, err)
		}
		return Principal{Name: t.Name, Kind: Token, Role: r, Via: node, Tools: t.Tools}, nil
	case anon != "":
		if !ValidAnon(anon) {
			return Principal{Name: "node:" + node, Kind: Node, Via: node}, fmt.Errorf("%w: a command forwarded by node:%s without a token names %q, not an anonymous principal (anon@IP)", ErrDenied, node, anon)
		}
		return Principal{Name: anon, Kind: Anon, Role: p9.RoleCall, Via: node}, nil
	}
	return Principal{Name: "node:" + node, Kind: Node, Role: p9.RolePublish, Via: node}, nil
}

// ValidNode reports whether s may name a forwarding node: 1 to 128
// printable characters.
func ValidNode(s string) bool {
	return s != "" && len(s) <= maxNodeName && printable(s)
}

// ValidAnon reports whether s is an anonymous principal: anon@ and an
// address of printable characters without spaces.
func ValidAnon(s string) bool {
	addr, ok := strings.CutPrefix(s, "anon@")
	return ok && addr != "" && len(addr) <= maxNodeName && printable(addr) && !strings.ContainsAny(addr, " ")
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// need is the role p9 asks of a fid for what each command does.
var need = map[raftfsm.CommandType]p9.Role{
	raftfsm.CmdCreateSession:    p9.RoleCall,
	raftfsm.CmdKillSession:      p9.RoleCall,
	raftfsm.CmdCreateAgent:      p9.RoleCall,
	raftfsm.CmdKillAgent:        p9.RoleCall,
	raftfsm.CmdLoad:             p9.RoleCall,
	raftfsm.CmdUnload:           p9.RoleCall,
	raftfsm.CmdPublishTools:     p9.RolePublish,
	raftfsm.CmdWithdrawTools:    p9.RolePublish,
	raftfsm.CmdPublishProfiles:  p9.RolePublish,
	raftfsm.CmdWithdrawProfiles: p9.RolePublish,
	raftfsm.CmdPutToolMeta:      p9.RolePublish,
	raftfsm.CmdPutToolExec:      p9.RolePublish,
	raftfsm.CmdDropToolExec:     p9.RolePublish,
	raftfsm.CmdPutToken:         p9.RoleAdmin,
	raftfsm.CmdRevokeToken:      p9.RoleAdmin,
	raftfsm.CmdRollback:         p9.RolePublish,
	raftfsm.CmdCanary:           p9.RolePublish,
	raftfsm.CmdPromote:          p9.RolePublish,
	raftfsm.CmdAbort:            p9.RolePublish,
	raftfsm.CmdCanaryReport:     p9.RoleAdmin, // a canary node's own
	raftfsm.CmdSetKeepVersions:  p9.RoleAdmin, // the leader's own; a member's is refused
	raftfsm.CmdAddKey:           p9.RoleAdmin,
	raftfsm.CmdRemoveKey:        p9.RoleAdmin,
	raftfsm.CmdPutServer:        p9.RolePublish,
	raftfsm.CmdDropServer:       p9.RolePublish,
}

// fields are the parts of a command's body that Check and Describe read.
type fields struct {
	Name    string   `json:"name"`
	Session string   `json:"session"`
	Agent   string   `json:"agent"`
	Owner   string   `json:"owner"`
	Node    string   `json:"node"`
	Origin  string   `json:"origin"`
	Names   []string `json:"names"`
	Role    string   `json:"role"`
	// Limit is the allow-list a new session's or agent's maker names.
	Limit []string `json:"limit"`
	// Publisher is the principal a version records (raftfsm/versions.go).
	Publisher string `json:"publisher"`
	// By is the principal a trusted key's change records
	// (raftfsm/trust.go).
	By    string `json:"by"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Profiles []struct {
		Name string `json:"name"`
	} `json:"profiles"`
}

func decode(entry []byte) (raftfsm.CommandType, fields, error) {
	cmd := raftfsm.Unwrap(entry)
	var f fields
	if len(cmd) == 0 {
		return 0, f, fmt.Errorf("%w: an empty command", raftfsm.ErrInvalid)
	}
	t := raftfsm.CommandType(cmd[0])
	if err := json.Unmarshal(cmd[1:], &f); err != nil {
		return t, f, fmt.Errorf("%w: %s: cannot decode its body: %v", raftfsm.ErrInvalid, t, err)
	}
	return t, f, nil
}

// Check is nil when p may have the command entry (a log entry, a request
// or not) applied; else the refusal, wrapping ErrDenied (or
// raftfsm.ErrInvalid for a command it cannot read).
func Check(st State, p Principal, entry []byte) error {
	t, f, err := decode(entry)
	if err != nil {
		return err
	}
	role, ok := need[t]
	if !ok {
		return fmt.Errorf("%w: unknown command %s", raftfsm.ErrInvalid, t)
	}
	if p.Kind == Node {
		if f.Publisher != "" {
			return fmt.Errorf("%w: %s may not name a publisher (%q)", ErrDenied, p.Name, f.Publisher)
		}
		return checkNode(st, p, t, f)
	}
	if p.Role < role {
		return fmt.Errorf("%w: needs role %s to %s (%s has %s)", ErrDenied, role, t, p.Name, p.Role)
	}
	if len(p.Tools) > 0 {
		if err := checkTools(p, t, f); err != nil {
			return err
		}
	}
	if f.Publisher != "" && f.Publisher != p.Name {
		return fmt.Errorf("%w: a version published by %s must name it, not %q", ErrDenied, p.Name, f.Publisher)
	}
	if (t == raftfsm.CmdAddKey || t == raftfsm.CmdRemoveKey) && f.By != p.Name {
		return fmt.Errorf("%w: a change to trust/ made by %s must name it, not %q", ErrDenied, p.Name, f.By)
	}
	if p.Role >= p9.RoleAdmin || role != p9.RoleCall {
		return nil
	}
	if t == raftfsm.CmdCreateSession {
		if f.Owner != p.Name {
			return fmt.Errorf("%w: a session made by %s must be its own, not %q's", ErrDenied, p.Name, f.Owner)
		}
		return nil
	}
	session := f.Session
	if t == raftfsm.CmdKillSession {
		session = f.Name
	}
	if owner, ok := st.SessionOwner(session); ok && owner != "" && owner != p.Name {
		return fmt.Errorf("%w: session %q was made by another principal; only its maker and admin may use it", ErrDenied, session)
	}
	return nil
}

// checkTools is Check for a token limited by tools: it manages no tokens
// and loads only what its list allows.
func checkTools(p Principal, t raftfsm.CommandType, f fields) error {
	switch t {
	case raftfsm.CmdPutToken, raftfsm.CmdRevokeToken:
		return fmt.Errorf("%w: a token limited by tools manages no tokens (%s)", ErrDenied, p.Name)
	case raftfsm.CmdCreateSession, raftfsm.CmdCreateAgent:
		if !slices.Equal(f.Limit, p.Tools) {
			return fmt.Errorf("%w: a session or agent made with token %s must carry its tools (%s), not %q", ErrDenied, p.Name, strings.Join(p.Tools, ","), f.Limit)
		}
	case raftfsm.CmdLoad:
		for _, name := range f.Names {
			if !acl.Matches(p.Tools, name) {
				return fmt.Errorf("%w: tool %s is not allowed here", ErrDenied, name)
			}
		}
	}
	return nil
}

// checkNode is Check for node:NAME: its own directories' publications,
// the removal of a revoked token's session, and its own canary reports.
func checkNode(st State, p Principal, t raftfsm.CommandType, f fields) error {
	switch t {
	case raftfsm.CmdPublishTools, raftfsm.CmdWithdrawTools:
		// The tools of the upstream MCP servers a node runs are its own
		// publications too.
		if f.Owner == p.Via && f.Origin == raftfsm.OriginMCP {
			return nil
		}
		if f.Owner != p.Via || f.Origin != "" && f.Origin != raftfsm.OriginDir {
			return fmt.Errorf("%w: %s may %s only as the owner of its own directory's (owner %q, origin dir) or its MCP servers' (origin mcp), not owner %q origin %q", ErrDenied, p.Name, t, p.Via, f.Owner, f.Origin)
		}
		return nil
	case raftfsm.CmdPublishProfiles, raftfsm.CmdWithdrawProfiles, raftfsm.CmdPutServer, raftfsm.CmdDropServer:
		if f.Owner != p.Via || f.Origin != "" && f.Origin != raftfsm.OriginDir {
			return fmt.Errorf("%w: %s may %s only as the owner of its own directory's (owner %q, origin dir), not owner %q origin %q", ErrDenied, p.Name, t, p.Via, f.Owner, f.Origin)
		}
		return nil
	case raftfsm.CmdKillSession:
		owner, ok := st.SessionOwner(f.Name)
		if !ok {
			return nil // the FSM answers that it does not exist
		}
		if acl.CheckName(owner) == nil {
			if _, live := st.Token(owner); !live {
				return nil
			}
		}
		return fmt.Errorf("%w: %s may remove only the sessions of a revoked token; session %q is %q's", ErrDenied, p.Name, f.Name, owner)
	case raftfsm.CmdCanaryReport:
		if f.Node != p.Via {
			return fmt.Errorf("%w: %s may report only its own canary calls, not %s's", ErrDenied, p.Name, f.Node)
		}
		return nil
	}
	return fmt.Errorf("%w: %s may publish and withdraw only its own directories' tools and profiles, not %s", ErrDenied, p.Name, t)
}

// Describe names the command entry for the audit line: its action (the
// command's name) and target (what it names).
func Describe(entry []byte) (action, target string) {
	t, f, _ := decode(entry)
	action = t.String()
	switch t {
	case raftfsm.CmdCreateSession, raftfsm.CmdKillSession, raftfsm.CmdDropToolExec, raftfsm.CmdRevokeToken,
		raftfsm.CmdPutServer, raftfsm.CmdDropServer:
		target = f.Name
	case raftfsm.CmdPutToolMeta, raftfsm.CmdPutToolExec, raftfsm.CmdRollback, raftfsm.CmdAddKey, raftfsm.CmdRemoveKey,
		raftfsm.CmdCanary, raftfsm.CmdPromote, raftfsm.CmdAbort:
		target = f.Name
	case raftfsm.CmdPutToken:
		target = f.Name + " role=" + f.Role
	case raftfsm.CmdCreateAgent, raftfsm.CmdKillAgent:
		target = f.Session + "/" + f.Name
	case raftfsm.CmdLoad, raftfsm.CmdUnload:
		target = f.Session + "/" + f.Agent + "/" + strings.Join(f.Names, ",")
	case raftfsm.CmdWithdrawTools, raftfsm.CmdWithdrawProfiles:
		target = strings.Join(f.Names, ",")
	case raftfsm.CmdPublishTools:
		names := make([]string, len(f.Tools))
		for i, x := range f.Tools {
			names[i] = x.Name
		}
		target = strings.Join(names, ",")
	case raftfsm.CmdPublishProfiles:
		names := make([]string, len(f.Profiles))
		for i, x := range f.Profiles {
			names[i] = x.Name
		}
		target = strings.Join(names, ",")
	}
	return action, target
}
