package p9proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/knusbaum/go9p/proto"
)

const (
	headerSize = 7 // size[4] type[1] tag[2]
	minMsize   = 256
	// MaxTokenLen is the longest token the proxy presents: it must fit an
	// attach inside the smallest msize a server negotiates.
	MaxTokenLen = 128
)

// Options configure a Proxy.
type Options struct {
	// Dial connects to the node for one client. It must return a
	// connection ready for 9P (any TLS handshake done), and give up when
	// ctx ends.
	Dial func(ctx context.Context) (net.Conn, error)
	// Token, when not empty, is the aname of every Tattach and Tauth sent
	// upstream, whatever the client sent. At most MaxTokenLen bytes.
	Token string
	// MaxMsize is the largest message either side may send (default and
	// cap 65535, at least 256); a client asking for more is offered this.
	MaxMsize uint32
	// MaxConns is how many clients are served at once (default 256).
	MaxConns int
	// DialTimeout bounds Dial (default 10s).
	DialTimeout time.Duration
	// Logf receives one line per refused or dropped connection (default
	// log.Printf).
	Logf func(format string, args ...any)
}

// Proxy forwards 9P connections; see the package documentation. Its
// methods are safe for concurrent use.
type Proxy struct {
	opt    Options
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*session]struct{}
	wg        sync.WaitGroup
}

// New returns a proxy with opt. Dial is required, and a token must be at
// most MaxTokenLen bytes.
func New(opt Options) (*Proxy, error) {
	if opt.Dial == nil {
		return nil, errors.New("p9proxy: no dialer for the node")
	}
	if len(opt.Token) > MaxTokenLen {
		return nil, fmt.Errorf("p9proxy: a token of %d bytes is longer than the %d an attach can carry", len(opt.Token), MaxTokenLen)
	}
	if opt.MaxMsize == 0 || opt.MaxMsize > proto.MaxMsgLen {
		opt.MaxMsize = proto.MaxMsgLen
	}
	opt.MaxMsize = max(opt.MaxMsize, minMsize)
	if opt.MaxConns <= 0 {
		opt.MaxConns = 256
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = 10 * time.Second
	}
	if opt.Logf == nil {
		opt.Logf = log.Printf
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		opt: opt, ctx: ctx, cancel: cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*session]struct{}),
	}, nil
}

// Serve accepts clients on l until Close, then returns nil; or returns
// the listener's error.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
	}()
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.opt.Logf("proxy: accept: %v; retrying in %v", err, delay)
			select {
			case <-time.After(delay):
				continue
			case <-p.ctx.Done():
				return nil
			}
		}
		delay = 0
		if s := p.newSession(c); s != nil {
			go s.run()
		}
	}
}

// ServeConn forwards one client connection and returns when it ends. The
// proxy closes c.
func (p *Proxy) ServeConn(c net.Conn) {
	if s := p.newSession(c); s != nil {
		s.run()
	}
}

// Close stops every listener and connection and waits for them.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.cancel()
		for l := range p.listeners {
			l.Close()
		}
		for s := range p.conns {
			s.client.Close()
			if s.upstream != nil {
				s.upstream.Close()
			}
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) newSession(c net.Conn) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return nil
	}
	if len(p.conns) >= p.opt.MaxConns {
		p.opt.Logf("proxy: refusing %s: %d clients are connected, the most this proxy serves", c.RemoteAddr(), len(p.conns))
		c.Close()
		return nil
	}
	s := &session{p: p, client: c, who: c.RemoteAddr().String()}
	s.msize.Store(p.opt.MaxMsize)
	p.conns[s] = struct{}{}
	p.wg.Add(1)
	return s
}

func (p *Proxy) dropSession(s *session) {
	p.mu.Lock()
	delete(p.conns, s)
	p.mu.Unlock()
	p.wg.Done()
}

