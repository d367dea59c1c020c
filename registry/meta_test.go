package registry

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseMeta_Defaults(t *testing.T) {
	m, notes, err := ParseMeta([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes = %q, want none", notes)
	}
	want := Meta{Args: DefaultArgs, Tier: "hot", OutputFormat: "text"}
	if !reflect.DeepEqual(*m, want) {
		t.Errorf("ParseMeta({}) = %+v, want %+v", *m, want)
	}
}

func TestParseMeta_AllFields(t *testing.T) {
	doc := `{
		"description": "search files",
		"prompt": "Use grep to search.\nArgs: pattern.",
		"args": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
		"tier": "warm",
		"scope": "read",
		"outputFormat": "json",
		"cmd": "grep -r \"$PATTERN\" .",
		"resetsCounter": true,
		"variants": [
			{"match": {"os": "linux", "binary": ["rg", "/usr/bin/rg"]}, "cmd": "rg", "resetsCounter": false},
			{"match": {"env": "CI"}, "description": "in CI", "args": {"type": "object"}}
		]
	}`
	m, notes, err := ParseMeta([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("notes = %q, want none", notes)
	}
	f := false
	want := Meta{
		Description:   "search files",
		Prompt:        "Use grep to search.\nArgs: pattern.",
		Args:          json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"}},"required":["pattern"]}`),
		Tier:          "warm",
		Scope:         "read",
		OutputFormat:  "json",
		Cmd:           `grep -r "$PATTERN" .`,
		ResetsCounter: true,
		Variants: []Variant{
			{Match: Match{"os": {"linux"}, "binary": {"rg", "/usr/bin/rg"}}, Cmd: "rg", ResetsCounter: &f},
			{Match: Match{"env": {"CI"}}, Description: "in CI", Args: json.RawMessage(`{"type":"object"}`)},
		},
	}
	if !reflect.DeepEqual(*m, want) {
		t.Errorf("got  %+v\nwant %+v", *m, want)
	}
}

func TestParseMeta_Notes(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		notes []string
	}{
		{name: "legacy readOnly", doc: `{"readOnly": true}`, notes: []string{"legacy field readOnly ignored"}},
		{name: "legacy bypass", doc: `{"bypass": "x"}`, notes: []string{"legacy field bypass ignored"}},
		{name: "both legacy", doc: `{"bypass": 1, "readOnly": false}`, notes: []string{"legacy field readOnly ignored", "legacy field bypass ignored"}},
		{name: "legacy in variant", doc: `{"variants": [{"match": {"os": "linux"}, "readOnly": true}]}`, notes: []string{"legacy field variants[0].readOnly ignored"}},
		{name: "unknown fields ignored silently", doc: `{"author": "x", "version": 3, "Description": 5}`},
		{name: "nested variants", doc: `{"variants": [{"variants": []}]}`, notes: []string{"variants[0]: nested variants ignored"}},
		{name: "top-level match", doc: `{"match": {"os": "linux"}}`, notes: []string{"top-level field match ignored (it belongs in a variant)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, notes, err := ParseMeta([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(notes, tt.notes) {
				t.Errorf("notes = %q, want %q", notes, tt.notes)
			}
		})
	}
}

