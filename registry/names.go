package registry

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameLen is the longest tool or profile name, in bytes.
const MaxNameLen = 128

// nameRule is the naming rule in words, appended to every name error.
const nameRule = "a name is 1 to 128 characters from [A-Za-z0-9_.-], starts with a letter or digit, and contains no \"/\""

// ValidName reports whether name is a valid tool or profile name:
// [A-Za-z0-9][A-Za-z0-9_.-]{0,127}. ("." and ".." and anything with "/"
// are excluded by that pattern.) The error wraps ErrInvalidName and is a
// sentence naming the name, what is wrong with it and the rule.
func ValidName(name string) error {
	reason := nameProblem(name)
	if reason == "" {
		return nil
	}
	return fmt.Errorf("%w %q: %s; %s", ErrInvalidName, name, reason, nameRule)
}

// nameProblem returns what is wrong with name, or "" when it is valid.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case name == "." || name == "..":
		return "it is a relative directory name"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("it is %d bytes long", len(name))
	case strings.Contains(name, "/"):
		return "it contains \"/\""
	}
	for i, r := range name {
		switch {
		case r < utf8.RuneSelf && isAlnum(byte(r)):
		case i == 0:
			return fmt.Sprintf("it starts with %q", r)
		case r == '_' || r == '.' || r == '-':
		default:
			return fmt.Sprintf("it contains %q", r)
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
