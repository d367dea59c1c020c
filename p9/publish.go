package p9

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/knusbaum/go9p/proto"
)

// jsonLimit caps t/NAME.meta and a/NAME.json as written through 9P.
const jsonLimit = 1 << 20

// defaultMaxExecutable caps t/NAME when Backend.MaxExecutable is not
// positive.
const defaultMaxExecutable = 64 << 20

// defaultExecMode is the mode of an executable published without one.
const defaultExecMode = 0o755

// nameRule describes a valid tool or profile name, for error texts.
const nameRule = "a letter or digit, then up to 127 letters, digits, '_', '.' or '-'"

// validName reports whether s is a valid tool or profile name:
// [A-Za-z0-9][A-Za-z0-9_.-]{0,127}.
func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// isUpload reports whether nodes of kind k are written whole and
// published at close (or, for JSON, as soon as they are whole).
func isUpload(k kind) bool { return k == kTMeta || k == kTExec || k == kProfile }

// createNode checks a Tcreate of name in directory dir (t/ or a/) and
// returns the node it makes.
func createNode(dir *node, name string, perm uint32) (*node, error) {
	if perm&proto.DMDIR != 0 {
		return nil, fmt.Errorf("cannot make directory %q in %s: it holds only files", name, dir.path)
	}
	var k kind
	var arg string
	switch dir.kind {
	case kTDir:
		const holds = "t/ holds NAME.meta and NAME, where NAME is " + nameRule
		base, isMeta := strings.CutSuffix(name, ".meta")
		if !isMeta {
			base = name
		}
		switch {
		case base == "idx" && !isMeta:
			return nil, errors.New("cannot create t/idx: it is the tool index, and no tool may be named idx")
		case base == "idx":
			return nil, fmt.Errorf("cannot create t/%s: no tool may be named idx", name)
		case !validName(base):
			return nil, fmt.Errorf("%s; cannot create %q", holds, name)
		}
		k, arg = kTExec, base
		if isMeta {
			k = kTMeta
		}
	case kADir:
		base, ok := strings.CutSuffix(name, ".json")
		if !ok || !validName(base) {
			return nil, fmt.Errorf("a/ holds NAME.json, where NAME is %s; cannot create %q", nameRule, name)
		}
		k, arg = kProfile, base
	default:
		return nil, fmt.Errorf("cannot create %q in %s", name, dir.path)
	}
	c := newNode(dir, k, name)
	c.arg = arg
	return c, nil
}

// upload is an open-for-writing fid of t/NAME.meta, t/NAME or a/NAME.json.
// Writes go to a private buffer at their offsets; readers of other fids
// see only what the Backend has published. A JSON file is published as
// soon as its buffer holds a whole JSON value, and again at clunk if it
// changed since; an executable is published at clunk. Its methods are
// serialized by mu.
type upload struct {
	s     *Server
	b     Backend // publishes what the fid wrote
	n     *node
	limit int
	mode  atomic.Uint32 // executables: the mode they are published with

	mu     sync.Mutex
	buf    []byte
	wrote  bool   // a write succeeded: the clunk may publish
	failed bool   // a write was refused: the clunk publishes nothing
	sent   []byte // JSON: the document this fid last published (trimmed)
	closed bool
}

var (
	_ handle    = (*upload)(nil)
	_ committer = (*upload)(nil)
)

// committer is a handle with something to do at Tclunk (and only then:
// a connection that ends, a Tremove or a Tversion does not commit). Its
// error is the error of the Tclunk; the fid is clunked anyway.
type committer interface {
	commit() error
}

// openUpload opens n for writing. Its buffer starts as the published
// content, or empty when trunc is set or nothing is published yet.
func (s *Server) openUpload(b Backend, n *node, trunc bool) *upload {
	u := s.newUpload(b, n, defaultExecMode)
	var cur []byte
	switch n.kind {
	case kTMeta:
		if m, ok := b.ToolMeta(n.arg); ok {
			cur = withNewline(m)
		}
	case kTExec:
		cur, _ = b.ToolExecutable(n.arg)
		if m, ok := b.ToolExecMode(n.arg); ok {
			u.mode.Store(m & 0o777)
		}
	case kProfile:
		if p, ok := b.Profile(n.arg); ok {
			cur = withNewline(p)
		}
	}
	if !trunc {
		u.buf = slices.Clone(cur)
		s.uploadBytes.Add(int64(len(u.buf)))
	}
	return u
}

// newUpload makes an upload with an empty buffer and registers it as
// pending, so walks find its file before it is published.
func (s *Server) newUpload(b Backend, n *node, mode uint32) *upload {
	u := &upload{s: s, b: b, n: n, limit: jsonLimit}
	u.mode.Store(mode)
	if n.kind == kTExec {
		u.limit = b.MaxExecutable()
		if u.limit <= 0 {
			u.limit = defaultMaxExecutable
		}
	}
	s.pmu.Lock()
	s.pending[n.path] = append(s.pending[n.path], u)
	s.pmu.Unlock()
	return u
}

// pendingUploads are the open uploads of a path, on every connection.
func (s *Server) pendingUploads(path string) []*upload {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return slices.Clone(s.pending[path])
}

func (s *Server) isPending(path string) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return len(s.pending[path]) > 0
}

func (s *Server) dropPending(u *upload) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	l := s.pending[u.n.path]
	if i := slices.Index(l, u); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(s.pending, u.n.path)
	} else {
		s.pending[u.n.path] = l
	}
}

