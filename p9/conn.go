package p9

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/knusbaum/go9p/proto"
)

// drainTime is how long a connection whose client stopped sending may
// still spend writing the answers it owes.
const drainTime = 5 * time.Second

// conn is one client connection. The reader goroutine reads frames and
// hands each request to a worker; at most MaxInflight requests are held
// at once (slots), so a client that sends faster than it is served is
// stopped by TCP. Responses are written one at a time through a buffered
// writer, flushed by the last of the responders queued for it, so a burst
// of answers goes out in one batch.
type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context // cancelled when the connection ends
	cancel context.CancelFunc

	msize     atomic.Uint32 // negotiated; MaxMsize before Tversion
	versioned bool          // reader only: a Tversion was accepted

	slots chan struct{} // one per request being handled
	// flushSlots bound the Tflushes waiting for their requests; they do
	// not take request slots, so a full connection can still cancel.
	flushSlots chan struct{}
	pending    chan *req     // read, waiting for a slot
	queued     atomic.Int32  // requests in pending or being dispatched from it
	dispatched chan struct{} // closed when dispatchLoop ends
	work       chan *req
	nworkers   int            // whoever dispatches: the reader while queued is 0, else dispatchLoop
	workers    sync.WaitGroup // worker goroutines
	reqs       sync.WaitGroup // requests handed to workers and not yet answered

	wmu     sync.Mutex // serializes responses
	bw      *bufio.Writer
	wfailed bool         // a write failed: the rest are dropped
	wqueued atomic.Int32 // responders writing or waiting for wmu

	mu   sync.Mutex
	tags map[uint16]*req
	fids map[uint32]*fid
	who  map[string]bool // names attached as, for DropPrincipal

	uploadBytes atomic.Int64       // held by this connection's unfinished uploads
	bound       map[string]Backend // Options.Bind's Backend for each principal attached as (Principal.key)
}

// req is one request in flight.
type req struct {
	c   *conn
	fc  proto.FCall
	tag uint16

	mu       sync.Mutex
	ctx      context.Context // made on first use: most requests never need one
	cancel   context.CancelFunc
	flushed  bool
	finished bool            // the response is queued
	waiters  []chan struct{} // Tflushes waiting for the response

	// after, set by the handler, is work of the request done on its
	// worker once the response is sent (a call's run), still holding the
	// request's slot.
	after func()
}

// context returns the request's context, cancelled by a Tflush of its tag,
// the end of the connection or the server's Close.
func (r *req) context() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(r.c.ctx)
		if r.flushed {
			r.cancel()
		}
	}
	return r.ctx
}

// abort cancels the request's work. It reports whether the response is
// still to come, and then returns a channel closed once it is queued.
func (r *req) abort(wait bool) (chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return nil, false
	}
	r.flushed = true
	if r.cancel != nil {
		r.cancel()
	}
	if !wait {
		return nil, true
	}
	ch := make(chan struct{})
	r.waiters = append(r.waiters, ch)
	return ch, true
}

// wasFlushed reports whether a Tflush cancelled the request.
func (r *req) wasFlushed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushed
}

// finish marks the response queued and wakes any Tflush waiting for it.
func (r *req) finish() {
	r.mu.Lock()
	r.finished = true
	ws := r.waiters
	r.waiters = nil
	cancel := r.cancel
	r.mu.Unlock()
	for _, ch := range ws {
		close(ch)
	}
	if cancel != nil {
		cancel()
	}
}

func newConn(s *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	c := &conn{
		s:          s,
		nc:         nc,
		ctx:        ctx,
		cancel:     cancel,
		slots:      make(chan struct{}, s.opt.MaxInflight),
		flushSlots: make(chan struct{}, s.opt.MaxInflight),
		pending:    make(chan *req, s.opt.MaxInflight),
		dispatched: make(chan struct{}),
		work:       make(chan *req),
		tags:       make(map[uint16]*req),
		fids:       make(map[uint32]*fid),
		who:        make(map[string]bool),
	}
	c.bw = bufio.NewWriterSize(nc, 16*1024)
	c.msize.Store(s.opt.MaxMsize)
	return c
}

func (c *conn) logf(format string, args ...any) {
	c.s.opt.Logf("9p: %s: %s", c.nc.RemoteAddr(), fmt.Sprintf(format, args...))
}

