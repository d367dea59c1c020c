package p9

import (
	"errors"
	"fmt"
	"sync"

	"github.com/knusbaum/go9p/proto"
)

// fid is one fid of a connection: a node and, once opened, a handle that
// holds the per-fid state (a snapshot, an answer, a call in progress).
type fid struct {
	n   *node
	who Principal // of the attach this fid descends from

	mu    sync.Mutex
	h     handle // nil until opened, and again once released
	omode proto.Mode
	gone  bool // clunked, removed or reset: never opened again
}

// handle is the state of an open fid. Its methods may be called
// concurrently (a client may pipeline reads on one fid) and after close,
// and must then fail or do nothing.
type handle interface {
	// read returns at most count bytes at off.
	read(r *req, off uint64, count uint32) ([]byte, error)
	// write takes data written at off and returns how much was taken.
	write(r *req, off uint64, data []byte) (int, error)
	// truncate is a Twstat to length 0 on the fid.
	truncate()
	// close releases the handle. It is called exactly once.
	close()
}

// release closes f's handle, once, and marks f gone. With commit (a
// Tclunk) a handle that publishes at clunk does so first; its error is
// returned, and the handle is closed all the same.
func (s *Server) release(f *fid, commit bool) error {
	f.mu.Lock()
	h := f.h
	f.h = nil
	f.gone = true
	f.mu.Unlock()
	if h == nil {
		return nil
	}
	var err error
	if cm, ok := h.(committer); ok && commit {
		err = cm.commit()
	}
	h.close()
	s.handles.Add(-1)
	return err
}

func (f *fid) handle() (handle, proto.Mode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h, f.omode
}

// Errors about fids and messages. They are protocol errors a client
// library, not a person, normally sees.
func errNoFid(id uint32) error { return fmt.Errorf("fid %d is not in use on this connection", id) }
func errFidInUse(id uint32) error {
	return fmt.Errorf("fid %d is already in use on this connection", id)
}
func errNotOpen(id uint32) error { return fmt.Errorf("fid %d is not open", id) }
func errIsOpen(id uint32) error  { return fmt.Errorf("fid %d is open; walk from an unopened fid", id) }
func errReadOnly(n *node) error  { return fmt.Errorf("permission denied: %s is read-only", n.path) }
func errWriteOnly(n *node) error { return fmt.Errorf("permission denied: %s is write-only", n.path) }
func errIsDir(n *node) error     { return fmt.Errorf("%s is a directory: it can only be read", n.path) }
func errNoAuth() error           { return errors.New("authentication not required") }
func errTooManyFids(held int) error {
	return fmt.Errorf("too many fids: this connection holds %d, the most one may; clunk the fids it no longer needs", held)
}
func errNotForReading(id uint32) error {
	return fmt.Errorf("fid %d was not opened for reading", id)
}
func errNotForWriting(id uint32) error {
	return fmt.Errorf("fid %d was not opened for writing", id)
}

func (c *conn) getFid(id uint32) (*fid, error) {
	c.mu.Lock()
	f := c.fids[id]
	c.mu.Unlock()
	if f == nil {
		return nil, errNoFid(id)
	}
	return f, nil
}

// handle serves one request and returns its response.
func (c *conn) handle(r *req) (b []byte) {
	defer func() {
		if v := recover(); v != nil {
			c.logf("panic serving %s: %v", r.fc, v)
			b = c.rerror(r.tag, errors.New("internal server error"))
		}
	}()
	var err error
	switch fc := r.fc.(type) {
	case *proto.TRead:
		b, err = c.read(r, fc)
	case *proto.TWalk:
		b, err = c.walk(fc)
	case *proto.TOpen:
		b, err = c.open(fc)
	case *proto.TClunk:
		b, err = c.clunk(fc)
	case *proto.TWrite:
		b, err = c.write(r, fc)
	case *proto.TStat:
		b, err = c.statFid(fc)
	case *proto.TWstat:
		b, err = c.wstat(fc)
	case *proto.TFlush:
		return c.flush(r, fc.Oldtag)
	case *proto.TAttach:
		b, err = c.attach(fc)
	case *proto.TAuth:
		err = errNoAuth()
	case *proto.TCreate:
		b, err = c.create(fc)
	case *proto.TRemove:
		b, err = c.remove(fc)
	default:
		err = fmt.Errorf("message %T is not a request this server serves", fc)
	}
	if obs := c.s.opt.Observe; obs != nil {
		obs(opName(r.fc), err)
	}
	if err != nil {
		return c.rerror(r.tag, err)
	}
	return b
}

