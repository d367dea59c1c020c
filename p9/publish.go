package p9

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

// execCopyBuf is the buffer an upload copies a published executable
// through when a write changes it (an open without OTRUNC).
const execCopyBuf = 256 << 10

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
func isUpload(k kind) bool { return k == kTMeta || k == kTExec || k == kProfile || k == kServer }

// createNode checks a Tcreate of name in directory dir (t/ or a/) and
// returns the node it makes.
func createNode(dir *node, name string, perm uint32) (*node, error) {
	if perm&proto.DMDIR != 0 {
		return nil, fmt.Errorf("permission denied: cannot make directory %q in %s: it holds only files", name, dir.path)
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
			return nil, errors.New("permission denied: cannot create t/idx: it is the tool index, and no tool may be named idx")
		case base == "idx":
			return nil, fmt.Errorf("invalid name: cannot create t/%s: no tool may be named idx", name)
		case !validName(base):
			return nil, fmt.Errorf("invalid name %q: %s", name, holds)
		}
		k, arg = kTExec, base
		if isMeta {
			k = kTMeta
		} else if sig := walkTSig(dir, name); sig != nil {
			return sig, nil
		}
	case kADir:
		base, ok := strings.CutSuffix(name, ".json")
		if !ok || !validName(base) {
			return nil, fmt.Errorf("invalid name %q: a/ holds NAME.json, where NAME is %s", name, nameRule)
		}
		k, arg = kProfile, base
	case kMDir:
		base, ok := strings.CutSuffix(name, ".json")
		if !ok || !validName(base) {
			return nil, fmt.Errorf("invalid name %q: m/ holds NAME.json, where NAME is %s", name, nameRule)
		}
		k, arg = kServer, base
	default:
		return nil, fmt.Errorf("permission denied: cannot create %q in %s", name, dir.path)
	}
	c := newNode(dir, k, name)
	c.arg = arg
	return c, nil
}

// upload is an open-for-writing fid of t/NAME.meta, t/NAME or a/NAME.json.
// Writes go to a private buffer at their offsets — for an executable a
// scratch file the Backend makes (Backend.NewExecUpload), so that memory
// does not grow with its size; readers of other fids see only what the
// Backend has published. A JSON file is published as
// soon as its buffer holds a whole JSON value, and again at clunk if it
// changed since; an executable is published at clunk. Its methods are
// serialized by mu.
type upload struct {
	s     *Server
	b     Backend // publishes what the fid wrote
	n     *node
	limit int64
	mode  atomic.Uint32 // executables: the mode they are published with
	held  *atomic.Int64 // bytes held by its connection's uploads

	created bool // made by a Tcreate: the file stays pending after close
	trunc   bool // opened with OTRUNC

	mu  sync.Mutex
	buf []byte // JSON files
	// Executables: file is the scratch file, made at the first write;
	// fsize its length. Until then base, the published executable the
	// open started from (nil: empty), is what the fid reads.
	file      ExecUpload
	fsize     int64
	base      *Executable
	wrote     bool   // a write succeeded: the clunk may publish
	failed    bool   // a write was refused: the clunk publishes nothing
	sent      []byte // JSON: the document this fid last published (trimmed)
	published bool   // this fid published something
	closed    bool
	scan      prefixScanner // JSON: the state after buf[:scanned]
	scanned   int
	gap       bool // a write left a hole: the prefix check waits for the clunk
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
// content, or empty when trunc is set, when a truncation of the path is
// waiting for the next open (Server.truncatePath), or when nothing is
// published yet. An open with trunc empties the other open uploads of
// the path too, as O_TRUNC does on Unix.
func (s *Server) openUpload(b Backend, n *node, trunc bool, held *atomic.Int64) *upload {
	if s.takeTrunc(n.path) {
		trunc = true
	}
	u := s.newUpload(b, n, defaultExecMode, held)
	u.trunc = trunc
	if trunc {
		s.truncatePath(n.path, u)
	}
	var cur []byte
	switch n.kind {
	case kTMeta:
		if m, ok := b.ToolMeta(n.arg); ok {
			cur = withNewline(m)
		}
	case kTExec:
		if m, ok := b.ToolExecMode(n.arg); ok {
			u.mode.Store(m & 0o777)
		}
		if e, ok := b.ToolExecutable(n.arg); ok && !trunc {
			u.base = &e
			u.fsize = e.Size
			u.account(e.Size)
		}
		return u
	case kProfile:
		if p, ok := b.Profile(n.arg); ok {
			cur = withNewline(p)
		}
	case kServer:
		if p, ok := serversOf(b).ServerDef(n.arg); ok {
			cur = withNewline(p)
		}
	}
	if !trunc {
		u.buf = slices.Clone(cur)
		u.account(int64(len(u.buf)))
	}
	return u
}

// newUpload makes an upload with an empty buffer and registers it as
// pending, so walks find its file before it is published.
func (s *Server) newUpload(b Backend, n *node, mode uint32, held *atomic.Int64) *upload {
	u := &upload{s: s, b: b, n: n, limit: jsonLimit, held: held}
	u.mode.Store(mode)
	if n.kind == kTExec {
		u.limit = maxExec(b)
	}
	s.pmu.Lock()
	s.pending[n.path] = append(s.pending[n.path], u)
	s.pmu.Unlock()
	return u
}

// maxExec is the Backend's bound on an executable, or the default.
func maxExec(b Backend) int64 {
	if m := b.MaxExecutable(); m > 0 {
		return m
	}
	return defaultMaxExecutable
}

// limitErr is the error of a write past an upload's limit.
func (u *upload) limitErr() error {
	switch u.n.kind {
	case kTExec:
		return fmt.Errorf("file too long: executables are limited to %d bytes (-max-exec-size)", u.limit)
	case kTMeta:
		return errors.New("file too long: tool metadata is limited to 1 MiB")
	}
	return errors.New("file too long: agent profiles are limited to 1 MiB")
}

func (u *upload) read(_ *req, off uint64, count uint32) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errClosed
	}
	if u.n.kind == kTExec {
		return u.readExec(off, count)
	}
	// A copy: the buffer may change once the lock is released.
	return slices.Clone(window(u.buf, off, count)), nil
}