// session is one client and its upstream connection.
type session struct {
	p        *Proxy
	client   net.Conn
	upstream net.Conn // set under p.mu
	who      string   // the client's address, for the log
	msize    atomic.Uint32

	cmu sync.Mutex // serialises writes to the client
	cw  *bufio.Writer

	once sync.Once
}

// errFrame is a frame the proxy will not forward: the session ends.
type errFrame struct{ reason string }

func (e *errFrame) Error() string { return e.reason }

func (s *session) run() {
	defer s.p.dropSession(s)
	defer s.client.Close()
	ctx, cancel := context.WithTimeout(s.p.ctx, s.p.opt.DialTimeout)
	up, err := s.p.opt.Dial(ctx)
	cancel()
	if err != nil {
		s.p.opt.Logf("proxy: %s: cannot reach the node: %v", s.who, err)
		s.refuse("proxy: cannot reach the node: " + err.Error())
		return
	}
	s.p.mu.Lock()
	closed := s.p.closed
	s.upstream = up
	s.p.mu.Unlock()
	if closed {
		up.Close()
		return
	}
	defer up.Close()
	s.cw = bufio.NewWriter(s.client)

	done := make(chan struct{})
	go func() {
		defer close(done)
		s.end(s.downstream(), "from the node")
	}()
	s.end(s.upstreamLoop(), "from the client")
	<-done
}

// refuse answers the client's first request, its Tversion, with an
// Rerror saying why it will not be served, so a mount fails with the
// reason rather than a bare end of file.
func (s *session) refuse(why string) {
	s.client.SetDeadline(time.Now().Add(5 * time.Second))
	frame, err := readFrame(bufio.NewReader(s.client), nil, s.msize.Load)
	if err != nil {
		return
	}
	if len(why) > minMsize-headerSize-2 {
		why = why[:minMsize-headerSize-2]
	}
	s.cw = bufio.NewWriter(s.client)
	s.rerror(frame[5:7], why)
}

// end closes both connections once, logging why unless the stream simply
// ended.
func (s *session) end(err error, dir string) {
	s.once.Do(func() {
		s.client.Close()
		s.upstream.Close()
		// A client that goes away, even abruptly (a killed FUSE
		// daemon resets its connection), is no event worth a line.
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
			errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || s.p.ctx.Err() != nil {
			return
		}
		s.p.opt.Logf("proxy: closing connection of %s: %s: %v", s.who, dir, err)
	})
}

