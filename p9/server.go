package p9

import (
	"context"
	"errors"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/knusbaum/go9p/proto"
)

// Options tunes a Server. The zero value is usable.
type Options struct {
	// MaxMsize is the largest message the server negotiates (default and
	// cap 65535; at least 256).
	MaxMsize uint32
	// MaxInflight is how many requests of one connection are handled at
	// once (default 32). When they are all busy the server stops reading
	// that connection, so a client that floods it is slowed by TCP.
	MaxInflight int
	// Logf receives one line per dropped connection and similar events
	// (default log.Printf).
	Logf func(format string, args ...any)
	// Owner is the uid, gid and muid shown in stat (default "toolnode").
	Owner string
	// MaxConns is how many connections are served at once (default
	// 1024); one more is closed at once with a log line, so a flood of
	// connections cannot exhaust the node's memory or descriptors.
	MaxConns int
	// MaxUploadBytes bounds what all unfinished uploads into t/ and a/
	// may hold together, in memory (JSON) and in the Backend's scratch
	// files (executables): default twice MaxConnUploadBytes, at least
	// 256 MiB. A write past it fails, and its writer is told to try again.
	MaxUploadBytes int64
	// Observe, when set, hears of every request served: its message type
	// ("walk", "read", …) and its error, nil for a success.
	Observe func(op string, err error)
	// EventWait is how long a read of events waits for an event before
	// it returns 0 bytes (default 5s).
	EventWait time.Duration
	// PendingTTL is how long a file created in t/ or a/ stays pending
	// (walks find it, reads see it empty) once no fid has it open, if
	// nothing valid was published to it; also how long a truncation on
	// a fid waits for the next open for writing (default 1 minute).
	PendingTTL time.Duration

	// Attach decides who an attach is from its attach name (a token, or
	// "" for none) and the client's address (DESIGN §7). An error or
	// RoleNone refuses the attach with "permission denied". Nil: every
	// client is admin, as anon@ADDR.
	Attach func(aname string, remote net.Addr) (Principal, error)
	// MaxFids is how many fids one connection may hold (default 4096); an
	// attach or walk past it fails with "too many fids".
	MaxFids int
	// MaxConnUploadBytes bounds what the unfinished uploads of one
	// connection may hold (default the Backend's MaxExecutable plus 2
	// MiB), so one client cannot take all of MaxUploadBytes.
	MaxConnUploadBytes int64
	// Bind, if set, gives the Backend the requests of a fid attached as
	// principal p go to (nil: the server's own). Every request that opens
	// a file, writes, creates, removes or changes a mode goes to it;
	// walks, stat and directory listings read the server's Backend. The
	// node binds a Backend that records who did what in its audit log.
	Bind func(p Principal) Backend
}

// Server serves the tree of a Backend over 9P2000. It owns its listeners'
// accept loops and, per connection, one reader and a bounded set of
// workers. All its methods are safe for concurrent use.
type Server struct {
	b     Backend
	opt   Options
	mtime uint32 // atime and mtime of every file: the server's start

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup // connection goroutines

	handles     atomic.Int64 // per-fid handles open now, on all connections
	uploadBytes atomic.Int64 // bytes held by unfinished uploads, on all connections

	// pending holds the uploads open for writing, by tree path, on every
	// connection: a file created and not yet published can be walked to.
	// created holds, by path, until when a file created and never
	// published stays pending after its fids are closed; truncs until
	// when a truncation waits for the next open for writing.
	pmu     sync.Mutex
	pending map[string][]*upload
	created map[string]time.Time
	truncs  map[string]time.Time
}

// NewServer returns a server for b. It serves nothing until Serve or
// ServeConn is called.
func NewServer(b Backend, opt Options) *Server {
	if opt.MaxMsize == 0 || opt.MaxMsize > proto.MaxMsgLen {
		opt.MaxMsize = proto.MaxMsgLen
	}
	if opt.MaxMsize < minMsize {
		opt.MaxMsize = minMsize
	}
	if opt.MaxInflight <= 0 {
		opt.MaxInflight = 32
	}
	if opt.Logf == nil {
		opt.Logf = log.Printf
	}
	if opt.Owner == "" {
		opt.Owner = "toolnode"
	}
	if opt.MaxConns <= 0 {
		opt.MaxConns = 1024
	}
	if opt.EventWait <= 0 {
		opt.EventWait = 5 * time.Second
	}
	if opt.PendingTTL <= 0 {
		opt.PendingTTL = pendingTTL
	}
	if opt.MaxFids <= 0 {
		opt.MaxFids = 4096
	}
	if opt.MaxConnUploadBytes <= 0 {
		opt.MaxConnUploadBytes = maxExec(b) + 2*jsonLimit
	}
	if opt.MaxUploadBytes <= 0 {
		// Room for one executable at its limit and others beside it.
		opt.MaxUploadBytes = max(256<<20, 2*opt.MaxConnUploadBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		b:         b,
		opt:       opt,
		mtime:     uint32(time.Now().Unix()),
		ctx:       ctx,
		cancel:    cancel,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		pending:   make(map[string][]*upload),
		created:   make(map[string]time.Time),
		truncs:    make(map[string]time.Time),
	}
}

// Serve accepts connections on l and serves each until it ends. It
// returns nil once Close has been called, or the listener's error.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()

	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait, then retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.opt.Logf("9p: accept: %v; retrying in %v", err, delay)
			select {
			case <-time.After(delay):
				continue
			case <-s.ctx.Done():
				return nil
			}
		}
		delay = 0
		c := s.newConn(nc)
		if c == nil {
			continue // closed meanwhile, or too many connections
		}
		go c.serve()
	}
}

// ServeConn serves one connection and returns when it ends. The server
// closes nc.
func (s *Server) ServeConn(nc net.Conn) {
	c := s.newConn(nc)
	if c != nil {
		c.serve()
	}
}

// Close stops every listener and connection, cancels the requests in
// flight and waits until every connection's goroutines have returned.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// newConn registers nc, or closes it and returns nil after Close or when
// MaxConns connections are open.
func (s *Server) newConn(nc net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil
	}
	if len(s.conns) >= s.opt.MaxConns {
		s.opt.Logf("9p: refusing %s: %d connections are open, the most this node serves", nc.RemoteAddr(), len(s.conns))
		nc.Close()
		return nil
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c
}

func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Conns is the number of connections served now.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