// opName names a request's type for Options.Observe.
func opName(fc any) string {
	switch fc.(type) {
	case *proto.TRead:
		return "read"
	case *proto.TWalk:
		return "walk"
	case *proto.TOpen:
		return "open"
	case *proto.TClunk:
		return "clunk"
	case *proto.TWrite:
		return "write"
	case *proto.TStat:
		return "stat"
	case *proto.TWstat:
		return "wstat"
	case *proto.TAttach:
		return "attach"
	case *proto.TAuth:
		return "auth"
	case *proto.TCreate:
		return "create"
	case *proto.TRemove:
		return "remove"
	}
	return "other"
}

func (c *conn) attach(fc *proto.TAttach) ([]byte, error) {
	if fc.Afid != noFid {
		return nil, errNoAuth()
	}
	who, err := c.s.principal(fc.Aname, c.nc.RemoteAddr())
	if err != nil {
		c.logf("attach refused: %v", err)
		return nil, err
	}
	c.mu.Lock()
	_, used := c.fids[fc.Fid]
	held := len(c.fids)
	full := held >= c.s.opt.MaxFids
	if !used && !full {
		c.fids[fc.Fid] = &fid{n: rootNode, who: who}
		c.who[who.Name] = true
	}
	c.mu.Unlock()
	if used {
		return nil, errFidInUse(fc.Fid)
	}
	if full {
		return nil, errTooManyFids(held)
	}
	if fc.Aname != "" && c.s.opt.Attach != nil {
		// A revocation applied between the check above and the
		// registration missed this connection: check again, now that a
		// later one would find it.
		if _, err := c.s.principal(fc.Aname, c.nc.RemoteAddr()); err != nil {
			c.mu.Lock()
			delete(c.fids, fc.Fid)
			c.mu.Unlock()
			return nil, err
		}
	}
	m := proto.RAttach{Header: proto.Header{Type: proto.Rattach, Tag: fc.Tag}, Qid: rootNode.qid}
	return m.Compose(), nil
}

// walk follows 9P: a failure at the first name is an error; a failure
// later returns the qids walked so far and leaves newfid unset.
func (c *conn) walk(fc *proto.TWalk) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	if h, _ := f.handle(); h != nil {
		return nil, errIsOpen(fc.Fid)
	}
	if fc.Newfid != fc.Fid {
		c.mu.Lock()
		_, used := c.fids[fc.Newfid]
		c.mu.Unlock()
		if used {
			return nil, errFidInUse(fc.Newfid)
		}
	}
	n := f.n
	var qids []proto.Qid
	if len(fc.Wname) > 0 {
		qids = make([]proto.Qid, 0, len(fc.Wname))
	}
	for i, name := range fc.Wname {
		if name != ".." {
			// A refusal is an error wherever it falls, so the client
			// sees why.
			if err := need(f.who, readRole(n.kind), "walk into", n); err != nil {
				return nil, err
			}
		}
		next, err := walk1(c.s, n, name)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			break
		}
		n = next
		qids = append(qids, n.qid)
	}
	if len(qids) == len(fc.Wname) {
		c.mu.Lock()
		err = c.bindWalked(fc, f, n)
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	m := proto.RWalk{Header: proto.Header{Type: proto.Rwalk, Tag: fc.Tag}, Nwqid: uint16(len(qids)), Wqid: qids}
	return m.Compose(), nil
}

// bindWalked sets newfid to the walked node; c.mu is held. A fid walked
// onto itself is replaced by a new, unopened fid.
func (c *conn) bindWalked(fc *proto.TWalk, f *fid, n *node) error {
	if fc.Newfid != fc.Fid {
		if _, used := c.fids[fc.Newfid]; used {
			return errFidInUse(fc.Newfid)
		}
		if len(c.fids) >= c.s.opt.MaxFids {
			return errTooManyFids(len(c.fids))
		}
		c.fids[fc.Newfid] = &fid{n: n, who: f.who}
		return nil
	}
	if c.fids[fc.Fid] != f {
		return errNoFid(fc.Fid)
	}
	f.mu.Lock()
	open := f.h != nil
	f.mu.Unlock()
	if open {
		return errIsOpen(fc.Fid)
	}
	c.fids[fc.Fid] = &fid{n: n, who: f.who}
	return nil
}

