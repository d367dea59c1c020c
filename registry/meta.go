package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Defaults of the .meta fields that have one.
const (
	DefaultTier         = TierHot
	DefaultOutputFormat = OutputText
)

// DefaultArgs is the args schema of a tool that declares none: any object.
var DefaultArgs = json.RawMessage(`{"type":"object"}`)

// Values of Meta.Tier.
const (
	TierHot  = "hot"
	TierWarm = "warm"
	TierCold = "cold"
)

// Values of Meta.OutputFormat.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// Meta is one tool's metadata: the decoded form of a NAME.meta file.
// ParseMeta fills in the defaults (Args, Tier, OutputFormat), so a parsed
// Meta never has those empty. Marshalling a Meta with encoding/json gives a
// document that ParseMeta reads back to the same value.
type Meta struct {
	Description   string          `json:"description"`
	Prompt        string          `json:"prompt"`
	Args          json.RawMessage `json:"args"` // a JSON Schema object, compacted; default {"type":"object"}
	Tier          string          `json:"tier"` // hot|warm|cold, default hot
	Scope         string          `json:"scope"`
	OutputFormat  string          `json:"outputFormat"` // text|json, default text
	Cmd           string          `json:"cmd"`
	ResetsCounter bool            `json:"resetsCounter"`
	// Network: the tool may open and bind network sockets; without it a
	// sandboxed tool opens no TCP connection and binds no TCP port
	// (DESIGN §1, §7). Top level only: a host does not widen it.
	Network  bool      `json:"network,omitempty"`
	Variants []Variant `json:"variants,omitempty"`
}