// readExec reads the executable being written; mu is held.
func (u *upload) readExec(off uint64, count uint32) ([]byte, error) {
	if off >= uint64(u.fsize) {
		return nil, nil
	}
	n := min(int64(count), u.fsize-int64(off))
	p := make([]byte, n)
	var r io.ReaderAt = u.file
	if u.file == nil {
		if u.base == nil {
			return p, nil
		}
		er, err := u.base.Open()
		if err != nil {
			return nil, err
		}
		defer er.Close()
		r = er
	}
	k, err := r.ReadAt(p, int64(off))
	if err == io.EOF && int64(k) < n {
		clear(p[k:]) // a hole the writer left, or a file shorter than said
		err = nil
	}
	return p, err
}

// execFile makes the scratch file at the first write, with the content
// the open started from; mu is held.
func (u *upload) execFile() error {
	if u.file != nil {
		return nil
	}
	f, err := u.b.NewExecUpload()
	if err != nil {
		return fmt.Errorf("temporarily unavailable: cannot make a file for the upload: %v", err)
	}
	if u.base != nil && u.base.Size > 0 {
		er, err := u.base.Open()
		if err != nil {
			f.Close()
			return fmt.Errorf("reading the published executable to change it: %v", err)
		}
		_, err = io.CopyBuffer(io.NewOffsetWriter(f, 0), io.NewSectionReader(er, 0, u.base.Size), make([]byte, execCopyBuf))
		er.Close()
		if err != nil {
			f.Close()
			return fmt.Errorf("copying the published executable to change it: %v", err)
		}
	}
	u.file, u.base = f, nil
	return nil
}

// takeExec is take for an executable: the write goes to the scratch file
// at its offset; mu is held.
func (u *upload) takeExec(off uint64, data []byte) (int, error) {
	end := int64(off) + int64(len(data))
	if grow := end - u.fsize; grow > 0 {
		if err := u.hold(grow); err != nil {
			return 0, err
		}
		if err := u.execFile(); err != nil {
			u.account(-grow)
			u.failed = true
			return 0, err
		}
		u.fsize = end
	} else if err := u.execFile(); err != nil {
		u.failed = true
		return 0, err
	}
	if _, err := u.file.WriteAt(data, int64(off)); err != nil {
		u.failed = true
		return 0, fmt.Errorf("writing the upload to disk: %v", err)
	}
	u.wrote = true
	return len(data), nil
}

