package acl

import (
	"fmt"
	"path"
	"strings"
)

// Tool allow-lists (DESIGN §9 "Virtual servers"): a token or a profile may
// name the tools its holder can load and call, as glob patterns
// (path.Match: *, ?, [...]). An empty list allows every tool.

// MaxToolPatterns bounds a list; MaxToolPattern one pattern's length.
const (
	MaxToolPatterns = 64
	MaxToolPattern  = 128
)

// ParseTools reads "PATTERN[,PATTERN]" as token/new's tools= takes it.
func ParseTools(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	pats := strings.Split(s, ",")
	return pats, CheckTools(pats)
}

// CheckTools checks an allow-list: at most 64 patterns of 1 to 128
// printable characters without spaces or commas, each a valid glob.
func CheckTools(pats []string) error {
	if len(pats) > MaxToolPatterns {
		return fmt.Errorf("%w tools: more than %d patterns", ErrInvalid, MaxToolPatterns)
	}
	for _, p := range pats {
		if p == "" || len(p) > MaxToolPattern {
			return fmt.Errorf("%w tools pattern %q: want 1 to %d characters", ErrInvalid, p, MaxToolPattern)
		}
		for _, r := range p {
			if r <= ' ' || r == ',' || r == 0x7f {
				return fmt.Errorf("%w tools pattern %q: no spaces, commas or control characters", ErrInvalid, p)
			}
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%w tools pattern %q: %v", ErrInvalid, p, err)
		}
	}
	return nil
}

// Matches reports whether name matches one of pats; an empty list
// matches every name.
func Matches(pats []string, name string) bool {
	if len(pats) == 0 {
		return true
	}
	for _, p := range pats {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Allowed reports whether every list allows name.
func Allowed(name string, lists ...[]string) bool {
	for _, l := range lists {
		if !Matches(l, name) {
			return false
		}
	}
	return true
}

// CheckAllowed is nil when every list allows name, else the refusal
// DESIGN §9 names.
func CheckAllowed(name string, lists ...[]string) error {
	if Allowed(name, lists...) {
		return nil
	}
	return fmt.Errorf("permission denied: tool %s is not allowed here", name)
}