// Variant is one host-conditional definition: when every condition of
// Match holds, its non-empty fields replace the top-level ones.
//
// ResetsCounter is a pointer because a bool has no empty value: a variant
// that says "resetsCounter": false overrides a top-level true, one that
// does not mention it leaves the top level alone.
type Variant struct {
	Match         Match           `json:"match,omitempty"`
	Description   string          `json:"description,omitempty"`
	Prompt        string          `json:"prompt,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	Tier          string          `json:"tier,omitempty"`
	Scope         string          `json:"scope,omitempty"`
	OutputFormat  string          `json:"outputFormat,omitempty"`
	Cmd           string          `json:"cmd,omitempty"`
	ResetsCounter *bool           `json:"resetsCounter,omitempty"`
}

// Match holds a variant's conditions: key (one of the Match* constants) →
// accepted values. A key holds when any one of its values holds; the match
// holds when every key holds. An empty Match always holds. In JSON a value
// is a string or an array of strings.
type Match map[string][]string

// Keys of Match.
const (
	MatchBinary = "binary" // an absolute path that is an executable file, or a name found in $PATH
	MatchFile   = "file"   // the path exists (file or directory)
	MatchOS     = "os"     // equals runtime.GOOS
	MatchArch   = "arch"   // equals runtime.GOARCH
	MatchEnv    = "env"    // the variable is set and non-empty
	MatchNenv   = "nenv"   // the variable is unset or empty
)

// matchKeys lists the valid Match keys in the order they are evaluated
// (cheap ones first) and named in errors.
var matchKeys = []string{MatchOS, MatchArch, MatchEnv, MatchNenv, MatchFile, MatchBinary}

// legacyFields are accepted and ignored, with a note.
var legacyFields = []string{"readOnly", "bypass"}

// ParseMeta decodes and validates one .meta document and applies the
// defaults. notes are human-readable remarks for the log, such as
// "legacy field readOnly ignored". Unknown fields are ignored.
//
// The error wraps ErrInvalidMeta and says what is wrong and where, e.g.
// `variants[1].match: unknown key "host"`. A document is invalid when it is
// not JSON, not an object, has a field of the wrong type (a number for
// description), a tier or outputFormat out of range, an args that is not a
// JSON object or not a compilable JSON Schema, a variant that is not an
// object, an unknown match key or an empty match value.
func ParseMeta(data []byte) (m *Meta, notes []string, err error) {
	m = new(Meta)
	notes, err = m.parse(data)
	if err != nil {
		return nil, nil, err
	}
	return m, notes, nil
}

// UnmarshalJSON decodes m with the rules of ParseMeta (notes dropped).
func (m *Meta) UnmarshalJSON(data []byte) error {
	var fresh Meta
	if _, err := fresh.parse(data); err != nil {
		return err
	}
	*m = fresh
	return nil
}

// UnmarshalJSON decodes one variant with the rules of ParseMeta.
func (v *Variant) UnmarshalJSON(data []byte) error {
	obj, err := decodeObject(data, "variant")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidMeta, err)
	}
	var fresh Variant
	if err := fresh.parse(obj, loneVariant, nil); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidMeta, err)
	}
	*v = fresh
	return nil
}

// UnmarshalJSON decodes a match object whose values are strings or arrays
// of strings.
func (mt *Match) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		return fmt.Errorf("%w: match: not valid JSON: %v", ErrInvalidMeta, syntaxError(data))
	}
	got, err := parseMatch(data, topLevel)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidMeta, err)
	}
	*mt = got
	return nil
}

func (m *Meta) parse(data []byte) (notes []string, err error) {
	obj, err := decodeObject(data, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMeta, err)
	}
	var top Variant
	if err := top.parse(obj, topLevel, &notes); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMeta, err)
	}
	if _, ok := obj.get("match"); ok {
		notes = append(notes, "top-level field match ignored (it belongs in a variant)")
	}
	*m = Meta{
		Description:   top.Description,
		Prompt:        top.Prompt,
		Args:          top.Args,
		Tier:          top.Tier,
		Scope:         top.Scope,
		OutputFormat:  top.OutputFormat,
		Cmd:           top.Cmd,
		ResetsCounter: top.ResetsCounter != nil && *top.ResetsCounter,
	}
	if raw, ok := obj.get("network"); ok && !isNull(raw) {
		if raw[0] != 't' && raw[0] != 'f' {
			return nil, fmt.Errorf("%w: network: want true or false, got %s", ErrInvalidMeta, jsonKind(raw))
		}
		m.Network = raw[0] == 't'
	}
	if m.Args == nil {
		m.Args = DefaultArgs
	}
	if m.Tier == "" {
		m.Tier = DefaultTier
	}
	if m.OutputFormat == "" {
		m.OutputFormat = DefaultOutputFormat
	}
	if raw, ok := obj.get("variants"); ok && !isNull(raw) {
		if m.Variants, err = parseVariants(raw, &notes); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidMeta, err)
		}
	}
	return notes, nil
}

// loc is where a field is, for errors and notes: the index of its variant,
// or topLevel. The text is only built when needed.
type loc int

// Locs that are not an index.
const (
	topLevel    loc = -1 // the top-level fields of a .meta
	loneVariant loc = -2 // a variant decoded on its own (Variant.UnmarshalJSON)
)

// at names field of l: "tier" or "variants[1].tier" ("" names the variant).
func (l loc) at(field string) string {
	if l < 0 {
		return field
	}
	v := "variants[" + strconv.Itoa(int(l)) + "]"
	if field == "" {
		return v
	}
	return v + "." + field
}

func parseVariants(raw json.RawMessage, notes *[]string) ([]Variant, error) {
	if raw[0] != '[' {
		return nil, fmt.Errorf("variants: want an array, got %s", jsonKind(raw))
	}
	elems := arrayElems(raw)
	if len(elems) == 0 {
		return nil, nil
	}
	vs := make([]Variant, len(elems))
	for i, e := range elems {
		l := loc(i)
		if e[0] != '{' {
			return nil, fmt.Errorf("%s: want a JSON object, got %s", l.at(""), jsonKind(e))
		}
		obj := objectMembers(e)
		if err := vs[i].parse(obj, l, notes); err != nil {
			return nil, err
		}
		if _, ok := obj.get("variants"); ok && notes != nil {
			*notes = append(*notes, l.at("")+": nested variants ignored")
		}
	}
	return vs, nil
}

// parse decodes the fields a variant and the top level have in common,
// plus match when l is a variant (the top level ignores it).
func (v *Variant) parse(obj members, l loc, notes *[]string) error {
	var err error
	str := func(key string, dst *string) {
		if err == nil {
			*dst, err = stringField(obj, key, l)
		}
	}
	str("description", &v.Description)
	str("prompt", &v.Prompt)
	str("scope", &v.Scope)
	str("cmd", &v.Cmd)
	str("tier", &v.Tier)
	str("outputFormat", &v.OutputFormat)
	if err != nil {
		return err
	}
	switch v.Tier {
	case "", TierHot, TierWarm, TierCold:
	default:
		return fmt.Errorf("%s: %q is not one of hot, warm, cold", l.at("tier"), v.Tier)
	}
	switch v.OutputFormat {
	case "", OutputText, OutputJSON:
	default:
		return fmt.Errorf("%s: %q is not one of text, json", l.at("outputFormat"), v.OutputFormat)
	}
	if raw, ok := obj.get("resetsCounter"); ok && !isNull(raw) {
		if raw[0] != 't' && raw[0] != 'f' {
			return fmt.Errorf("%s: want true or false, got %s", l.at("resetsCounter"), jsonKind(raw))
		}
		b := raw[0] == 't'
		v.ResetsCounter = &b
	}
	if raw, ok := obj.get("args"); ok && !isNull(raw) {
		if raw[0] != '{' {
			return fmt.Errorf("%s: want a JSON Schema object, got %s", l.at("args"), jsonKind(raw))
		}
		v.Args = compactJSON(raw)
		if err := checkSchema(v.Args); err != nil {
			return fmt.Errorf("%s: not a valid JSON Schema: %v", l.at("args"), err)
		}
	}
	if raw, ok := obj.get("match"); ok && l != topLevel && !isNull(raw) {
		if v.Match, err = parseMatch(raw, l); err != nil {
			return err
		}
	}
	if notes != nil {
		for _, k := range legacyFields {
			if _, ok := obj.get(k); ok {
				*notes = append(*notes, "legacy field "+l.at(k)+" ignored")
			}
		}
	}
	return nil
}

// parseMatch decodes the valid JSON raw as the match object of variant l
// (topLevel: a match on its own).
func parseMatch(raw json.RawMessage, l loc) (Match, error) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("%s: want a JSON object, got %s", l.at("match"), jsonKind(raw))
	}
	obj := objectMembers(raw)
	if len(obj) == 0 {
		return nil, nil
	}
	mt := make(Match, len(obj))
	for i, m := range obj {
		ki := slices.Index(matchKeys, string(m.key))
		if ki < 0 {
			return nil, fmt.Errorf("%s: unknown key %q (keys are binary, file, os, arch, env, nenv)", l.at("match"), m.key)
		}
		k := matchKeys[ki]
		if repeated(obj[i+1:], k) {
			continue // the last of repeated keys counts, as with encoding/json
		}
		val := m.val
		switch {
		case val[0] == '"':
			s := decodeString(val)
			if s == "" {
				return nil, fmt.Errorf("%s: empty value", l.at("match."+k))
			}
			mt[k] = []string{s}
		case val[0] == '[':
			elems := arrayElems(val)
			if len(elems) == 0 {
				return nil, fmt.Errorf("%s: empty value (an empty array never holds)", l.at("match."+k))
			}
			vals := make([]string, len(elems))
			for i, e := range elems {
				if e[0] != '"' {
					return nil, fmt.Errorf("%s[%d]: want a string, got %s", l.at("match."+k), i, jsonKind(e))
				}
				vals[i] = decodeString(e)
				if vals[i] == "" {
					return nil, fmt.Errorf("%s[%d]: empty value", l.at("match."+k), i)
				}
			}
			mt[k] = vals
		default:
			return nil, fmt.Errorf("%s: want a string or an array of strings, got %s", l.at("match."+k), jsonKind(val))
		}
	}
	return mt, nil
}

// repeated reports whether key is among ms.
func repeated(ms members, key string) bool {
	_, ok := ms.get(key)
	return ok
}

// decodeObject decodes data as one JSON object into its raw members.
// where names the value in errors ("" for the whole document).
func decodeObject(data []byte, where string) (members, error) {
	at := where
	if at != "" {
		at += ": "
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%sempty document, want a JSON object", at)
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%snot valid JSON: %v", at, syntaxError(trimmed))
	}
	return validObject(trimmed, where)
}

// validObject is decodeObject for a value already known to be valid JSON
// without surrounding space (a member or element of a checked document).
func validObject(raw []byte, where string) (members, error) {
	if raw[0] != '{' {
		at := where
		if at != "" {
			at += ": "
		}
		return nil, fmt.Errorf("%swant a JSON object, got %s", at, jsonKind(raw))
	}
	return objectMembers(raw), nil
}

// syntaxError returns the decoder's complaint about invalid JSON, with
// the byte offset where it gave up.
func syntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// stringField decodes the member key of obj as a string; absent or null
// is "".
func stringField(obj members, key string, l loc) (string, error) {
	raw, ok := obj.get(key)
	if !ok || isNull(raw) {
		return "", nil
	}
	if raw[0] != '"' {
		return "", fmt.Errorf("%s: want a string, got %s", l.at(key), jsonKind(raw))
	}
	return decodeString(raw), nil
}

// isNull reports whether raw, a valid JSON value without surrounding
// space (as the walker hands members over), is null or absent.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || raw[0] == 'n'
}

// jsonKind names the kind of a valid JSON value for error messages.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// String renders a match compactly for logs: "os=linux binary=rg|grep".
func (mt Match) String() string {
	var b strings.Builder
	for _, k := range matchKeys {
		vals, ok := mt[k]
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strings.Join(vals, "|"))
	}
	return b.String()
}