// serve runs the connection to its end, then releases everything it held:
// no fid, handle or goroutine outlives it.
func (c *conn) serve() {
	defer c.s.dropConn(c)
	go c.dispatchLoop()
	if c.readLoop() {
		// The client stopped sending: let it have the answers it is owed.
		c.nc.SetWriteDeadline(time.Now().Add(drainTime))
	} else {
		c.nc.Close()
	}
	c.cancel()
	close(c.pending)
	<-c.dispatched
	close(c.work)
	c.workers.Wait()
	c.nc.Close()
	c.clunkAll()
}

// readLoop reads requests until the connection fails, and reports whether
// it ended at a clean end of stream. Requests queue for the dispatcher,
// which waits for a free slot; when the queue is full too, the reader
// stops reading and TCP pushes back on the client. While nothing is
// queued and a slot is free, the reader hands a request to a worker
// itself, so a lone request wakes one goroutine. A Tflush skips the
// queue and needs no request slot, so a client can cancel a blocked
// request even when every slot is busy.
func (c *conn) readLoop() bool {
	br := bufio.NewReaderSize(c.nc, 8192)
	var buf []byte
	for {
		frame, err := readFrame(br, buf, c.msize.Load())
		buf = frame[:0]
		if err != nil {
			var fe *errFrame
			switch {
			case errors.As(err, &fe):
				c.logf("closing connection: %v", err)
			case err == io.EOF:
				return true
			case c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed):
				c.logf("closing connection: %v", err)
			}
			return false
		}
		fc, err := parseFrame(frame)
		if err != nil {
			c.respondErr(nil, binary.LittleEndian.Uint16(frame[5:7]), err)
			continue
		}
		if v, ok := fc.(*proto.TRVersion); ok {
			c.version(v)
			continue
		}
		tag := fc.GetTag()
		if !c.versioned {
			c.respondErr(nil, tag, errors.New("the first message must be Tversion"))
			continue
		}
		_, isFlush := fc.(*proto.TFlush)
		if isFlush {
			select {
			case c.flushSlots <- struct{}{}:
			case <-c.ctx.Done():
				return false
			}
		}
		r := &req{c: c, fc: fc, tag: tag}
		c.mu.Lock()
		_, dup := c.tags[tag]
		if !dup && tag != noTag {
			c.tags[tag] = r
		}
		c.mu.Unlock()
		if dup || tag == noTag {
			err := fmt.Errorf("tag %d is already in use", tag)
			if tag == noTag {
				err = errors.New("tag NOTAG (65535) is only for Tversion")
			}
			c.respondErr(nil, tag, err)
			if isFlush {
				<-c.flushSlots
			}
			continue
		}
		c.reqs.Add(1)
		if isFlush {
			c.workers.Add(1)
			go c.flushWorker(r)
			continue
		}
		// With nothing queued before it and a slot free, the reader hands
		// the request to a worker itself: one goroutine woken instead of
		// two (the dispatcher, then the worker).
		if c.queued.Load() == 0 {
			select {
			case c.slots <- struct{}{}:
				c.dispatch(r)
				continue
			default:
			}
		}
		c.queued.Add(1)
		select {
		case c.pending <- r:
		case <-c.ctx.Done():
			r.finish()
			c.reqs.Done()
			return false
		}
	}
}

// dispatchLoop hands queued requests to workers as slots free up. It
// ends when the reader closes the queue; every request queued by then is
// still handled (a cancelled connection makes that quick).
func (c *conn) dispatchLoop() {
	defer close(c.dispatched)
	for r := range c.pending {
		c.slots <- struct{}{}
		c.dispatch(r)
		c.queued.Add(-1)
	}
}

// flushWorker answers one Tflush outside the request slots.
func (c *conn) flushWorker(r *req) {
	defer c.workers.Done()
	b := c.handle(r)
	c.send(b, r)
	r.finish()
	<-c.flushSlots
	c.reqs.Done()
}

// dispatch hands r to an idle worker, or starts one while there are fewer
// than MaxInflight. The slots guarantee a worker is free soon otherwise.
func (c *conn) dispatch(r *req) {
	select {
	case c.work <- r:
		return
	default:
	}
	if c.nworkers < c.s.opt.MaxInflight {
		c.nworkers++
		c.workers.Add(1)
		go c.worker(r)
		return
	}
	c.work <- r
}

