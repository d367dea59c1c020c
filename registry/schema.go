package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Args schemas are checked twice, for two different costs:
//
//   - at parse time (checkSchema), every .meta of a directory is checked.
//     Compiling a schema costs tens of microseconds, too much for a scan of
//     thousands of tools, so a schema that stays within a conservative
//     subset of draft 2020-12 (the keywords tool schemas use, each with a
//     value the meta-schema accepts) is accepted without compiling it; any
//     other schema is compiled, so an uncompilable one is always rejected.
//   - at call time (compiledSchema), the schema is compiled once per
//     distinct content and cached.
//
// TestSchemaSubsetAgreesWithCompiler and FuzzParseMeta check that the
// subset never accepts what the compiler rejects.

// schemaURL is the location the args schema is compiled under. References
// to other documents are refused (refuseLoader), so a schema cannot make
// the node read files or the network.
const schemaURL = "urn:toolnode:args"

// maxCachedSchemas bounds the compiled-schema cache; past it the cache is
// emptied and refilled by use.
const maxCachedSchemas = 4096

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %q: only references inside the schema are allowed", url)
}

type schemaEntry struct {
	once sync.Once
	sch  *jsonschema.Schema
	err  error
}

var schemaCache struct {
	mu sync.Mutex
	m  map[string]*schemaEntry
}

// checkSchema returns nil when raw, a JSON object, is a JSON Schema that
// compiles.
func checkSchema(raw []byte) error {
	if simpleSchema(raw) {
		return nil
	}
	_, err := compiledSchema(raw)
	return err
}

// compiledSchema compiles raw, or returns the cached result for the same
// content.
func compiledSchema(raw []byte) (*jsonschema.Schema, error) {
	schemaCache.mu.Lock()
	if schemaCache.m == nil || len(schemaCache.m) >= maxCachedSchemas {
		schemaCache.m = make(map[string]*schemaEntry)
	}
	e, ok := schemaCache.m[string(raw)]
	if !ok {
		e = new(schemaEntry)
		schemaCache.m[string(raw)] = e
	}
	schemaCache.mu.Unlock()
	e.once.Do(func() { e.sch, e.err = compileSchema(raw) })
	return e.sch, e.err
}

func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, errors.New(schemaErrorText(err))
	}
	return sch, nil
}

