package mcpbridge

import (
	"encoding/binary"
	"io"
	"sync"
	"sync/atomic"
)

// rversion is the type number of 9P's Rversion.
const rversion = 101

// Conn is the byte stream a bridge's 9P client runs over, watched: it
// learns the msize the server negotiated from its Rversion, so that a
// bridge given it (Options.Msize) can end an answer at a short read, and
// it reports the stream's end (Done), so that a bridge whose node ended
// the connection — its token revoked, or the node stopped — can end its
// MCP session with the reason instead of failing call after call.
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

	once   sync.Once
	done   chan struct{}
	err    error // why the stream ended; set before done is closed
	closed atomic.Bool
}

// WatchConn wraps rwc.
func WatchConn(rwc io.ReadWriteCloser) *Conn {
	return &Conn{rwc: rwc, done: make(chan struct{})}
}

// Read reads from the stream; the first 11 bytes are kept to read the
// Rversion's msize.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.rwc.Read(p)
	if c.nhdr < len(c.hdr) && n > 0 {
		k := copy(c.hdr[c.nhdr:], p[:n])
		c.nhdr += k
		if c.nhdr == len(c.hdr) && c.hdr[4] == rversion {
			c.msz.Store(binary.LittleEndian.Uint32(c.hdr[7:11]))
		}
	}
	if err != nil {
		c.end(err)
	}
	return n, err
}

// Write writes to the stream.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.rwc.Write(p)
	if err != nil {
		c.end(err)
	}
	return n, err
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
		close(c.done)
	})
}

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
