package sandbox

import (
	"bytes"
	"context"
	"os"
)

// A call's side channel (DESIGN §9): every tool has file descriptor 3
// open, the write end of a pipe, for lines such as "progress N/M MESSAGE";
// what it writes there, and each line of its standard error, go while it
// runs to the LineFunc its context carries (WithLines), if any; without
// one, fd 3 is read and dropped.

// Descriptors a LineFunc is told of.
const (
	FdStderr = 2
	FdSide   = 3
)

// MaxLine is the longest line passed on; a longer one is cut.
const MaxLine = 4 << 10

// LineFunc is told each line a running call writes to fd (FdStderr or
// FdSide), without its newline. It is called from the call's pipe
// readers, one line at a time per descriptor, and must not block.
type LineFunc func(fd int, line string)

type linesKey struct{}

// WithLines makes ctx carry f for the calls run with it.
func WithLines(ctx context.Context, f LineFunc) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, linesKey{}, f)
}

func linesOf(ctx context.Context) LineFunc {
	f, _ := ctx.Value(linesKey{}).(LineFunc)
	return f
}

// splitter cuts what a descriptor gives into lines for f.
type splitter struct {
	fd   int
	f    LineFunc
	buf  []byte
	long bool // the line in buf went past MaxLine: the rest is dropped
}

func (s *splitter) write(b []byte) {
	if s.f == nil {
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if room := MaxLine - len(s.buf); len(part) > room {
			part, s.long = part[:room], true
		}
		s.buf = append(s.buf, part...)
		if i < 0 {
			return
		}
		s.emit()
		b = b[i+1:]
	}
}

func (s *splitter) emit() {
	line := bytes.TrimSuffix(s.buf, []byte("\r"))
	s.f(s.fd, string(line))
	s.buf, s.long = s.buf[:0], false
}

// flush passes on a last line without its newline.
func (s *splitter) flush() {
	if s.f != nil && len(s.buf) > 0 {
		s.emit()
	}
}

// readSide reads fd 3's pipe to its end.
func readSide(r *os.File, f LineFunc) {
	sp := splitter{fd: FdSide, f: f}
	chunk := make([]byte, 4<<10)
	for {
		n, err := r.Read(chunk)
		sp.write(chunk[:n])
		if err != nil {
			sp.flush()
			return
		}
	}
}