// validateArgs checks that args is one JSON object that satisfies schema.
// The error says what is wrong in a sentence or a few "at PATH: problem"
// clauses; the caller wraps it with ErrInvalidArgs.
func validateArgs(schema, args []byte) error {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return errors.New("no arguments, want one JSON object")
	}
	if !json.Valid(trimmed) {
		return fmt.Errorf("arguments are not valid JSON: %v", syntaxError(trimmed))
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("arguments must be one JSON object, got %s", jsonKind(trimmed))
	}
	if len(schema) == 0 || bytes.Equal(schema, DefaultArgs) {
		// {"type":"object"} accepts exactly what was checked above: valid
		// JSON that is an object. No second parse for the compiler.
		return nil
	}
	sch, err := compiledSchema(schema)
	if err != nil {
		return fmt.Errorf("the tool's args schema does not compile: %v", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if err := sch.Validate(v); err != nil {
		return errors.New(schemaErrorText(err))
	}
	return nil
}

// schemaErrorText flattens the library's error tree into one line: the
// headline is dropped and the leaves ("at '/x': problem") are joined; the
// inner nodes ("'allOf' failed") only repeat their leaves.
func schemaErrorText(err error) string {
	lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	var parts []string
	for i, l := range lines[1:] {
		next := -1
		if i+2 < len(lines) {
			next = indent(lines[i+2])
		}
		if next > indent(l) {
			continue // an inner node
		}
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-"))
		if l != "" {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		return lines[0]
	}
	return strings.Join(parts, "; ")
}

// simpleSchema reports whether raw, valid JSON, is a schema of the
// conservative subset: every keyword is one of those listed in
// simpleKeywords and its value has the shape the draft 2020-12
// meta-schema requires. Such a schema always compiles. false means "not
// known", not "invalid". It walks the bytes without decoding them.
func simpleSchema(raw []byte) bool {
	return isSimpleSchema(raw, 0)
}

// maxSimpleDepth bounds the recursion of the subset check; deeper schemas
// go to the compiler.
const maxSimpleDepth = 32

// keywordCheck checks the raw value of one keyword.
type keywordCheck func(v []byte, depth int) bool

var simpleKeywords map[string]keywordCheck

func init() {
	schema := func(v []byte, d int) bool { return isSimpleSchema(v, d+1) }
	schemaMap := func(v []byte, d int) bool {
		return v[0] == '{' && forEachMember(v, func(_, s []byte) bool { return isSimpleSchema(s, d+1) })
	}
	schemaArray := func(v []byte, d int) bool {
		n := 0
		ok := v[0] == '[' && forEachElem(v, func(s []byte) bool { n++; return isSimpleSchema(s, d+1) })
		return ok && n > 0
	}
	str := func(v []byte, _ int) bool { return v[0] == '"' }
	boolean := func(v []byte, _ int) bool { return v[0] == 't' || v[0] == 'f' }
	number := func(v []byte, _ int) bool { _, ok := jsonNumber(v); return ok }
	nonNegInt := func(v []byte, _ int) bool {
		f, ok := jsonNumber(v)
		return ok && f >= 0 && f == math.Trunc(f) && f < 1<<53
	}
	anything := func([]byte, int) bool { return true }
	array := func(v []byte, _ int) bool { return v[0] == '[' }
	regex := func(v []byte, _ int) bool { return v[0] == '"' && compiles(decodeString(v)) }
	simpleKeywords = map[string]keywordCheck{
		// annotations
		"title": str, "description": str, "$comment": str, "format": str,
		"default": anything, "examples": array,
		"deprecated": boolean, "readOnly": boolean, "writeOnly": boolean,
		// validation
		"type":             isSimpleType,
		"enum":             array,
		"const":            anything,
		"multipleOf":       func(v []byte, _ int) bool { f, ok := jsonNumber(v); return ok && f > 0 },
		"maximum":          number,
		"exclusiveMaximum": number,
		"minimum":          number,
		"exclusiveMinimum": number,
		"maxLength":        nonNegInt, "minLength": nonNegInt,
		"maxItems": nonNegInt, "minItems": nonNegInt,
		"maxContains": nonNegInt, "minContains": nonNegInt,
		"maxProperties": nonNegInt, "minProperties": nonNegInt,
		"uniqueItems":       boolean,
		"pattern":           regex,
		"required":          isUniqueStrings,
		"dependentRequired": isDependentRequired,
		// applicators
		"properties":           schemaMap,
		"patternProperties":    isPatternProperties,
		"additionalProperties": schema,
		"propertyNames":        schema,
		"items":                schema,
		"prefixItems":          schemaArray,
		"contains":             schema,
		"allOf":                schemaArray, "anyOf": schemaArray, "oneOf": schemaArray,
		"not": schema, "if": schema, "then": schema, "else": schema,
	}
}

func isSimpleSchema(v []byte, depth int) bool {
	if depth > maxSimpleDepth {
		return false
	}
	switch v[0] {
	case 't', 'f':
		return true
	case '{':
		return forEachMember(v, func(key, val []byte) bool {
			body := key[1 : len(key)-1]
			if bytes.IndexByte(body, '\\') >= 0 {
				return false // an escaped keyword: leave it to the compiler
			}
			check := simpleKeywords[string(body)]
			return check != nil && check(val, depth)
		})
	}
	return false
}

// jsonNumber decodes a raw JSON number that fits a float64.
func jsonNumber(v []byte) (float64, bool) {
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return f, err == nil
}

var simpleTypes = map[string]bool{
	"array": true, "boolean": true, "integer": true, "null": true,
	"number": true, "object": true, "string": true,
}

func isSimpleType(v []byte, d int) bool {
	switch v[0] {
	case '"':
		return simpleTypes[decodeString(v)]
	case '[':
		n := 0
		ok := isUniqueStrings(v, d) && forEachElem(v, func(e []byte) bool { n++; return simpleTypes[decodeString(e)] })
		return ok && n > 0
	}
	return false
}

func isUniqueStrings(v []byte, _ int) bool {
	if v[0] != '[' {
		return false
	}
	var seen []string // short lists: a slice beats a map
	return forEachElem(v, func(e []byte) bool {
		if e[0] != '"' {
			return false
		}
		s := decodeString(e)
		if slices.Contains(seen, s) {
			return false
		}
		seen = append(seen, s)
		return true
	})
}

func isDependentRequired(v []byte, d int) bool {
	return v[0] == '{' && forEachMember(v, func(_, e []byte) bool { return isUniqueStrings(e, d) })
}

func isPatternProperties(v []byte, d int) bool {
	return v[0] == '{' && forEachMember(v, func(pat, s []byte) bool {
		return compiles(decodeString(pat)) && isSimpleSchema(s, d+1)
	})
}

// compiles reports whether the compiler's regexp engine (Go's regexp)
// accepts s.
func compiles(s string) bool {
	_, err := regexp.Compile(s)
	return err == nil
}
