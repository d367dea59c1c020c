package p9

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/toolnode/toolnode/acl"
)

// Who may do what (DESIGN §7). Every fid carries the Principal of the
// attach it descends from. A walk into a directory's children needs the
// role that listing the directory needs; an open needs the role of what
// it opens for (reading, writing or both); Tcreate, Tremove and a Twstat
// that changes something need the role of writing. Stat needs only an
// attach. What each kind needs:
//
//	read     the root, t/ and a/ (reading), tools, events, node, cluster/,
//	         and writing the question files tools and cluster/where
//	call     session/ and everything under it
//	publish  creating, writing and removing in t/ and a/; writing v/NAME/ctl
//	admin    token/new, token/idx, token/ctl
//
// token/ itself is listed in the root for every role, so a client can see
// that the node has tokens; walking into it needs admin.

// readRole is the role reading (or walking into) a node of kind k needs.
func readRole(k kind) Role {
	switch k {
	case kTokenDir, kTokenNew, kTokenIdx, kTokenCtl:
		return RoleAdmin
	case kSessionDir, kSession, kAgentDir, kAgent, kSessNew, kSessIdx, kSessCtl,
		kAgentNew, kAgentTools, kAgentCtl, kLoaded, kRev, kPreamble, kCall:
		return RoleCall
	}
	return RoleRead
}

// writeRole is the role writing a node of kind k needs (for a directory:
// creating or removing in it).
func writeRole(k kind) Role {
	switch k {
	case kTDir, kADir, kMDir, kTMeta, kTExec, kProfile, kServer, kVCtl, kTSig:
		return RolePublish
	case kTrustNew, kTrustCtl:
		return RoleAdmin
	}
	return readRole(k)
}

// need is nil when who has role r, else the error DESIGN §7 names, with
// what was refused after it.
func need(who Principal, r Role, verb string, n *node) error {
	if who.Role >= r {
		return nil
	}
	return fmt.Errorf("permission denied: needs role %s to %s %s", r, verb, n.path)
}

// principal is who an attach with aname from remote is: Options.Attach
// decides; without one every client is admin, as anon@ADDR. A principal
// with RoleNone, or an error, refuses the attach.
func (s *Server) principal(aname string, remote net.Addr) (Principal, error) {
	if s.opt.Attach == nil {
		return Principal{Name: "anon@" + addrString(remote), Role: RoleAdmin}, nil
	}
	p, err := s.opt.Attach(aname, remote)
	if err != nil {
		if !strings.Contains(err.Error(), "permission denied") {
			err = fmt.Errorf("permission denied: %w", err)
		}
		return Principal{}, err
	}
	if p.Role == RoleNone {
		return Principal{}, errors.New("permission denied: this 9P listener takes no attach without a token: give a token as the attach name")
	}
	return p, nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	return a.String()
}

// DropPrincipal ends every connection that attached as name (a revoked
// token's), cancelling what they have in flight, and returns how many.
func (s *Server) DropPrincipal(name string) int {
	var drop []*conn
	s.mu.Lock()
	for c := range s.conns {
		c.mu.Lock()
		if c.who[name] {
			drop = append(drop, c)
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	for _, c := range drop {
		c.logf("closing connection: its token %q was revoked", name)
		c.cancel()
		c.nc.Close()
	}
	return len(drop)
}

// Principals lists the names connections have attached as, each once.
func (s *Server) Principals() []string {
	seen := map[string]bool{}
	var out []string
	s.mu.Lock()
	for c := range s.conns {
		c.mu.Lock()
		for name := range c.who {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	return out
}

// TokenBackend keeps the tokens the token/ files show. The node
// implements it; a Backend without it serves token/ as empty and refuses
// writes to it.
type TokenBackend interface {
	// NewToken makes a token with a name, a role (read, call, publish
	// or admin) and an optional tools allow-list on behalf of by, and
	// returns its secret: the only time anyone sees it.
	NewToken(by Principal, name string, role Role, tools []string) (secret string, err error)
	// TokenIndex lists the tokens, "NAME ROLE [TOOLS]" one a line,
	// sorted by name.
	TokenIndex() string
	// RevokeToken removes a token cluster-wide: its attaches are refused
	// and its connections ended on every node.
	RevokeToken(by Principal, name string) error
}

var errNoTokens = errors.New("this server keeps no tokens")

// errLimited refuses token/ to a principal whose token is limited by tools.
var errLimited = errors.New("permission denied: a token limited by tools manages no tokens")

// openToken opens a file of token/ for who, an admin whose token is not
// limited by tools.
func (s *Server) openToken(n *node, who Principal) (handle, error) {
	if len(who.Tools) > 0 {
		return nil, errLimited
	}
	tb, _ := s.b.(TokenBackend)
	switch n.kind {
	case kTokenDir:
		return newDirHandle(s, s.b, n)
	case kTokenIdx:
		return newSnapshot(func() ([]byte, error) {
			if tb == nil {
				return nil, nil
			}
			return withNewline([]byte(tb.TokenIndex())), nil
		})
	case kTokenNew:
		return &answer{
			run: perLine(func(_ *req, spec string) ([]byte, error) {
				if tb == nil {
					return nil, errNoTokens
				}
				name, role, tools, err := parseTokenSpec(spec)
				if err != nil {
					return nil, err
				}
				secret, err := tb.NewToken(who, name, role, tools)
				if err != nil {
					return nil, err
				}
				return []byte(secret + "\n"), nil
			}),
		}, nil
	case kTokenCtl:
		return &answer{
			run: perLine(func(_ *req, cmd string) ([]byte, error) {
				if tb == nil {
					return nil, errNoTokens
				}
				f := strings.Fields(cmd)
				if len(f) != 2 || f[0] != "revoke" {
					return nil, fmt.Errorf("invalid command %q: token/ctl takes \"revoke NAME\"", cmd)
				}
				if err := tb.RevokeToken(who, f[1]); err != nil {
					return nil, notFound(err, "file does not exist: no token %q", f[1])
				}
				return []byte("revoked " + f[1] + "\n"), nil
			}),
		}, nil
	}
	return nil, fmt.Errorf("%s cannot be opened", n.path)
}

// parseTokenSpec reads "name=N role=R [tools=PATTERN,...]".
func parseTokenSpec(spec string) (string, Role, []string, error) {
	const usage = `write "name=N role=R [tools=PATTERN,...]", R one of read, call, publish, admin`
	var name, role string
	var tools []string
	for _, f := range strings.Fields(spec) {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case !ok || v == "":
			return "", 0, nil, fmt.Errorf("invalid token request: %q is not KEY=VALUE: %s", f, usage)
		case k == "name":
			name = v
		case k == "role":
			role = v
		case k == "tools":
			var err error
			if tools, err = acl.ParseTools(v); err != nil {
				return "", 0, nil, err
			}
		default:
			return "", 0, nil, fmt.Errorf("invalid token request: unknown key %q: %s", k, usage)
		}
	}
	if name == "" || role == "" {
		return "", 0, nil, fmt.Errorf("invalid token request %q: %s", spec, usage)
	}
	r, err := ParseRole(role)
	if err != nil || r == RoleNone {
		return "", 0, nil, fmt.Errorf("invalid role %q: want read, call, publish or admin", role)
	}
	return name, r, tools, nil
}
