package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Capabilities on the wire. A message is a kind byte and groups, one per
// node, each listing entries of that node:
//
//	message = kind:byte group*
//	group   = uvarint(len) node  uvarint(count)  entry{count}
//	entry   = uvarint(len) tool  uvarint(version)  varint(variant)  flags:byte
//
// flags bit 0 marks a tombstone (the variant is then 0 and means nothing);
// other bits are zero. Names are non-empty.
const (
	msgDelta byte = 1 // a change, gossiped; relayed by a node it taught something
	msgState byte = 2 // a whole table (push/pull) or a node's own entries sent directly
)

const flagGone byte = 1

// minEntrySize is the size of the smallest entry: 1-byte name, version,
// variant and flags.
const minEntrySize = 5

type wireEntry struct {
	tool string
	e    entry
}

type group struct {
	node    string
	entries []wireEntry
}

var errShort = errors.New("message ends early")

func appendEntry(b []byte, we wireEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(we.tool)))
	b = append(b, we.tool...)
	b = binary.AppendUvarint(b, we.e.version)
	if we.e.gone {
		b = binary.AppendVarint(b, 0)
		return append(b, flagGone)
	}
	b = binary.AppendVarint(b, int64(we.e.variant))
	return append(b, 0)
}

func appendGroup(b []byte, node string, entries []wireEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(node)))
	b = append(b, node...)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, we := range entries {
		b = appendEntry(b, we)
	}
	return b
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

func entrySize(we wireEntry) int {
	v := int64(we.e.variant)
	if we.e.gone {
		v = 0
	}
	zz := uint64(v<<1) ^ uint64(v>>63)
	return uvarintLen(uint64(len(we.tool))) + len(we.tool) + uvarintLen(we.e.version) + uvarintLen(zz) + 1
}

// splitDelta encodes a node's entries as delta messages of at most max
// bytes each; false if one entry alone does not fit.
func splitDelta(node string, entries []wireEntry, max int) ([][]byte, bool) {
	head := 1 + uvarintLen(uint64(len(node))) + len(node)
	var msgs [][]byte
	for len(entries) > 0 {
		n, body := 0, 0
		for n < len(entries) {
			s := entrySize(entries[n])
			if head+uvarintLen(uint64(n+1))+body+s > max {
				break
			}
			body += s
			n++
		}
		if n == 0 {
			return nil, false
		}
		msgs = append(msgs, appendGroup([]byte{msgDelta}, node, entries[:n]))
		entries = entries[n:]
	}
	return msgs, true
}

// decode reads a message. It checks everything and allocates no more than
// the input's size warrants: the input comes from the network.
func decode(b []byte) (byte, []group, error) {
	if len(b) == 0 {
		return 0, nil, errShort
	}
	kind := b[0]
	if kind != msgDelta && kind != msgState {
		return 0, nil, fmt.Errorf("unknown message kind %d", kind)
	}
	r := reader{b: b[1:]}
	var groups []group
	for len(r.b) > 0 {
		g := group{node: r.name()}
		n := r.uvarint()
		if r.err == nil && n > uint64(len(r.b)/minEntrySize) {
			return 0, nil, fmt.Errorf("node %q: %d entries cannot fit in %d bytes", g.node, n, len(r.b))
		}
		g.entries = make([]wireEntry, 0, n)
		for i := uint64(0); i < n && r.err == nil; i++ {
			var we wireEntry
			we.tool = r.name()
			we.e.version = r.uvarint()
			v := r.varint()
			flags := r.byte()
			switch {
			case r.err != nil:
			case flags&^flagGone != 0:
				r.err = fmt.Errorf("unknown flags %#x", flags)
			case int64(int(v)) != v:
				r.err = fmt.Errorf("variant %d out of range", v)
			}
			we.e.variant, we.e.gone = int(v), flags&flagGone != 0
			if we.e.gone {
				we.e.variant = 0
			}
			g.entries = append(g.entries, we)
		}
		if r.err != nil {
			return 0, nil, r.err
		}
		groups = append(groups, g)
	}
	return kind, groups, nil
}

// reader reads the fields of a message; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b)
	r.consume(n)
	return x
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Varint(r.b)
	r.consume(n)
	return x
}

// consume takes the n bytes a varint decoder read, or records why it
// could not (n = 0: the message ends; n < 0: the value overflows).
func (r *reader) consume(n int) {
	switch {
	case n == 0:
		r.err = errShort
	case n < 0:
		r.err = errors.New("varint overflows 64 bits")
	default:
		r.b = r.b[n:]
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// name reads a non-empty string (a copy: the buffer is memberlist's).
func (r *reader) name() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	switch {
	case n == 0:
		r.err = errors.New("empty name")
	case n > uint64(len(r.b)):
		r.err = errShort
	}
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
