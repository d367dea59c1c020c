package p9

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// callLimit caps the text of one call request.
const callLimit = 1 << 20

// call is session/S/agent/A/call. Writes accumulate at their offsets
// until the text is a whole request, "NAME" or "NAME JSON", which then
// runs; its output is the answer, byte for byte. Reads and writes are
// serialized by lock, held while a call runs; a request waiting for it
// stops when flushed, and close cancels the running call.
//
// With a CallStarter the write that completes a request answers as soon
// as the call's checks have passed, and the tool runs on that request's
// worker after the answer (req.after), holding lock: a read, or the next
// request, waits for it to end. A clunk waits for it too (commit), so a
// write then a clunk — `echo NAME ARGS > call` through a mount — runs the
// tool whole, and a failure nobody read is the clunk's error. The run is
// cancelled by the end of the connection, not by a flush of a waiting
// read.
type call struct {
	s *Server
	b Backend
	n *node

	lock    chan struct{} // a mutex a flushed request can stop waiting for
	pending []byte        // an incomplete request
	base    uint64        // offset of pending[0]
	out     []byte
	has     bool
	err     error // the failed run's error, for reads until the next request
	errSeen bool  // a read has answered err

	ctx    context.Context // cancelled by close: a clunk stops the call
	cancel context.CancelFunc
}

func newCall(s *Server, b Backend, n *node) *call {
	ctx, cancel := context.WithCancel(s.ctx)
	return &call{s: s, b: b, n: n, lock: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// acquire takes the call's lock unless the request is cancelled first.
func acquire(lock chan struct{}, r *req) error {
	select {
	case lock <- struct{}{}:
		return nil
	default:
	}
	ctx := r.context()
	select {
	case lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errors.New("request interrupted")
	}
}

func (c *call) write(r *req, off uint64, data []byte) (int, error) {
	if err := acquire(c.lock, r); err != nil {
		return 0, err
	}
	held := true
	defer func() {
		if held {
			<-c.lock
		}
	}()

	end := c.base + uint64(len(c.pending))
	switch {
	case len(c.pending) == 0 || off == 0:
		c.pending, c.base = c.pending[:0], off
	case off > c.base && off < end:
		c.pending = c.pending[:off-c.base] // a client writing again
	case off != end:
		c.pending = nil
		return 0, fmt.Errorf("write at offset %d does not continue the call request, which ends at offset %d", off, end)
	}
	if len(c.pending)+len(data) > callLimit {
		c.pending = nil
		return 0, errors.New("call arguments are limited to 1 MiB")
	}
	first := len(c.pending) == 0
	c.pending = append(c.pending, data...)

	name, args, err := parseCall(c.pending, first)
	switch {
	case err == errIncomplete:
		return len(data), nil
	case err != nil:
		c.pending, c.out, c.has, c.err = nil, nil, false, nil
		return 0, err
	case name == "":
		c.pending = c.pending[:0] // blank: nothing to run
		return len(data), nil
	}
	c.pending = nil
	c.out, c.has, c.err, c.errSeen = nil, false, nil, false
	if st, ok := c.b.(CallStarter); ok {
		run, err := st.StartCall(r.context(), c.n.sess, c.n.agent, name, args)
		if err != nil {
			return 0, agentErr(c.n, err)
		}
		// The lock passes to the run, which starts once Rwrite is sent.
		held = false
		conn := r.c
		r.after = func() {
			ctx, stop := mergeCancel(conn.ctx, c.ctx)
			var out []byte
			err := ctx.Err() // the fid clunked or the connection gone: no run
			if err == nil {
				out, err = run(ctx)
			}
			stop()
			if err != nil {
				c.err = agentErr(c.n, err)
			} else {
				c.out, c.has = out, true
			}
			<-c.lock
		}
		return len(data), nil
	}
	ctx, stop := mergeCancel(r.context(), c.ctx)
	defer stop()
	out, err := c.b.Call(ctx, c.n.sess, c.n.agent, name, args)
	if err != nil {
		return 0, agentErr(c.n, err)
	}
	c.out, c.has = out, true
	return len(data), nil
}

func (c *call) read(r *req, off uint64, count uint32) ([]byte, error) {
	if err := acquire(c.lock, r); err != nil {
		return nil, err
	}
	defer func() { <-c.lock }()
	if len(c.pending) > 0 {
		name, _, _ := parseCall(c.pending, false)
		return nil, fmt.Errorf("the call request for %q is incomplete: its JSON arguments (%d bytes so far) do not parse; write the rest", name, len(c.pending))
	}
	if c.err != nil {
		c.errSeen = true
		return nil, c.err
	}
	if !c.has {
		return nil, nil // nothing asked yet: nothing to answer
	}
	return window(c.out, off, count), nil
}

func (c *call) truncate() {
	select {
	case c.lock <- struct{}{}:
		c.pending = nil
		<-c.lock
	default: // a call is running; a truncation does not stop it
	}
}

func (c *call) close() { c.cancel() }

// commit is a Tclunk's: it waits for a run the last write started, and
// returns that run's error when no read has answered it.
func (c *call) commit() error {
	c.lock <- struct{}{}
	defer func() { <-c.lock }()
	if c.err != nil && !c.errSeen {
		return c.err
	}
	return nil
}

var errIncomplete = errors.New("incomplete call request")

// parseCall splits "NAME [JSON]" into the name and the arguments ("{}"
// when absent). It returns errIncomplete while the JSON is a prefix of a
// value, and an empty name for blank text. An object is whole only when
// its last byte is '}', so the JSON is parsed then, and for the first
// write of a request (to refuse a malformed one-write request at once);
// the pieces of a large request written in parts are not each reparsed.
func parseCall(text []byte, first bool) (string, []byte, error) {
	text = bytes.TrimSpace(text)
	if len(text) == 0 {
		return "", nil, nil
	}
	i := bytes.IndexFunc(text, isSpace)
	if i < 0 {
		return string(text), []byte("{}"), nil
	}
	name := string(text[:i])
	args := bytes.TrimSpace(text[i:])
	if args[0] != '{' {
		return "", nil, fmt.Errorf("the arguments of %s must be a JSON object, like {\"key\":\"value\"}", name)
	}
	if !first && args[len(args)-1] != '}' {
		return name, nil, errIncomplete
	}
	if err := jsonComplete(args); err != nil {
		if err == errIncomplete {
			return name, nil, err
		}
		return "", nil, fmt.Errorf("the arguments of %s are not valid JSON: %v", name, err)
	}
	return name, args, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// jsonComplete reports whether text is one whole JSON value: nil if it
// is, errIncomplete if it is the beginning of one, another error if it can
// never become one.
func jsonComplete(text []byte) error {
	if json.Valid(text) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return errIncomplete
		}
		return err
	}
	return errors.New("there is text after the JSON value")
}
