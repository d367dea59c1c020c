package p9

import (
	"fmt"
	"strings"
)

// Role is what a 9P connection may do (DESIGN §7). Each role includes the
// ones before it.
type Role uint8

// The roles, weakest first.
const (
	RoleNone    Role = iota // nothing: the attach is refused
	RoleRead                // walk, stat, read t/, a/, tools, events, node, cluster/
	RoleCall                // sessions, agents, load and unload, calls
	RolePublish             // create, write and remove in t/ and a/
	RoleAdmin               // tokens
)

var roleNames = [...]string{"none", "read", "call", "publish", "admin"}

func (r Role) String() string {
	if int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads a role's name as String writes it.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), nil
		}
	}
	return RoleNone, fmt.Errorf("invalid role %q: want none, read, call, publish or admin", s)
}

// Principal is who a connection attached as: the name of the token it
// presented, or anon@ADDR for an attach without one, and its role.
type Principal struct {
	Name string
	Role Role
	// Tools, when set, limits the tools it may load and call (its
	// token's allow-list, DESIGN §9; glob patterns).
	Tools []string
	// Secret is the token it attached with ("" without one), which a
	// node forwards with a token change so that the leader resolves and
	// authorizes it itself. Never logged or shown.
	Secret string
}

// key tells principals apart: every field, each unable to hold a NUL.
func (p Principal) key() string {
	return p.Name + "\x00" + p.Role.String() + "\x00" + p.Secret + "\x00" + strings.Join(p.Tools, ",")
}