func TestParseMeta_Valid(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		check func(*Meta) bool
	}{
		{name: "nulls are absent", doc: `{"description": null, "tier": null, "args": null, "variants": null, "resetsCounter": null}`,
			check: func(m *Meta) bool {
				return m.Tier == "hot" && string(m.Args) == `{"type":"object"}` && m.Variants == nil
			}},
		{name: "empty tier is default", doc: `{"tier": ""}`, check: func(m *Meta) bool { return m.Tier == "hot" }},
		{name: "cold", doc: `{"tier": "cold"}`, check: func(m *Meta) bool { return m.Tier == "cold" }},
		{name: "args compacted", doc: `{"args": { "type" : "object" ,
			"properties": {} }}`, check: func(m *Meta) bool { return string(m.Args) == `{"type":"object","properties":{}}` }},
		{name: "empty variants", doc: `{"variants": []}`, check: func(m *Meta) bool { return m.Variants == nil }},
		{name: "variant without match", doc: `{"variants": [{"cmd": "x"}]}`, check: func(m *Meta) bool { return m.Variants[0].Match == nil }},
		{name: "all match keys", doc: `{"variants": [{"match": {"binary": "a", "file": "/b", "os": "linux", "arch": ["amd64", "arm64"], "env": "E", "nenv": "N"}}]}`,
			check: func(m *Meta) bool { return len(m.Variants[0].Match) == 6 && len(m.Variants[0].Match["arch"]) == 2 }},
		{name: "whitespace around", doc: "  \n{\"cmd\": \"x\"}\n ", check: func(m *Meta) bool { return m.Cmd == "x" }},
		{name: "schema with $ref inside", doc: `{"args": {"$defs": {"s": {"type": "string"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/s"}}}}`,
			check: func(m *Meta) bool { return strings.Contains(string(m.Args), "$defs") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _, err := ParseMeta([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(m) {
				t.Errorf("ParseMeta(%s) = %+v", tt.doc, *m)
			}
		})
	}
}

func TestParseMeta_Invalid(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string // a substring of the error
	}{
		{name: "empty", doc: ``, want: "empty document"},
		{name: "not JSON", doc: `{"description": `, want: "not valid JSON"},
		{name: "garbage", doc: `hello`, want: "not valid JSON"},
		{name: "trailing garbage", doc: `{} x`, want: "not valid JSON"},
		{name: "array", doc: `[]`, want: "want a JSON object, got an array"},
		{name: "string", doc: `"x"`, want: "want a JSON object, got a string"},
		{name: "description number", doc: `{"description": 5}`, want: "description: want a string, got a number"},
		{name: "prompt object", doc: `{"prompt": {}}`, want: "prompt: want a string, got an object"},
		{name: "cmd array", doc: `{"cmd": ["ls"]}`, want: "cmd: want a string, got an array"},
		{name: "scope bool", doc: `{"scope": true}`, want: "scope: want a string, got a boolean"},
		{name: "bad tier", doc: `{"tier": "lukewarm"}`, want: `tier: "lukewarm" is not one of hot, warm, cold`},
		{name: "tier number", doc: `{"tier": 1}`, want: "tier: want a string"},
		{name: "bad outputFormat", doc: `{"outputFormat": "yaml"}`, want: `outputFormat: "yaml" is not one of text, json`},
		{name: "resetsCounter string", doc: `{"resetsCounter": "yes"}`, want: "resetsCounter: want true or false, got a string"},
		{name: "args string", doc: `{"args": "object"}`, want: "args: want a JSON Schema object, got a string"},
		{name: "args bool", doc: `{"args": true}`, want: "args: want a JSON Schema object, got a boolean"},
		{name: "args bad type keyword", doc: `{"args": {"type": "objekt"}}`, want: "args: not a valid JSON Schema"},
		{name: "args bad properties", doc: `{"args": {"properties": []}}`, want: "args: not a valid JSON Schema"},
		{name: "args bad regex", doc: `{"args": {"pattern": "("}}`, want: "args: not a valid JSON Schema"},
		{name: "args dangling ref", doc: `{"args": {"$ref": "#/$defs/nope"}}`, want: "args: not a valid JSON Schema"},
		{name: "args external ref", doc: `{"args": {"$ref": "file:///etc/passwd"}}`, want: "args: not a valid JSON Schema"},
		{name: "variants object", doc: `{"variants": {}}`, want: "variants: want an array, got an object"},
		{name: "variant not object", doc: `{"variants": [{}, "x"]}`, want: "variants[1]: want a JSON object, got a string"},
		{name: "unknown match key", doc: `{"variants": [{"match": {"os": "linux"}}, {"match": {"host": "a"}}]}`, want: `variants[1].match: unknown key "host"`},
		{name: "empty match string", doc: `{"variants": [{"match": {"os": ""}}]}`, want: "variants[0].match.os: empty value"},
		{name: "empty match array", doc: `{"variants": [{"match": {"env": []}}]}`, want: "variants[0].match.env: empty value"},
		{name: "empty match element", doc: `{"variants": [{"match": {"env": ["A", ""]}}]}`, want: "variants[0].match.env[1]: empty value"},
		{name: "match number", doc: `{"variants": [{"match": {"arch": 64}}]}`, want: "variants[0].match.arch: want a string or an array of strings, got a number"},
		{name: "match array of numbers", doc: `{"variants": [{"match": {"arch": [64]}}]}`, want: "variants[0].match.arch[0]: want a string, got a number"},
		{name: "match not object", doc: `{"variants": [{"match": "linux"}]}`, want: "variants[0].match: want a JSON object, got a string"},
		{name: "variant bad tier", doc: `{"variants": [{"match": {"os": "linux"}, "tier": "x"}]}`, want: `variants[0].tier: "x" is not one of`},
		{name: "variant bad type", doc: `{"variants": [{"description": 1}]}`, want: "variants[0].description: want a string, got a number"},
		{name: "variant bad args", doc: `{"variants": [{"args": {"type": 3}}]}`, want: "variants[0].args: not a valid JSON Schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, notes, err := ParseMeta([]byte(tt.doc))
			if err == nil {
				t.Fatalf("ParseMeta(%s) = %+v, want an error", tt.doc, m)
			}
			if m != nil || notes != nil {
				t.Errorf("an invalid document gave m=%v notes=%v", m, notes)
			}
			if !errors.Is(err, ErrInvalidMeta) {
				t.Errorf("error %v does not wrap ErrInvalidMeta", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestMeta_JSONRoundTrip(t *testing.T) {
	doc := `{"description":"d","args":{"type":"object","properties":{"n":{"type":"integer"}}},"scope":"write",
		"variants":[{"match":{"os":["linux","freebsd"]},"resetsCounter":false,"tier":"cold"},{"cmd":"x"}]}`
	m, _, err := ParseMeta([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back Meta
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("Unmarshal(%s): %v", data, err)
	}
	if !reflect.DeepEqual(*m, back) {
		t.Errorf("round trip through %s:\n got  %+v\n want %+v", data, back, *m)
	}
	// Decoding applies the rules of ParseMeta.
	if err := json.Unmarshal([]byte(`{"tier":"tepid"}`), &back); !errors.Is(err, ErrInvalidMeta) {
		t.Errorf("Unmarshal of a bad tier: %v, want ErrInvalidMeta", err)
	}
}
