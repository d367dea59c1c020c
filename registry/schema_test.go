package registry

import (
	"errors"
	"strings"
	"testing"
)

// schemaSamples are args schemas, valid and not, used to check that the
// cheap parse-time check agrees with the compiler.
var schemaSamples = []string{
	`{}`,
	`{"type":"object"}`,
	`{"type":["object","null"]}`,
	`{"type":[]}`,
	`{"type":["object","object"]}`,
	`{"type":"objekt"}`,
	`{"type":5}`,
	`{"type":"object","properties":{"a":{"type":"string","minLength":1,"maxLength":10,"pattern":"^[a-z]+$"}},"required":["a"],"additionalProperties":false}`,
	`{"properties":{"a":true,"b":false}}`,
	`{"properties":[]}`,
	`{"properties":{"a":"string"}}`,
	`{"required":["a","a"]}`,
	`{"required":"a"}`,
	`{"required":[1]}`,
	`{"minLength":-1}`,
	`{"minLength":1.5}`,
	`{"minLength":2.0}`,
	`{"multipleOf":0}`,
	`{"multipleOf":0.5}`,
	`{"minimum":"3"}`,
	`{"pattern":"("}`,
	`{"pattern":"(?=x)"}`,
	`{"patternProperties":{"^x-":{"type":"string"}}}`,
	`{"patternProperties":{"(":{}}}`,
	`{"items":{"type":"integer"},"prefixItems":[{"type":"string"}],"minItems":1,"uniqueItems":true}`,
	`{"items":[{"type":"integer"}]}`,
	`{"prefixItems":[]}`,
	`{"anyOf":[{"type":"string"},{"type":"integer"}]}`,
	`{"anyOf":[]}`,
	`{"oneOf":{}}`,
	`{"if":{"properties":{"a":{"const":1}}},"then":{"required":["b"]},"else":{"not":{}}}`,
	`{"enum":[1,"a",null]}`,
	`{"enum":"a"}`,
	`{"dependentRequired":{"a":["b"]}}`,
	`{"dependentRequired":{"a":"b"}}`,
	`{"description":"d","title":"t","default":{},"examples":[1],"deprecated":false}`,
	`{"description":5}`,
	`{"format":"email"}`,
	`{"uniqueItems":"yes"}`,
	`{"$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`,
	`{"$ref":"#/$defs/missing"}`,
	`{"$ref":"https://example.com/schema.json"}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
	`{"$schema":"https://example.com/my-meta"}`,
	`{"x-custom":1,"type":"object"}`,
	`{"properties":{"a":{"properties":{"b":{"properties":{"c":{"type":"strin"}}}}}}}`,
}

func TestSchemaSubsetAgreesWithCompiler(t *testing.T) {
	simple := 0
	for _, s := range schemaSamples {
		_, compileErr := compileSchema([]byte(s))
		if simpleSchema([]byte(s)) {
			simple++
			if compileErr != nil {
				t.Errorf("subset accepts %s, compiler rejects it: %v", s, compileErr)
			}
		}
		if checkErr := checkSchema([]byte(s)); (checkErr == nil) != (compileErr == nil) {
			t.Errorf("checkSchema(%s) = %v, compiler says %v", s, checkErr, compileErr)
		}
	}
	if simple < 10 {
		t.Errorf("only %d samples are in the subset; the fast path is not exercised", simple)
	}
}

func TestValidateArgs(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":1},"s":{"type":"string"}},"required":["n"],"additionalProperties":false}`)
	tests := []struct {
		name string
		args string
		want string // "" for valid
	}{
		{name: "valid", args: `{"n": 3, "s": "x"}`},
		{name: "big integer", args: `{"n": 123456789012345678901234567890}`},
		{name: "missing", args: `{}`, want: "missing property 'n'"},
		{name: "wrong type", args: `{"n": "3"}`, want: "at '/n': got string, want integer"},
		{name: "minimum", args: `{"n": 0}`, want: "at '/n'"},
		{name: "extra", args: `{"n": 1, "x": 1}`, want: "additional properties 'x' not allowed"},
		{name: "array", args: `[1]`, want: "arguments must be one JSON object, got an array"},
		{name: "not JSON", args: `{"n":`, want: "not valid JSON"},
		{name: "two objects", args: `{"n":1} {"n":2}`, want: "not valid JSON"},
		{name: "empty", args: ``, want: "no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateArgs(schema, []byte(tt.args))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validateArgs(%s) = %v", tt.args, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validateArgs(%s) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestCompiledSchemaCached(t *testing.T) {
	raw := []byte(`{"type":"object","title":"cache test"}`)
	a, err := compiledSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := compiledSchema(append([]byte(nil), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the same schema content was compiled twice")
	}
	_, err = compiledSchema([]byte(`{"$ref":"file:///etc/passwd"}`))
	if err == nil || !strings.Contains(err.Error(), "only references inside the schema") {
		t.Errorf("an external reference: %v, want it refused", err)
	}
	if errors.Is(err, ErrInvalidMeta) {
		t.Error("a compile error is not itself ErrInvalidMeta; ParseMeta wraps it")
	}
}