// execMode is the stat mode of t/NAME: as published, else as an open
// upload will publish it, else 0755.
func (s *Server) execMode(n *node) uint32 {
	if m, ok := s.b.ToolExecMode(n.arg); ok {
		return m & 0o777
	}
	if ups := s.pendingUploads(n.path); len(ups) > 0 {
		return ups[0].mode.Load()
	}
	return defaultExecMode
}

// chmodExec is a Twstat of t/NAME's mode: open uploads of the file will
// publish with it, and a published executable is published again with it.
func (s *Server) chmodExec(b Backend, n *node, perm uint32) error {
	ups := s.pendingUploads(n.path)
	for _, u := range ups {
		u.mode.Store(perm)
	}
	exe, ok := b.ToolExecutable(n.arg)
	if !ok {
		if len(ups) > 0 {
			return nil
		}
		return fmt.Errorf("tool %q has no published executable", n.arg)
	}
	if m, ok := b.ToolExecMode(n.arg); ok && m&0o777 == perm {
		return nil
	}
	return b.PublishToolExec(n.arg, exe, perm)
}

// limitErr is the error of a write past an upload's limit.
func (u *upload) limitErr() error {
	switch u.n.kind {
	case kTExec:
		return fmt.Errorf("executables are limited to %d bytes", u.limit)
	case kTMeta:
		return errors.New("tool metadata is limited to 1 MiB")
	}
	return errors.New("agent profiles are limited to 1 MiB")
}

func (u *upload) read(_ *req, off uint64, count uint32) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errClosed
	}
	// A copy: the buffer may change once the lock is released.
	return slices.Clone(window(u.buf, off, count)), nil
}

var errClosed = errors.New("file is closed")

func (u *upload) write(_ *req, off uint64, data []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return 0, errClosed
	}
	if off > uint64(u.limit) || off+uint64(len(data)) > uint64(u.limit) {
		u.failed = true
		return 0, u.limitErr()
	}
	if len(data) == 0 {
		return 0, nil // changes nothing, publishes nothing
	}
	// Keep what the write replaces, to undo it if the Backend refuses.
	oldLen := len(u.buf)
	var saved []byte
	if int(off) < oldLen {
		saved = slices.Clone(u.buf[off:min(int(off)+len(data), oldLen)])
	}
	end := int(off) + len(data)
	if grow := end - len(u.buf); grow > 0 {
		if held := u.s.uploadBytes.Add(int64(grow)); held > u.s.opt.MaxUploadBytes {
			u.s.uploadBytes.Add(-int64(grow))
			u.failed = true // what it leaves is not what its writer meant
			return 0, fmt.Errorf("this node already holds %d bytes of unfinished uploads, its limit: try again when others have closed", held-int64(grow))
		}
		u.buf = append(u.buf, make([]byte, grow)...)
	}
	copy(u.buf[off:], data)

	if u.n.kind != kTExec {
		if doc, ok := wholeJSON(u.buf); ok && !bytes.Equal(doc, u.sent) {
			if err := u.publishJSON(doc); err != nil {
				copy(u.buf[off:], saved)
				u.s.uploadBytes.Add(-int64(len(u.buf) - oldLen))
				u.buf = u.buf[:oldLen]
				u.failed = true
				return 0, err
			}
		}
	}
	u.wrote = true
	return len(data), nil
}

// wholeJSON returns the buffer without surrounding white space when it
// is one whole JSON value. An object or array is whole only once it ends
// in its closing bracket, so the pieces of a large document written in
// parts are not each parsed.
func wholeJSON(buf []byte) ([]byte, bool) {
	doc := bytes.TrimSpace(buf)
	if len(doc) == 0 {
		return nil, false
	}
	last := doc[len(doc)-1]
	if doc[0] == '{' && last != '}' || doc[0] == '[' && last != ']' {
		return nil, false
	}
	return doc, jsonComplete(doc) == nil
}

// publishJSON publishes doc and remembers it as sent; mu is held.
func (u *upload) publishJSON(doc []byte) error {
	var err error
	if u.n.kind == kTMeta {
		err = u.b.PublishToolMeta(u.n.arg, slices.Clone(doc))
	} else {
		err = u.b.PublishProfile(u.n.arg, slices.Clone(doc))
	}
	if err == nil {
		u.sent = slices.Clone(doc)
	}
	return err
}

func (u *upload) truncate() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.s.uploadBytes.Add(-int64(len(u.buf)))
		u.buf = u.buf[:0]
	}
}

// commit publishes what was written, at Tclunk: an executable as it is,
// a JSON file if it changed since this fid last published it. A fid that
// wrote nothing publishes nothing, and so does one with a refused write:
// its writer was told, and what it leaves is not what it meant to write.
func (u *upload) commit() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	u.closed = true
	buf := u.buf
	u.buf = nil
	u.s.uploadBytes.Add(-int64(len(buf)))
	if !u.wrote || u.failed {
		return nil
	}
	if u.n.kind == kTExec {
		return u.b.PublishToolExec(u.n.arg, buf, u.mode.Load())
	}
	doc := bytes.TrimSpace(buf)
	if u.sent != nil && bytes.Equal(doc, u.sent) {
		return nil
	}
	switch err := jsonComplete(doc); {
	case len(doc) == 0 || err == errIncomplete:
		return fmt.Errorf("%s: incomplete JSON: nothing was published", u.n.path)
	case err != nil:
		return fmt.Errorf("%s is not valid JSON (%v): nothing was published", u.n.path, err)
	}
	return u.publishJSON(doc)
}

func (u *upload) close() {
	u.mu.Lock()
	u.closed = true
	u.s.uploadBytes.Add(-int64(len(u.buf)))
	u.buf = nil
	u.mu.Unlock()
	u.s.dropPending(u)
}
