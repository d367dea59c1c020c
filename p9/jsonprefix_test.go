package p9

import (
	"encoding/json"
	"testing"
)

func TestJSONPrefix(t *testing.T) {
	whole := []string{
		`{}`, `[]`, `""`, `0`, `-0.5e+10`, `true`, `false`, `null`, ` {"a":[1,2,{"b":"c\"\\\u00e9"}],"d":null} `,
		`{"name":"x","description":"y","variants":[{"os":"linux"}]}` + "\n", `[[[]]]`, `12`, `1E5`,
	}
	for _, doc := range whole {
		if !json.Valid([]byte(doc)) {
			t.Fatalf("test case %q is not valid JSON", doc)
		}
		for i := 0; i <= len(doc); i++ {
			if err := jsonPrefix([]byte(doc[:i])); err != nil {
				t.Errorf("jsonPrefix(%q) = %v; it is a prefix of %q", doc[:i], err, doc)
			}
		}
	}
	bad := []string{
		`{bad`, `x`, `{"a" 1`, `{"a":}`, `[1,]`, `{,`, `01`, `-x`, `1.e`, `1e+x`, `tru3`, `nul `,
		`"a` + "\x01", `"\x"`, `"\u12g"`, `{} x`, `[1 2`, `{"a":1,}`, `]`, `{]`, "\x00",
	}
	for _, s := range bad {
		if err := jsonPrefix([]byte(s)); err == nil {
			t.Errorf("jsonPrefix(%q) = nil; no JSON value begins so", s)
		}
	}
}

// FuzzJSONPrefix checks jsonPrefix against encoding/json: a valid
// document is a valid prefix, and text that is refused cannot be
// completed by a closing suffix.
func FuzzJSONPrefix(f *testing.F) {
	for _, s := range []string{`{"a":[1,2]}`, `{bad`, `[1e5,"x\n"]`, `-0.1`, `nul`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := jsonPrefix([]byte(s))
		if json.Valid([]byte(s)) && err != nil {
			t.Fatalf("jsonPrefix(%q) = %v for valid JSON", s, err)
		}
		if err != nil {
			for _, tail := range []string{"", "}", "]", `"}`, "0}", "]}", "}]", `"`, "0"} {
				if json.Valid([]byte(s + tail)) {
					t.Fatalf("jsonPrefix(%q) = %v, but %q is valid", s, err, s+tail)
				}
			}
		}
	})
}
