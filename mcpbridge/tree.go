package mcpbridge

import (
	"errors"
	"io"
	"strings"
	"sync"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// readBuf is the size of the bridge's reads.
const readBuf = 8192

// readTo reads fid from offset 0 until a read returns 0 bytes or, when
// count is not 0, fewer than count. Each read is one Tread (the client's
// ReadAt would go on reading until its buffer is full).
func readTo(fid *client.Fid, count int) (string, error) {
	var out []byte
	buf := make([]byte, readBuf)
	if _, err := fid.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	for {
		n, err := fid.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return string(out), nil
		}
		if err != nil {
			return string(out), err
		}
		if n < count {
			return string(out), nil
		}
	}
}

// readAnswer reads the answer of a file that answers writes (call, ctl,
// cluster/where, ...). The node keeps the answer whole on the fid and a
// read returns all of it that is left, up to the count asked (DESIGN §3;
// p9's answer and call files), so with the msize known a read shorter
// than the count the client sent (the buffer, cut to msize less the
// header) is the end: one round trip after the write instead of two.
func (t *tree) readAnswer(fid *client.Fid) (string, error) {
	count := 0
	if t.msize > plan9.IOHDRSZ {
		count = min(readBuf, int(t.msize)-plan9.IOHDRSZ)
	}
	return readTo(fid, count)
}

func read(t *tree, path string) (string, error) {
	fid, err := t.open(path, plan9.OREAD)
	if err != nil {
		return "", err
	}
	defer t.clunk(fid)
	return readTo(fid, 0)
}

// ask writes a request to a file that answers writes and reads the
// answer on the same fid, as 9p rdwr does.
func ask(t *tree, path, req string) (string, error) {
	fid, err := t.open(path, plan9.ORDWR)
	if err != nil {
		return "", err
	}
	defer t.clunk(fid)
	return t.rdwr(fid, req)
}

// rdwr writes req at offset 0 of fid, open ORDWR on a file that answers
// writes, and reads the answer.
func (t *tree) rdwr(fid *client.Fid, req string) (string, error) {
	if _, err := fid.WriteAt([]byte(req), 0); err != nil {
		return "", err
	}
	return t.readAnswer(fid)
}

// tell writes a command whose answer is not needed.
func tell(t *tree, path, cmd string) error {
	fid, err := t.open(path, plan9.OWRITE)
	if err != nil {
		return err
	}
	defer t.clunk(fid)
	_, err = fid.WriteAt([]byte(cmd), 0)
	return err
}

// tree is the node's 9P tree through one connection, with the bridge's
// goroutines (calls, the events watcher, the poller) all on it. The 9fans
// client puts a fid's number back in its free list as soon as it sends
// the Tclunk, before the Rclunk; a node serves a connection's requests
// concurrently, so a walk to that number sent meanwhile by another
// goroutine can reach it first and fail ("fid N is already in use on
// this connection"; seen under load before the kept fids, in about one
// round of BenchmarkMCPCall in three). tree keeps walks and clunks apart:
// one at a time on the connection. Reads and writes are not held up.
type tree struct {
	fsys  *client.Fsys
	msize uint32 // negotiated, 0 if unknown: see readAnswer
	mu    sync.Mutex
}

func (t *tree) open(path string, mode uint8) (*client.Fid, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fsys.Open(path, mode)
}

func (t *tree) clunk(fid *client.Fid) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fid.Close()
}

// fidPoolMax is how many idle open fids a fidPool keeps: as many as the
// calls an MCP client usually has in flight at once.
const fidPoolMax = 4

// fidPool keeps fids of one file that answers writes open across
// requests, so a request is a write and a read instead of a walk, open,
// write, read and clunk (the tree keeps the answer per fid and a write at
// offset 0 starts a new request). A fid serves one request at a time; a
// request that finds none idle opens another. Nothing is checked less
// than on a fresh fid: the node checks the role at the open, a
// principal's role cannot change while it is attached (a token is only
// made or revoked), revoking the token ends the connection and every fid
// on it, and a call looks its agent up again (one killed meanwhile
// fails).
type fidPool struct {
	tree *tree
	path string

	mu     sync.Mutex
	idle   []*client.Fid
	closed bool
}

// ask writes req at offset 0 of an idle fid (or a newly opened one) and
// reads the answer. A fid whose request failed is clunked, not kept: the
// error may have come from the connection rather than the request.
func (p *fidPool) ask(req string) (string, error) {
	fid, err := p.get()
	if err != nil {
		return "", err
	}
	out, err := p.tree.rdwr(fid, req)
	if err != nil {
		p.tree.clunk(fid)
		return "", err
	}
	p.put(fid)
	return out, nil
}

func (p *fidPool) get() (*client.Fid, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		fid := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return fid, nil
	}
	p.mu.Unlock()
	return p.tree.open(p.path, plan9.ORDWR)
}

func (p *fidPool) put(fid *client.Fid) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < fidPoolMax {
		p.idle = append(p.idle, fid)
		fid = nil
	}
	p.mu.Unlock()
	if fid != nil {
		p.tree.clunk(fid)
	}
}

// close clunks the idle fids; fids in use are clunked when their request
// ends.
func (p *fidPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, fid := range idle {
		p.tree.clunk(fid)
	}
}
