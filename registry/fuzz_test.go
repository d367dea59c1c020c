package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

func FuzzParseMeta(f *testing.F) {
	seeds := []string{
		``,
		`{}`,
		`null`,
		`[]`,
		`{"description": "d", "prompt": "p", "tier": "cold", "scope": "read", "outputFormat": "json", "cmd": "ls", "resetsCounter": true}`,
		`{"args": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}}`,
		`{"args": {"type": "objekt"}}`,
		`{"args": {"pattern": "(["}}`,
		`{"args": {"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}}`,
		`{"args": {"$ref": "file:///etc/passwd"}}`,
		`{"args": {"minLength": 1.0, "multipleOf": 0.1, "enum": []}}`,
		`{"readOnly": true, "bypass": false, "unknown": [1, 2]}`,
		`{"variants": [{"match": {"os": "linux", "arch": ["amd64", "arm64"]}, "cmd": "a"}, {"cmd": "b"}]}`,
		`{"variants": [{"match": {"binary": "/bin/sh", "file": "/", "env": "HOME", "nenv": "X"}, "resetsCounter": false}]}`,
		`{"variants": [{"match": {"host": "x"}}]}`,
		`{"variants": [{"match": {"os": ""}}]}`,
		`{"variants": [1]}`,
		`{"variants": [{"variants": [{}]}]}`,
		`{"description": "\u00e9\ud83d\ude00", "cmd": "\u0000"}`,
		`{"tier": "hot", "tier": "bad"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	host := fakeHost([]string{"/bin/sh"}, []string{"/"}, map[string]string{"HOME": "/home/user"})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, notes, err := ParseMeta(data)
		if err != nil {
			if m != nil || notes != nil {
				t.Fatalf("error %v with a result", err)
			}
			if !errors.Is(err, ErrInvalidMeta) {
				t.Fatalf("error %v does not wrap ErrInvalidMeta", err)
			}
			return
		}
		checkMetaInvariants(t, m)

		// Marshalling and parsing again gives the same Meta.
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, _, err := ParseMeta(out)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out, err)
		}
		if !reflect.DeepEqual(canonical(t, m), canonical(t, back)) {
			t.Fatalf("round trip through %s:\n got  %+v\n want %+v", out, back, m)
		}

		// Resolution never panics and yields a variant-free Meta.
		res, idx, ok := m.Resolve(host)
		if res.Variants != nil || idx >= len(m.Variants) || (len(m.Variants) == 0 && (idx != -1 || !ok)) || (!ok && idx != -1) {
			t.Fatalf("Resolve = (%+v, %d, %v) for %d variants", res, idx, ok, len(m.Variants))
		}
		if ok {
			checkMetaInvariants(t, &res)
		}
	})
}

// checkMetaInvariants checks what every parsed or resolved Meta satisfies.
func checkMetaInvariants(t *testing.T, m *Meta) {
	t.Helper()
	if !slices.Contains([]string{TierHot, TierWarm, TierCold}, m.Tier) {
		t.Fatalf("tier %q", m.Tier)
	}
	if m.OutputFormat != OutputText && m.OutputFormat != OutputJSON {
		t.Fatalf("outputFormat %q", m.OutputFormat)
	}
	checkArgs(t, m.Args)
	for i, v := range m.Variants {
		if v.Tier != "" && !slices.Contains([]string{TierHot, TierWarm, TierCold}, v.Tier) {
			t.Fatalf("variants[%d].tier %q", i, v.Tier)
		}
		if v.OutputFormat != "" && v.OutputFormat != OutputText && v.OutputFormat != OutputJSON {
			t.Fatalf("variants[%d].outputFormat %q", i, v.OutputFormat)
		}
		if v.Args != nil {
			checkArgs(t, v.Args)
		}
		for k, vals := range v.Match {
			if !slices.Contains(matchKeys, k) || len(vals) == 0 || slices.Contains(vals, "") {
				t.Fatalf("variants[%d].match %q: %q", i, k, vals)
			}
		}
	}
}

// checkArgs checks that an accepted args schema is a JSON object that the
// real compiler accepts (so the parse-time subset check never lies).
func checkArgs(t *testing.T, args json.RawMessage) {
	t.Helper()
	if len(args) == 0 || args[0] != '{' || !json.Valid(args) {
		t.Fatalf("args %q is not a JSON object", args)
	}
	if _, err := compileSchema(args); err != nil {
		t.Fatalf("args %s was accepted but does not compile: %v", args, err)
	}
}

// canonical returns a copy of m whose schemas are re-encoded, so that
// Metas that differ only in how their schemas are spelled (json.Marshal
// escapes "&" as \u0026) compare equal.
func canonical(t *testing.T, m *Meta) *Meta {
	t.Helper()
	c := *m
	re := func(raw json.RawMessage) json.RawMessage {
		if raw == nil {
			return nil
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("schema %q: %v", raw, err)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	c.Args = re(c.Args)
	c.Variants = slices.Clone(c.Variants)
	for i := range c.Variants {
		c.Variants[i].Args = re(c.Variants[i].Args)
	}
	return &c
}

// FuzzJSONScan checks the walker over validated JSON against encoding/json.
func FuzzJSONScan(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `"x"`, `1.5e3`, `null`, `true`,
		`{"a": [1, "b", {"c": null}], "d": "\u00e9\"\\", "a": 2}`,
		` { "k" : [ ] , "l" : { } } `,
		"\"\xff\"", `1e400`, `[-0, 0.1, 1E-7]`, `{"\ud800": "\udc00x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		start := skipSpace(data, 0)
		end := valueEnd(data, start)
		if skipSpace(data, end) != len(data) {
			t.Fatalf("valueEnd(%q) = %d: it stopped before the end of the value", data, end)
		}
		trimmed := data[start:end]
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			return // a number out of range
		}
		got := toAny(trimmed)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("toAny(%q) = %#v, encoding/json gives %#v", data, got, want)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			t.Fatal(err)
		}
		if c := compactJSON(trimmed); !bytes.Equal(c, buf.Bytes()) {
			t.Fatalf("compactJSON(%q) = %q, json.Compact gives %q", data, c, buf.Bytes())
		}
	})
}

// toAny decodes the valid JSON value raw with the walker, the way
// json.Unmarshal into an any would (numbers as float64).
func toAny(raw []byte) any {
	switch raw[0] {
	case '{':
		m := make(map[string]any)
		for _, mb := range objectMembers(raw) {
			m[string(mb.key)] = toAny(mb.val)
		}
		return m
	case '[':
		a := []any{}
		for _, e := range arrayElems(raw) {
			a = append(a, toAny(e))
		}
		return a
	case '"':
		return decodeString(raw)
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	f, _ := jsonNumber(raw)
	return f
}