// hold accounts grow more bytes of unfinished uploads, or refuses them
// past a limit; mu is held.
func (u *upload) hold(grow int64) error {
	if held := u.held.Add(grow); held > u.s.opt.MaxConnUploadBytes {
		u.held.Add(-grow)
		u.failed = true
		return fmt.Errorf("this connection already holds %d bytes of unfinished uploads, the most one may: close some before writing more", held-grow)
	}
	if held := u.s.uploadBytes.Add(grow); held > u.s.opt.MaxUploadBytes {
		u.s.uploadBytes.Add(-grow)
		u.held.Add(-grow)
		u.failed = true // what it leaves is not what its writer meant
		return fmt.Errorf("this node already holds %d bytes of unfinished uploads, its limit: try again when others have closed", held-grow)
	}
	return nil
}

var errClosed = errors.New("file is closed")

// write takes a write into the buffer; a refused one is logged with its
// cause, as the client's error may never reach a person (FUSE).
func (u *upload) write(r *req, off uint64, data []byte) (int, error) {
	n, err := u.take(off, data)
	if err != nil && err != errClosed {
		u.s.opt.Logf("9p: refused a write to %s: %v", u.n.path, err)
	}
	return n, err
}

// take is write without the log.
func (u *upload) take(off uint64, data []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return 0, errClosed
	}
	if off > uint64(u.limit) || off+uint64(len(data)) > uint64(u.limit) {
		if u.n.kind == kTExec {
			// Said as the bytes arrive, not after the whole upload.
			u.s.opt.Logf("9p: refused an upload to %s at byte %d: over the %d-byte limit for executables (-max-exec-size)", u.n.path, off+uint64(len(data)), u.limit)
		}
		u.failed = true
		return 0, u.limitErr()
	}
	if len(data) == 0 {
		return 0, nil // changes nothing, publishes nothing
	}
	if u.n.kind == kTExec {
		return u.takeExec(off, data)
	}
	// Keep what the write replaces, to undo it if the Backend refuses.
	oldLen := len(u.buf)
	var saved []byte
	if int(off) < oldLen {
		saved = slices.Clone(u.buf[off:min(int(off)+len(data), oldLen)])
	}
	end := int(off) + len(data)
	hadGap := u.gap
	if grow := end - len(u.buf); grow > 0 {
		if err := u.hold(int64(grow)); err != nil {
			return 0, err
		}
		u.buf = append(u.buf, make([]byte, grow)...)
	}
	copy(u.buf[off:], data)
	if int(off) > oldLen {
		u.gap = true
	}
	undo := func() {
		copy(u.buf[off:], saved)
		u.account(-int64(len(u.buf) - oldLen))
		u.buf = u.buf[:oldLen]
		u.failed = true
		u.gap = hadGap
		u.scan, u.scanned = prefixScanner{}, 0 // scanned again at the next write
	}

	if u.n.kind != kTExec {
		if err := u.checkPrefix(int(off)); err != nil {
			undo()
			return 0, fmt.Errorf("invalid JSON in %s: %v; nothing was published", u.n.path, err)
		}
		if doc, ok := wholeJSON(u.buf); ok && !bytes.Equal(doc, u.sent) {
			if err := u.publishJSON(doc); err != nil {
				undo()
				return 0, err
			}
		}
	}
	u.wrote = true
	return len(data), nil
}