// upstreamLoop forwards the client's requests to the node.
func (s *session) upstreamLoop() error {
	br := bufio.NewReaderSize(s.client, 64<<10)
	bw := bufio.NewWriterSize(s.upstream, 64<<10)
	var buf []byte
	for {
		frame, err := readFrame(br, buf, s.msize.Load)
		if err != nil {
			return err
		}
		buf = frame
		switch frame[4] {
		case proto.Tversion:
			if len(frame) < headerSize+4 {
				return &errFrame{"Tversion shorter than its fields"}
			}
			if binary.LittleEndian.Uint32(frame[headerSize:]) > s.p.opt.MaxMsize {
				binary.LittleEndian.PutUint32(frame[headerSize:], s.p.opt.MaxMsize)
			}
		case proto.Tattach, proto.Tauth:
			if frame, err = s.attach(frame); err != nil {
				return err
			}
			if frame == nil {
				continue // answered here
			}
		}
		if _, err := bw.Write(frame); err != nil {
			return err
		}
		if !frameBuffered(br) {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
}

// attach checks a Tattach or Tauth and puts the token in its aname. It
// returns nil, having answered the client, when the result would not fit
// the msize.
func (s *session) attach(frame []byte) ([]byte, error) {
	typ, tag := frame[4], frame[5:7]
	fixed := 8 // fid[4] afid[4]
	name := "Tattach"
	if typ == proto.Tauth {
		fixed, name = 4, "Tauth" // afid[4]
	}
	body := frame[headerSize:]
	if len(body) < fixed {
		return nil, &errFrame{name + " shorter than its fields"}
	}
	rest := body[fixed:]
	uname, rest, ok := str(rest)
	if !ok {
		return nil, &errFrame{name + " shorter than its fields"}
	}
	_, rest, ok = str(rest) // the aname: kept, or replaced by the token below
	if !ok {
		return nil, &errFrame{name + " shorter than its fields"}
	}
	if len(rest) != 0 {
		return nil, &errFrame{fmt.Sprintf("%s has %d bytes after its fields", name, len(rest))}
	}
	if s.p.opt.Token == "" {
		return frame, nil
	}
	size := headerSize + fixed + 2 + len(uname) + 2 + len(s.p.opt.Token)
	if uint32(size) > s.msize.Load() {
		return nil, s.rerror(tag, fmt.Sprintf("%s with the proxy's token is %d bytes, more than the msize %d", name, size, s.msize.Load()))
	}
	out := make([]byte, 0, size)
	out = binary.LittleEndian.AppendUint32(out, uint32(size))
	out = append(out, typ)
	out = append(out, tag...)
	out = append(out, body[:fixed]...)
	out = appendStr(out, uname)
	out = appendStr(out, []byte(s.p.opt.Token))
	return out, nil
}

// rerror answers the client with an Rerror of tag itself.
func (s *session) rerror(tag []byte, msg string) error {
	out := make([]byte, 0, headerSize+2+len(msg))
	out = binary.LittleEndian.AppendUint32(out, uint32(headerSize+2+len(msg)))
	out = append(out, proto.Rerror)
	out = append(out, tag...)
	out = appendStr(out, []byte(msg))
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if _, err := s.cw.Write(out); err != nil {
		return err
	}
	return s.cw.Flush()
}

// downstream forwards the node's answers to the client.
func (s *session) downstream() error {
	br := bufio.NewReaderSize(s.upstream, 64<<10)
	var buf []byte
	for {
		frame, err := readFrame(br, buf, s.msize.Load)
		if err != nil {
			return err
		}
		buf = frame
		if frame[4] == proto.Rversion {
			if len(frame) < headerSize+4 {
				return &errFrame{"Rversion shorter than its fields"}
			}
			m := binary.LittleEndian.Uint32(frame[headerSize:])
			if m > s.p.opt.MaxMsize {
				return &errFrame{fmt.Sprintf("the node offers msize %d, more than the %d asked for", m, s.p.opt.MaxMsize)}
			}
			s.msize.Store(max(m, headerSize))
		}
		s.cmu.Lock()
		_, err = s.cw.Write(frame)
		if err == nil && !frameBuffered(br) {
			err = s.cw.Flush()
		}
		s.cmu.Unlock()
		if err != nil {
			return err
		}
	}
}

// readFrame reads one whole message into buf's storage: a size below the
// header or above limit() is an errFrame. The limit is taken once the
// size has arrived: an Rversion may have changed it meanwhile.
func readFrame(r *bufio.Reader, buf []byte, limitf func() uint32) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	limit := limitf()
	if size < headerSize {
		return nil, &errFrame{fmt.Sprintf("frame of %d bytes is shorter than a 9P header", size)}
	}
	if size > limit {
		return nil, &errFrame{fmt.Sprintf("frame of %d bytes exceeds msize %d", size, limit)}
	}
	if uint32(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	copy(buf, hdr[:])
	if _, err := io.ReadFull(r, buf[4:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}

// frameBuffered reports whether r holds a whole next frame already, so a
// write of the current one can wait to go out with it.
func frameBuffered(r *bufio.Reader) bool {
	if r.Buffered() < 4 {
		return false
	}
	hdr, _ := r.Peek(4)
	return uint32(r.Buffered()) >= binary.LittleEndian.Uint32(hdr)
}

// str splits a 9P string (len[2] bytes) off b.
func str(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+n {
		return nil, nil, false
	}
	return b[2 : 2+n], b[2+n:], true
}

func appendStr(b, s []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}
