package acl

import (
	"strings"
	"testing"
)

func TestToolPatterns(t *testing.T) {
	pats, err := ParseTools("echo,search_*")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"echo": true, "search_x": true, "search_": true, "echo2": false, "file_write": false} {
		if got := Matches(pats, name); got != want {
			t.Errorf("Matches(%q) = %v, want %v", name, got, want)
		}
	}
	// Control: no list allows everything.
	if !Matches(nil, "file_write") || !Allowed("file_write", nil, nil) {
		t.Error("an empty list refused a tool")
	}
	if Allowed("file_write", nil, pats) {
		t.Error("one list refusing should refuse")
	}
	err = CheckAllowed("file_write", pats)
	if err == nil || err.Error() != "permission denied: tool file_write is not allowed here" {
		t.Errorf("CheckAllowed = %v", err)
	}
	if p, err := ParseTools(""); err != nil || p != nil {
		t.Errorf("ParseTools(\"\") = %v, %v", p, err)
	}
}

func TestToolPatternsBad(t *testing.T) {
	for _, s := range []string{",", "a,", "[", "a b", strings.Repeat("x", 129), strings.Repeat("a,", 64) + "a"} {
		if _, err := ParseTools(s); err == nil || !strings.HasPrefix(err.Error(), "invalid") {
			t.Errorf("ParseTools(%q) = %v, want invalid", s, err)
		}
	}
}