func (c *conn) open(fc *proto.TOpen) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	n := f.n
	mode := fc.Mode
	if mode&proto.Orclose != 0 {
		return nil, errOrclose(n)
	}
	rw := mode & 3
	wantRead := rw == proto.Oread || rw == proto.Ordwr || rw == proto.Oexec
	wantWrite := rw == proto.Owrite || rw == proto.Ordwr || mode&proto.Otrunc != 0
	if n.isDir() && wantWrite {
		return nil, errIsDir(n)
	}
	if wantWrite && !n.writable() {
		return nil, errReadOnly(n)
	}
	if wantRead && !n.readable() {
		return nil, errWriteOnly(n)
	}
	if wantRead {
		if err := need(f.who, readRole(n.kind), "read", n); err != nil {
			return nil, err
		}
	}
	if wantWrite {
		if err := need(f.who, writeRole(n.kind), "write", n); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return nil, errNoFid(fc.Fid)
	}
	if f.h != nil {
		return nil, fmt.Errorf("fid %d is already open", fc.Fid)
	}
	var h handle
	if wantWrite && isUpload(n.kind) {
		h = c.s.openUpload(c.backendFor(f.who), n, mode&proto.Otrunc != 0, &c.uploadBytes)
	} else if readRole(n.kind) == RoleAdmin {
		if h, err = c.s.openToken(n, f.who); err != nil {
			return nil, err
		}
	} else if h, err = c.s.openHandle(c.backendFor(f.who), n); err != nil {
		return nil, err
	}
	f.h, f.omode = h, mode
	c.s.handles.Add(1)
	m := proto.ROpen{Header: proto.Header{Type: proto.Ropen, Tag: fc.Tag}, Qid: n.qid, Iounit: c.msize.Load() - ioHdrSize}
	return m.Compose(), nil
}

func (c *conn) read(r *req, fc *proto.TRead) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	h, mode := f.handle()
	if h == nil {
		return nil, errNotOpen(fc.Fid)
	}
	if mode&3 == proto.Owrite {
		return nil, errNotForReading(fc.Fid)
	}
	count := min(fc.Count, c.msize.Load()-ioHdrSize)
	data, err := h.read(r, fc.Offset, count)
	if err != nil {
		return nil, err
	}
	if uint32(len(data)) > count {
		data = data[:count]
	}
	m := proto.RRead{Header: proto.Header{Type: proto.Rread, Tag: fc.Tag}, Count: uint32(len(data)), Data: data}
	return m.Compose(), nil
}

func (c *conn) write(r *req, fc *proto.TWrite) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	h, mode := f.handle()
	if h == nil {
		return nil, errNotOpen(fc.Fid)
	}
	if rw := mode & 3; rw != proto.Owrite && rw != proto.Ordwr {
		return nil, errNotForWriting(fc.Fid)
	}
	if iounit := c.msize.Load() - ioHdrSize; uint32(len(fc.Data)) > iounit {
		return nil, fmt.Errorf("write of %d bytes is larger than the iounit, %d", len(fc.Data), iounit)
	}
	n, err := h.write(r, fc.Offset, fc.Data)
	if err != nil {
		return nil, err
	}
	m := proto.RWrite{Header: proto.Header{Type: proto.Rwrite, Tag: fc.Tag}, Count: uint32(n)}
	return m.Compose(), nil
}

// takeFid removes a fid from the connection and releases it.
func (c *conn) takeFid(id uint32) (*fid, error) {
	c.mu.Lock()
	f := c.fids[id]
	delete(c.fids, id)
	c.mu.Unlock()
	if f == nil {
		return nil, errNoFid(id)
	}
	c.s.release(f, false)
	return f, nil
}

// clunk forgets the fid. A file of t/ or a/ open for writing publishes
// what was written first; if that fails the Tclunk gets the error, and
// the fid is clunked all the same, as 9P requires.
func (c *conn) clunk(fc *proto.TClunk) ([]byte, error) {
	c.mu.Lock()
	f := c.fids[fc.Fid]
	delete(c.fids, fc.Fid)
	c.mu.Unlock()
	if f == nil {
		return nil, errNoFid(fc.Fid)
	}
	if err := c.s.release(f, true); err != nil {
		return nil, err
	}
	m := proto.RClunk{Header: proto.Header{Type: proto.Rclunk, Tag: fc.Tag}}
	return m.Compose(), nil
}

