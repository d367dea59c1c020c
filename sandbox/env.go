package sandbox

import (
	"fmt"
	"strings"
)

// toolEnvAllowed are the variables of the node's environment a sandboxed
// tool receives (DESIGN §7); a name ending in '*' is a prefix. Everything
// else — a gossip key, a token, a certificate path, a cloud credential —
// stays with the node unless the operator names it with -tool-env.
var toolEnvAllowed = []string{
	"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_*", "TZ", "TERM",
	"OLLIE_*", "TMPDIR",
}

// nodeEnvPrefix starts the names of the node's own variables
// (TOOLNODE_GOSSIP_KEY, TOOLNODE_TOKEN, ...). Of them a tool gets only
// TOOLNODE_NODE, which the caller (registry's Runner) sets.
const nodeEnvPrefix = "TOOLNODE_"

// CheckToolEnv validates the names given with -tool-env: each is a
// variable name ([A-Za-z_][A-Za-z0-9_]*), optionally ending in '*' to
// pass every variable with that prefix. The node's own TOOLNODE_*
// variables (its gossip key, its token, its CA) can never be passed: such
// a name is refused, and a prefix never matches them.
func CheckToolEnv(names []string) error {
	for _, n := range names {
		base := strings.TrimSuffix(n, "*")
		if base == "" || !validEnvName(base) {
			return fmt.Errorf("-tool-env %q: not a variable name (letters, digits and _, not starting with a digit; a trailing * passes a prefix)", n)
		}
		if strings.HasPrefix(n, nodeEnvPrefix) {
			return fmt.Errorf("-tool-env %q: the node's own %s variables hold its keys and tokens and are never passed to tools", n, nodeEnvPrefix)
		}
	}
	return nil
}

func validEnvName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// EnvAllowed reports whether the variable name may reach a tool: it is on
// the allow-list or among extra (both may hold prefixes ending in '*').
func EnvAllowed(name string, extra []string) bool {
	if strings.HasPrefix(name, nodeEnvPrefix) {
		return false // TOOLNODE_NODE is set by the caller, never inherited
	}
	match := func(pats []string) bool {
		for _, p := range pats {
			if pre, ok := strings.CutSuffix(p, "*"); ok {
				if strings.HasPrefix(name, pre) {
					return true
				}
			} else if name == p {
				return true
			}
		}
		return false
	}
	return match(toolEnvAllowed) || match(extra)
}