// checkPrefix checks, after a write at off, that the buffer can still
// become one whole JSON value; mu is held. A write that continues where
// the last check ended scans only what it added; one that rewrites what
// was scanned starts the scan over. A buffer with a hole (zeros a later
// write may fill) is checked only at the clunk.
func (u *upload) checkPrefix(off int) error {
	if u.gap {
		return nil
	}
	if off < u.scanned {
		u.scan, u.scanned = prefixScanner{}, 0
	}
	for i := u.scanned; i < len(u.buf); i++ {
		if !u.scan.step(u.buf[i]) {
			// The caller undoes the write, and the scan starts over.
			return fmt.Errorf("byte %d (%s) cannot continue a JSON value", i+1, quoteByte(u.buf[i]))
		}
	}
	u.scanned = len(u.buf)
	return nil
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
	switch u.n.kind {
	case kTMeta:
		err = u.b.PublishToolMeta(u.n.arg, slices.Clone(doc))
	case kServer:
		err = serversOf(u.b).PublishServer(u.n.arg, slices.Clone(doc))
	default:
		err = u.b.PublishProfile(u.n.arg, slices.Clone(doc))
	}
	if err == nil {
		u.sent = slices.Clone(doc)
		u.published = true
		u.s.published(u.n.path)
	}
	return err
}

func (u *upload) truncate() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.account(-int64(len(u.buf)) - u.fsize)
		u.buf = u.buf[:0]
		u.scan, u.scanned, u.gap = prefixScanner{}, 0, false
		u.base, u.fsize = nil, 0
		if u.file != nil {
			u.file.Truncate(0)
		}
	}
}

// size is the length of the buffer: what a stat of this fid shows.
func (u *upload) size() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n.kind == kTExec {
		return u.fsize
	}
	return int64(len(u.buf))
}

// commit publishes what was written, at Tclunk: an executable as it is,
// a JSON file if it changed since this fid last published it. A fid that
// wrote nothing publishes nothing, and so does one with a refused write:
// its writer was told, and what it leaves is not what it meant to write.
func (u *upload) commit() error {
	err := u.publishAtClose()
	if err != nil {
		u.s.opt.Logf("9p: nothing published at the close of %s: %v", u.n.path, err)
	}
	return err
}

// publishAtClose is commit without the log.
func (u *upload) publishAtClose() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	u.closed = true
	buf := u.buf
	u.buf = nil
	u.account(-int64(len(buf)))
	if u.n.kind == kTExec {
		file, size := u.file, u.fsize
		u.file, u.base = nil, nil
		u.account(-size)
		u.fsize = 0
		if file == nil {
			return nil
		}
		if !u.wrote || u.failed {
			file.Close()
			return nil
		}
		err := u.b.PublishToolExec(u.n.arg, file, size, u.mode.Load())
		file.Close()
		if err == nil {
			u.published = true
			u.s.published(u.n.path)
		}
		return err
	}
	if !u.wrote || u.failed {
		return nil
	}
	doc := bytes.TrimSpace(buf)
	if u.sent != nil && bytes.Equal(doc, u.sent) {
		return nil
	}
	switch err := jsonComplete(doc); {
	case len(doc) == 0 || err == errIncomplete:
		return fmt.Errorf("invalid JSON in %s: it is incomplete; nothing was published", u.n.path)
	case err != nil:
		return fmt.Errorf("invalid JSON in %s: %v; nothing was published", u.n.path, err)
	}
	return u.publishJSON(doc)
}

// close drops the buffer. A created file that published nothing stays
// pending for Options.PendingTTL; an open with OTRUNC that wrote nothing
// and had no other upload of its path to empty leaves its truncation to
// the next open for writing (9pfuse truncates on a fid it closes at once).
func (u *upload) close() {
	u.mu.Lock()
	u.closed = true
	u.account(-int64(len(u.buf)) - u.fsize)
	u.buf = nil
	if u.file != nil {
		u.file.Close()
	}
	u.file, u.base, u.fsize = nil, nil, 0
	published, wrote := u.published, u.wrote
	u.mu.Unlock()
	u.s.dropPending(u)
	if published {
		return
	}
	if u.created {
		u.s.markCreated(u.n.path) // refreshes; never over the limit, the path is known
	}
	if u.trunc && !wrote && len(u.s.pendingUploads(u.n.path)) == 0 {
		u.s.setTrunc(u.n.path)
	}
}

// account adds delta to the bytes held by unfinished uploads, on the
// server and on the upload's connection.
func (u *upload) account(delta int64) {
	u.s.uploadBytes.Add(delta)
	u.held.Add(delta)
}