// remove clunks the fid, as 9P requires even when the remove fails (an
// upload open on it is dropped, not published). t/NAME.meta withdraws the
// tool, t/NAME removes its executable, a/NAME.json withdraws the profile;
// nothing else in the tree is removed this way.
func (c *conn) remove(fc *proto.TRemove) ([]byte, error) {
	f, err := c.takeFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	n, b := f.n, c.backendFor(f.who)
	if err := need(f.who, writeRole(n.kind), "remove", n); err != nil {
		return nil, err
	}
	if isUpload(n.kind) && c.s.forgetPending(n.path) && !c.s.isPublished(n) {
		// A file created and never published: removing it publishes
		// nothing (9pfuse removes what it created when a later step fails).
		m := proto.RRemove{Header: proto.Header{Type: proto.Rremove, Tag: fc.Tag}}
		return m.Compose(), nil
	}
	switch n.kind {
	case kSession:
		return nil, fmt.Errorf("permission denied: cannot remove session %q this way: write \"kill\" to session/%s/ctl", n.sess, n.sess)
	case kAgent:
		return nil, fmt.Errorf("permission denied: cannot remove agent %q this way: write \"kill\" to %s/ctl", n.agent, n.path)
	case kTIdx:
		return nil, errors.New("permission denied: cannot remove t/idx: it is the tool index; remove t/NAME.meta to withdraw a tool")
	case kTMeta:
		err = notFound(b.WithdrawTool(n.arg), "file does not exist: no tool %q in the cluster", n.arg)
	case kTExec:
		err = notFound(b.RemoveToolExec(n.arg), "file does not exist: tool %q has no published executable", n.arg)
	case kProfile:
		err = notFound(b.WithdrawProfile(n.arg), "file does not exist: no agent profile %q in the cluster", n.arg)
	case kServer:
		err = notFound(serversOf(b).WithdrawServer(n.arg), "file does not exist: no mcp server %q in the cluster", n.arg)
	default:
		return nil, fmt.Errorf("permission denied: cannot remove %s: the files of the tree are fixed", n.path)
	}
	if err != nil {
		return nil, err
	}
	m := proto.RRemove{Header: proto.Header{Type: proto.Rremove, Tag: fc.Tag}}
	return m.Compose(), nil
}

func errOrclose(n *node) error {
	return fmt.Errorf("invalid open mode: %s cannot be removed on close, so it cannot be opened with ORCLOSE", n.path)
}

// create makes t/NAME.meta, t/NAME or a/NAME.json: the fid becomes the
// new file, open in the create's mode on an empty buffer, and the file is
// pending: walks find it, reads see it empty. Nothing is published until
// a close leaves valid content in it (an executable: any content, always
// with mode 0755); a file never published stops being pending
// Options.PendingTTL after its last fid is closed. Any open mode works:
// plan9port's "9p create" creates with OREAD and writes on a later open.
// Creating a file that exists replaces it the same way.
func (c *conn) create(fc *proto.TCreate) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	n := f.n
	if err := need(f.who, writeRole(n.kind), "create in", n); err != nil {
		return nil, err
	}
	switch n.kind {
	case kSessionDir:
		return nil, fmt.Errorf("permission denied: cannot create %q: make a session by writing \"name=S\" to session/new", fc.Name)
	case kAgentDir:
		return nil, fmt.Errorf("permission denied: cannot create %q: make an agent by writing \"name=A\" to %s/new", fc.Name, n.path)
	case kTDir, kADir, kMDir:
	default:
		if !n.isDir() {
			return nil, fmt.Errorf("cannot create %q: %s is not a directory", fc.Name, n.path)
		}
		return nil, fmt.Errorf("permission denied: cannot create %q in %s: the files of the tree are fixed", fc.Name, n.path)
	}
	child, err := createNode(n, fc.Name, fc.Perm)
	if err != nil {
		return nil, err
	}
	if child.kind == kTSig {
		return c.createSig(f, fc, child)
	}
	mode := proto.Mode(fc.Mode)
	if mode&proto.Orclose != 0 {
		return nil, errOrclose(child)
	}
	if h, _ := f.handle(); h != nil {
		return nil, fmt.Errorf("fid %d is open; create from an unopened fid of %s", fc.Fid, n.path)
	}
	if err := c.s.markCreated(child.path); err != nil {
		return nil, err
	}
	u := c.s.newUpload(c.backendFor(f.who), child, defaultExecMode, &c.uploadBytes)
	u.created = true
	if err := c.becomeCreated(f, fc.Fid, child, u, mode); err != nil {
		u.close()
		return nil, err
	}
	m := proto.RCreate{Header: proto.Header{Type: proto.Rcreate, Tag: fc.Tag}, Qid: child.qid, Iounit: c.msize.Load() - ioHdrSize}
	return m.Compose(), nil
}

// becomeCreated makes fid number id, f until now, the created file child,
// open with h: a new fid replaces f in the table, and f is marked gone
// so a racing open fails. An error: f changed meanwhile.
func (c *conn) becomeCreated(f *fid, id uint32, child *node, h handle, mode proto.Mode) error {
	c.mu.Lock()
	f.mu.Lock()
	ok := c.fids[id] == f && f.h == nil && !f.gone
	if ok {
		f.gone = true
		c.fids[id] = &fid{n: child, who: f.who, h: h, omode: mode}
		c.s.handles.Add(1)
	}
	f.mu.Unlock()
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("fid %d changed while it was being created from", id)
	}
	return nil
}
