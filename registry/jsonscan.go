package registry

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A small walker over JSON that is already known to be valid (checked once
// with json.Valid). Scanning thousands of .meta files is dominated by JSON
// decoding, and encoding/json re-validates every RawMessage it is handed;
// walking the validated bytes directly makes the parse several times
// faster. Anything unusual (escapes, invalid UTF-8) is handed to
// encoding/json, so decoded values are exactly what it would give;
// FuzzJSONScan checks the walker against encoding/json.

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// valueEnd returns the index just past the valid JSON value starting at
// data[i].
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = stringEnd(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// stringEnd returns the index just past the string starting at data[i].
func stringEnd(data []byte, i int) int {
	for i++; i < len(data); {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return len(data)
		}
		i += q
		// The quote ends the string unless an odd number of backslashes
		// precede it.
		bs := 0
		for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
			bs++
		}
		i++
		if bs%2 == 0 {
			return i
		}
	}
	return len(data)
}

// decodeString decodes the valid JSON string raw.
func decodeString(raw []byte) string {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	var s string
	_ = json.Unmarshal(raw, &s) // raw is valid; this handles escapes and bad UTF-8
	return s
}

// members are the members of a JSON object in document order.
type members []member

type member struct {
	key []byte // decoded; shares the document's bytes when it has no escapes
	val json.RawMessage
}

// get returns the value of key; a repeated key gives its last value, as
// with encoding/json.
func (ms members) get(key string) (json.RawMessage, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if string(ms[i].key) == key {
			return ms[i].val, true
		}
	}
	return nil, false
}

// objectMembers returns the members of the valid JSON object raw.
func objectMembers(raw []byte) members {
	ms := make(members, 0, 8)
	forEachMember(raw, func(key, val []byte) bool {
		body := key[1 : len(key)-1]
		if bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
			body = []byte(decodeString(key))
		}
		ms = append(ms, member{body, val})
		return true
	})
	return ms
}

// forEachMember calls fn with the raw key (quotes included) and raw value
// of each member of the valid JSON object raw, until fn returns false. It
// reports whether every call returned true.
func forEachMember(raw []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(raw, 1)
	for i < len(raw) && raw[i] != '}' {
		kEnd := stringEnd(raw, i)
		key := raw[i:kEnd]
		i = skipSpace(raw, skipSpace(raw, kEnd)+1) // past ':'
		vEnd := valueEnd(raw, i)
		if !fn(key, raw[i:vEnd:vEnd]) {
			return false
		}
		i = skipSpace(raw, vEnd)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return true
}

// forEachElem is forEachMember for the elements of a valid JSON array.
func forEachElem(raw []byte, fn func(elem []byte) bool) bool {
	i := skipSpace(raw, 1)
	for i < len(raw) && raw[i] != ']' {
		end := valueEnd(raw, i)
		if !fn(raw[i:end:end]) {
			return false
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return true
}

// arrayElems returns the elements of the valid JSON array raw.
func arrayElems(raw []byte) []json.RawMessage {
	var elems []json.RawMessage
	forEachElem(raw, func(e []byte) bool {
		elems = append(elems, e)
		return true
	})
	return elems
}

// compactJSON returns valid JSON raw without insignificant whitespace.
func compactJSON(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '"' {
			end := stringEnd(raw, i)
			out = append(out, raw[i:end]...)
			i = end - 1
			continue
		}
		if !isSpace(c) {
			out = append(out, c)
		}
	}
	return out
}
