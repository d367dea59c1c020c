package p9

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/knusbaum/go9p/proto"
)

// Sizes of the 9P2000 wire format.
const (
	headerSize = 7  // size[4] type[1] tag[2]
	ioHdrSize  = 24 // IOHDRSZ: room for the header of Tread/Rread/Twrite
	maxWelem   = 16 // MAXWELEM: names in one Twalk
	minMsize   = 256
	noTag      = 0xFFFF
	noFid      = 0xFFFFFFFF
	statFixed  = 2 + 2 + 4 + 13 + 4 + 4 + 4 + 8 // size..length of a stat
)

// errFrame is a frame that cannot be read at all: the connection ends.
type errFrame struct{ reason string }

func (e *errFrame) Error() string { return e.reason }

// readFrame reads one whole message into buf (growing it when needed) and
// returns it, size field included. A size below the header size or above
// limit is an errFrame: the stream cannot be trusted after it.
func readFrame(r io.Reader, buf []byte, limit uint32) ([]byte, error) {
	if cap(buf) < 4 {
		buf = make([]byte, 4, 512)
	}
	buf = buf[:4]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf, err
	}
	size := binary.LittleEndian.Uint32(buf)
	if size < headerSize {
		return buf, &errFrame{fmt.Sprintf("frame of %d bytes is shorter than a 9P header", size)}
	}
	if size > limit {
		return buf, &errFrame{fmt.Sprintf("frame of %d bytes exceeds msize %d", size, limit)}
	}
	if uint32(cap(buf)) < size {
		nb := make([]byte, size)
		copy(nb, buf)
		buf = nb
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf, err
	}
	return buf, nil
}

// cursor walks the body of a frame, checking every field fits.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) skip(n int) {
	if c.bad || len(c.b) < n {
		c.bad = true
		return
	}
	c.b = c.b[n:]
}

func (c *cursor) u16() uint16 {
	if c.bad || len(c.b) < 2 {
		c.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint16(c.b)
	c.b = c.b[2:]
	return v
}

func (c *cursor) u32() uint32 {
	if c.bad || len(c.b) < 4 {
		c.bad = true
		return 0
	}
	v := binary.LittleEndian.Uint32(c.b)
	c.b = c.b[4:]
	return v
}

func (c *cursor) str() { c.skip(int(c.u16())) }

var (
	errShort       = errors.New("message is shorter than its fields")
	errTooManyElem = fmt.Errorf("a walk takes at most %d names", maxWelem)
)

// checkFrame validates a frame's structure before it is handed to the
// parser: the type is a T-message we serve, every field lies inside the
// frame and the fields use the whole frame. The go9p parsers read past
// short bodies and trust counts; nothing reaches them unchecked.
func checkFrame(frame []byte) error {
	typ := frame[4]
	c := cursor{b: frame[headerSize:]}
	switch typ {
	case proto.Tversion:
		c.skip(4)
		c.str()
	case proto.Tauth:
		c.skip(4)
		c.str()
		c.str()
	case proto.Tattach:
		c.skip(8)
		c.str()
		c.str()
	case proto.Tflush:
		c.skip(2)
	case proto.Twalk:
		c.skip(8)
		n := c.u16()
		if n > maxWelem {
			return errTooManyElem
		}
		for range n {
			c.str()
		}
	case proto.Topen:
		c.skip(5)
	case proto.Tcreate:
		c.skip(4)
		c.str()
		c.skip(5)
	case proto.Tread:
		c.skip(16)
	case proto.Twrite:
		c.skip(12)
		c.skip(int(c.u32()))
	case proto.Tclunk, proto.Tremove, proto.Tstat:
		c.skip(4)
	case proto.Twstat:
		c.skip(4)
		n := int(c.u16())
		if !c.bad && n != len(c.b) {
			return fmt.Errorf("stat of %d bytes in a message that holds %d", n, len(c.b))
		}
		inner := int(c.u16())
		if !c.bad && inner != n-2 {
			return fmt.Errorf("stat says %d bytes but holds %d", inner, n-2)
		}
		c.skip(statFixed - 2)
		c.str()
		c.str()
		c.str()
		c.str()
	default:
		if typ%2 == 1 && typ > proto.Tversion && typ <= proto.Rwstat {
			return fmt.Errorf("message type %d is a reply; a server accepts only requests", typ)
		}
		return fmt.Errorf("message type %d is not a 9P2000 request", typ)
	}
	if c.bad {
		return errShort
	}
	if len(c.b) != 0 {
		return fmt.Errorf("message has %d bytes after its fields", len(c.b))
	}
	return nil
}

// parseFrame checks a frame and parses it with the go9p parser, which is
// run under recover so no input can take the server down.
func parseFrame(frame []byte) (fc proto.FCall, err error) {
	if err := checkFrame(frame); err != nil {
		return nil, err
	}
	defer func() {
		if v := recover(); v != nil {
			fc, err = nil, fmt.Errorf("message could not be parsed: %v", v)
		}
	}()
	fc, err = proto.ParseCall(bytes.NewReader(frame))
	if err != nil {
		return nil, fmt.Errorf("message could not be parsed: %w", err)
	}
	return fc, nil
}