func (c *conn) worker(r *req) {
	defer c.workers.Done()
	for {
		var b []byte
		if r.wasFlushed() {
			b = c.rerror(r.tag, errors.New("request flushed before it started"))
		} else {
			b = c.handle(r)
		}
		c.send(b, r)
		r.finish()
		if r.after != nil {
			r.after()
		}
		<-c.slots
		c.reqs.Done()
		var ok bool
		if r, ok = <-c.work; !ok {
			return
		}
	}
}

// respondErr queues an Rerror. r is nil for messages that never held a tag.
func (c *conn) respondErr(r *req, tag uint16, err error) {
	c.send(c.rerror(tag, err), r)
}

// rerror composes an Rerror, cutting the text to fit the message size.
func (c *conn) rerror(tag uint16, err error) []byte {
	text := err.Error()
	if limit := int(c.msize.Load()) - 9; len(text) > limit {
		text = strings.ToValidUTF8(text[:limit], "")
	}
	m := proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: tag}, Ename: text}
	return m.Compose()
}

// send writes one response. r is the request it answers, whose tag is
// freed just before the bytes go out: the client may reuse it as soon as
// it reads them. The last responder in line flushes. After a write error
// the connection is closed and later responses are dropped.
func (c *conn) send(b []byte, r *req) {
	c.wqueued.Add(1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if r != nil {
		c.mu.Lock()
		if c.tags[r.tag] == r {
			delete(c.tags, r.tag)
		}
		c.mu.Unlock()
	}
	if !c.wfailed {
		if _, err := c.bw.Write(b); err != nil {
			c.writeFailed(err)
		}
	}
	if c.wqueued.Add(-1) == 0 && !c.wfailed {
		if err := c.bw.Flush(); err != nil {
			c.writeFailed(err)
		}
	}
}

// writeFailed is called with wmu held.
func (c *conn) writeFailed(err error) {
	c.wfailed = true
	if c.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
		c.logf("closing connection: write: %v", err)
	}
	c.nc.Close()
}

// version handles Tversion in the reader: it aborts every request of the
// old session, waits for their answers, clunks every fid, then answers.
func (c *conn) version(v *proto.TRVersion) {
	c.mu.Lock()
	for _, r := range c.tags {
		r.abort(false)
	}
	c.mu.Unlock()
	c.reqs.Wait()
	c.clunkAll()
	c.versioned = false

	msize := min(v.Msize, c.s.opt.MaxMsize)
	if msize < minMsize {
		c.respondErr(nil, v.Tag, fmt.Errorf("msize too small: %d bytes; the server needs at least %d", v.Msize, minMsize))
		return
	}
	reply := proto.TRVersion{Header: proto.Header{Type: proto.Rversion, Tag: v.Tag}, Msize: msize, Version: "unknown"}
	if strings.HasPrefix(v.Version, "9P2000") {
		reply.Version = "9P2000"
		c.versioned = true
		c.msize.Store(msize)
	}
	c.send(reply.Compose(), nil)
}

// flush handles Tflush: it cancels the request with the old tag and waits
// until that request's response is queued, so Rflush always comes after.
func (c *conn) flush(r *req, old uint16) []byte {
	c.mu.Lock()
	o := c.tags[old]
	c.mu.Unlock()
	if o != nil && o != r {
		if ch, pending := o.abort(true); pending {
			<-ch
		}
	}
	m := proto.RFlush{Header: proto.Header{Type: proto.Rflush, Tag: r.tag}}
	return m.Compose()
}

// clunkAll forgets every fid and closes its handle.
func (c *conn) clunkAll() {
	c.mu.Lock()
	fids := c.fids
	c.fids = make(map[uint32]*fid)
	c.mu.Unlock()
	for _, f := range fids {
		c.s.release(f, false)
	}
}

// backendFor is the Backend the requests of a fid attached as who go to:
// Options.Bind's for who (made once per principal on a connection), or
// the server's own.
func (c *conn) backendFor(who Principal) Backend {
	if c.s.opt.Bind == nil {
		return c.s.b
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.bound[who.key()]
	if !ok {
		b = c.s.opt.Bind(who)
		if c.bound == nil {
			c.bound = map[string]Backend{}
		}
		c.bound[who.key()] = b
	}
	return b
}
