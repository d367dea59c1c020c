package registry

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		ok     bool
		reason string
	}{
		{name: "simple", input: "grep", ok: true},
		{name: "all classes", input: "A9_b.c-d", ok: true},
		{name: "digit first", input: "9p", ok: true},
		{name: "max length", input: strings.Repeat("a", 128), ok: true},
		{name: "empty", input: "", reason: "empty"},
		{name: "dot", input: ".", reason: "relative directory"},
		{name: "dotdot", input: "..", reason: "relative directory"},
		{name: "too long", input: strings.Repeat("a", 129), reason: "129 bytes"},
		{name: "slash", input: "a/b", reason: `contains "/"`},
		{name: "leading dot", input: ".hidden", reason: "starts with '.'"},
		{name: "leading dash", input: "-x", reason: "starts with '-'"},
		{name: "space", input: "a b", reason: "contains ' '"},
		{name: "unicode", input: "café", reason: "contains 'é'"},
		{name: "nul", input: "a\x00", reason: `contains '\x00'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidName(tt.input)
			if tt.ok {
				if err != nil {
					t.Fatalf("ValidName(%q) = %v, want nil", tt.input, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidName(%q) = nil, want an error", tt.input)
			}
			if !errors.Is(err, ErrInvalidName) {
				t.Errorf("error %v does not wrap ErrInvalidName", err)
			}
			msg := err.Error()
			for _, want := range []string{fmt.Sprintf("%q", tt.input), tt.reason, "[A-Za-z0-9_.-]"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
		})
	}
}
