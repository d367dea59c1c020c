package mcpbridge

import (
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"
)

// Type numbers of the 9P messages Conn reads or makes.
const (
	rversion = 101
	rerror   = 107
	notag    = 0xFFFF
)

// Conn is the byte stream a bridge's 9P client runs over, watched: it
// learns the msize the server negotiated from its Rversion, so that a
// bridge given it (Options.Msize) can end an answer at a short read, and
// it reports the stream's end (Done), so that a bridge whose node ended
// the connection — its token revoked, or the node stopped — can end its
// MCP session with the reason instead of failing call after call.
//
// Once the stream has ended, every request still waiting for its answer,
// and every request written after, is answered here with an Rerror that
// says the connection ended. The 9P client (9fans.net/go/plan9/client)
// lets one waiting request read for all; when that read fails it hands
// the reading on to none, so without these answers every other request
// then in flight would wait forever, and whatever waited on them (a
// bridge's Close) too. Requests are tracked by tag from the messages
// written, and answered ones dropped from the messages read; a stream cut
// inside an answer still fails as it was cut.
//
// Wrap the connection before the 9P client's version exchange:
//
//	wc := mcpbridge.WatchConn(nc)
//	conn, err := client.NewConn(wc)
//	... mcpbridge.Options{Msize: wc.Msize()}
type Conn struct {
	rwc io.ReadWriteCloser

	hdr  [11]byte // size[4] type[1] tag[2] msize[4] of the first message read
	nhdr int      // bytes of hdr seen; only the client's version exchange reads them
	msz  atomic.Uint32

	in  framer // the messages read; one reader at a time (the client's)
	out framer // the messages written; one writer at a time (the client's)

	mu      sync.Mutex
	pending map[uint16]bool // tags of requests written and not answered
	ended   bool            // the stream has ended; answers come from synth
	synth   []byte          // Rerrors made for pending requests, not yet read

	once   sync.Once
	done   chan struct{}
	err    error // why the stream ended; set before done is closed
	closed atomic.Bool
}

// WatchConn wraps rwc.
func WatchConn(rwc io.ReadWriteCloser) *Conn {
	return &Conn{rwc: rwc, done: make(chan struct{}), pending: map[uint16]bool{}}
}

// Read reads from the stream; the first 11 bytes are kept to read the
// Rversion's msize. After the stream's end it reads an Rerror for each
// request left waiting, then the error that ended it. Only the reader
// makes the Rerrors, from the requests its reads have not seen answered,
// so no request is answered twice.
func (c *Conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.ended {
		defer c.mu.Unlock()
		if c.in.inside() { // cut inside an answer: the Rerrors cannot follow
			return 0, c.readErr()
		}
		if len(c.synth) == 0 {
			c.answerPending()
		}
		n := copy(p, c.synth)
		c.synth = c.synth[n:]
		if n > 0 {
			return n, nil
		}
		return 0, c.readErr()
	}
	c.mu.Unlock()
	n, err := c.rwc.Read(p)
	if c.nhdr < len(c.hdr) && n > 0 {
		k := copy(c.hdr[c.nhdr:], p[:n])
		c.nhdr += k
		if c.nhdr == len(c.hdr) && c.hdr[4] == rversion {
			c.msz.Store(binary.LittleEndian.Uint32(c.hdr[7:11]))
		}
	}
	c.in.scan(p[:n], func(tag uint16) {
		c.mu.Lock()
		delete(c.pending, tag)
		c.mu.Unlock()
	})
	if err != nil {
		c.end(err)
		if n > 0 {
			return n, nil // the next read goes on from the end
		}
		return c.Read(p)
	}
	return n, nil
}

// readErr is what a read returns once the stream has ended and no
// request waits: the error that ended it, io.EOF if none.
func (c *Conn) readErr() error {
	<-c.done
	if c.err != nil {
		return c.err
	}
	return io.EOF
}

// Write writes to the stream. A request is tracked before it is sent, so
// that its answer cannot be read before it is; written after the
// stream's end, or failing, it is answered with an Rerror instead. A
// failed write closes the stream, which ends the read waiting on it.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.scan(p, func(tag uint16) { c.pending[tag] = true })
	ended := c.ended
	c.mu.Unlock()
	if ended {
		return len(p), nil
	}
	if _, err := c.rwc.Write(p); err != nil {
		c.end(err)
		c.rwc.Close()
	}
	return len(p), nil
}

// Close closes the stream; Done is then closed with Err nil.
func (c *Conn) Close() error {
	c.closed.Store(true)
	err := c.rwc.Close()
	c.end(nil)
	return err
}

func (c *Conn) end(err error) {
	c.once.Do(func() {
		if c.closed.Load() {
			err = nil
		} else if err == nil {
			err = io.EOF
		}
		c.err = err
		c.mu.Lock()
		c.ended = true
		c.mu.Unlock()
		close(c.done)
	})
}

// answerPending makes an Rerror for each pending request; c.mu is held
// and the stream has ended. The version exchange (NOTAG) gets none: it
// reads the error itself.
func (c *Conn) answerPending() {
	why := "connection closed"
	if c.err != nil {
		why = "the 9P connection ended: " + c.err.Error()
	}
	for tag := range c.pending {
		if tag != notag {
			c.synth = appendRerror(c.synth, tag, why)
		}
	}
	clear(c.pending)
}

// appendRerror appends 9P's Rerror: size[4] Rerror tag[2] ename[s].
func appendRerror(b []byte, tag uint16, ename string) []byte {
	if len(ename) > 1024 {
		ename = ename[:1024]
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(4+1+2+2+len(ename)))
	b = append(b, rerror)
	b = binary.LittleEndian.AppendUint16(b, tag)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ename)))
	return append(b, ename...)
}

// framer follows the 9P messages of one direction of the stream through
// the chunks it is read or written in, to name each message's tag.
type framer struct {
	hdr  [7]byte // size[4] type[1] tag[2]
	nhdr int
	left int // bytes of the message after its header not yet seen
}

// scan follows b and calls done with the tag of each message that b
// completes.
func (f *framer) scan(b []byte, done func(tag uint16)) {
	for len(b) > 0 {
		if f.nhdr < len(f.hdr) {
			k := copy(f.hdr[f.nhdr:], b)
			f.nhdr += k
			b = b[k:]
			if f.nhdr < len(f.hdr) {
				return
			}
			f.left = max(int(binary.LittleEndian.Uint32(f.hdr[:4]))-len(f.hdr), 0)
		} else {
			k := min(f.left, len(b))
			f.left -= k
			b = b[k:]
		}
		if f.left == 0 {
			f.nhdr = 0
			done(binary.LittleEndian.Uint16(f.hdr[5:7]))
		}
	}
}

// inside reports whether the stream is inside a message.
func (f *framer) inside() bool { return f.nhdr > 0 }

// Msize is the msize of the server's Rversion, 0 before it (or if the
// first message read was not one).
func (c *Conn) Msize() uint32 { return c.msz.Load() }

// Done is closed when the stream has ended: a read or write failed, or
// Close was called.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the stream ended, once Done is closed: nil when it was
// closed on this side, io.EOF when the other side closed it.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}
