package blobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolnode/toolnode/blobstore"
)

const (
	// ServeMax bounds the executables a node sends at once; one more
	// request is answered busy, and its sender asks another node.
	ServeMax = 8
	// Idle is how long a transfer may make no progress.
	Idle = 30 * time.Second
	// WaitMax bounds how long a call waits for its executable.
	WaitMax = 30 * time.Second
	// BackoffMax is the longest pause between fetch rounds.
	BackoffMax = 30 * time.Second
	// DefaultGrace is how long a blob no tool refers to is kept.
	DefaultGrace = 10 * time.Minute
	// requestTimeout bounds the sending and reading of a request.
	requestTimeout = 5 * time.Second
)

// Want is an executable the replicated state names.
type Want struct {
	Tool   string // a tool that names it, for errors
	Digest string // SHA-256, hex
	Size   int64  // 0: not known
	Owner  string // the node that published it, asked first
}

// Source is a live node to ask for a blob.
type Source struct{ Name, Addr string }

// State is what the service asks of the replicated state.
type State interface {
	// Referenced reports whether some tool names digest.
	Referenced(digest string) bool
	// Wanted lists the executables every tool names.
	Wanted() []Want
}

// Metrics records fetches and answers.
type Metrics interface {
	BlobFetched(from string, size int64, err error)
	BlobServed(outcome string)
}

// Config is what a Service is built from.
type Config struct {
	Store   *blobstore.Store
	State   State
	MaxExec int64         // the largest executable stored
	Grace   time.Duration // how long an unreferenced blob is kept; 0: DefaultGrace
	// Sources lists the live nodes to ask, this one left out.
	Sources func() []Source
	// Dial opens a cluster-port connection to addr for a blob request.
	Dial    func(addr string, timeout time.Duration) (net.Conn, error)
	Metrics Metrics
	Logf    func(format string, args ...any) // progress
	Warnf   func(format string, args ...any) // something is wrong
}

// Service is one node's fetching, serving and collecting of blobs.
type Service struct {
	cfg   Config
	ctx   context.Context
	serve chan struct{} // slots of ServeMax

	mu       sync.Mutex
	inflight map[string]*Fetch    // digest → its fetch
	unref    map[string]time.Time // digest → when first seen unreferenced
	closed   bool                 // stopping: no new fetch
	rescan   atomic.Bool
	// fetches are the fetch goroutines.
	fetches sync.WaitGroup
}

// New returns a Service whose fetches end with ctx.
func New(ctx context.Context, cfg Config) *Service {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	return &Service{
		cfg: cfg, ctx: ctx, serve: make(chan struct{}, ServeMax),
		inflight: map[string]*Fetch{}, unref: map[string]time.Time{},
	}
}

// Store is the blob store on disk.
func (s *Service) Store() *blobstore.Store { return s.cfg.Store }

// Stop lets no new fetch start and waits for those under way (they end
// with the Service's context).
func (s *Service) Stop() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.fetches.Wait()
}

// MarkRescan asks the next TakeRescan to say every tool must be looked
// at again (a snapshot was restored: its tools' indexes may be older
// than any seen).
func (s *Service) MarkRescan() { s.rescan.Store(true) }

// TakeRescan reports and clears MarkRescan's mark.
func (s *Service) TakeRescan() bool { return s.rescan.Swap(false) }

// Fetch is one digest being fetched; Done closes when it is stored or
// given up (no tool refers to it any more, or the node stops).
type Fetch struct {
	done chan struct{}
	mu   sync.Mutex
	err  error // the last round's failure, for a waiting call
}

// Done closes when the fetch has ended.
func (f *Fetch) Done() <-chan struct{} { return f.done }

// Err is the last round's failure, nil after a success.
func (f *Fetch) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *Fetch) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// Short is a digest's first 12 hex digits, as logs name it.
func Short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// Ensure starts fetching w unless it is here or being fetched, and
// returns the fetch (nil when it is here).
func (s *Service) Ensure(w Want) *Fetch {
	if w.Digest == "" || s.cfg.Store.Has(w.Digest) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.inflight[w.Digest]; ok {
		return f
	}
	f := &Fetch{done: make(chan struct{})}
	if s.closed {
		f.err = errors.New("the node is shutting down")
		close(f.done)
		return f
	}
	s.inflight[w.Digest] = f
	s.fetches.Add(1)
	go s.fetchLoop(w, f)
	return f
}

// EnsureAll starts the fetches of every wanted executable not here.
func (s *Service) EnsureAll() {
	for _, w := range s.cfg.State.Wanted() {
		s.Ensure(w)
	}
}

// fetchLoop fetches w until it is stored, no tool refers to it any more,
// or the Service stops, pausing longer after each failed round.
func (s *Service) fetchLoop(w Want, f *Fetch) {
	defer s.fetches.Done()
	defer func() {
		s.mu.Lock()
		delete(s.inflight, w.Digest)
		s.mu.Unlock()
		close(f.done)
	}()
	pause := 250 * time.Millisecond
	for round := 1; ; round++ {
		if s.cfg.Store.Has(w.Digest) {
			f.setErr(nil)
			return
		}
		if !s.cfg.State.Referenced(w.Digest) {
			f.setErr(fmt.Errorf("no tool refers to executable %s any more", Short(w.Digest)))
			return
		}
		from, err := s.fetchOnce(w)
		if err == nil {
			s.cfg.Logf("blobs: fetched executable %s (%d bytes) from %s", Short(w.Digest), w.Size, from)
			f.setErr(nil)
			return
		}
		f.setErr(err)
		s.cfg.Warnf("blobs: fetching executable %s (round %d): %v; trying again in %s", Short(w.Digest), round, err, pause)
		select {
		case <-s.ctx.Done():
			f.setErr(errors.New("the node is shutting down"))
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, BackoffMax)
	}
}

// sources lists the nodes to ask for w: its publisher first, then the
// others in random order.
func (s *Service) sources(owner string) []Source {
	var first, rest []Source
	for _, src := range s.cfg.Sources() {
		if src.Name == owner {
			first = append(first, src)
		} else {
			rest = append(rest, src)
		}
	}
	rand.Shuffle(len(rest), func(i, k int) { rest[i], rest[k] = rest[k], rest[i] })
	return append(first, rest...)
}

// fetchOnce asks each source in turn and returns the one that gave the
// blob, or an error naming what every one answered.
func (s *Service) fetchOnce(w Want) (string, error) {
	srcs := s.sources(w.Owner)
	if len(srcs) == 0 {
		return "", fmt.Errorf("no live node to fetch it from (published by %s)", w.Owner)
	}
	var why []string
	for _, src := range srcs {
		err := s.fetchFrom(src.Addr, w.Digest, w.Size)
		s.cfg.Metrics.BlobFetched(src.Name, w.Size, err)
		if err == nil {
			return src.Name, nil
		}
		if errors.Is(err, blobstore.ErrDigest) {
			s.cfg.Warnf("blobs: refused executable %s from %s: %v; asking another node", Short(w.Digest), src.Name, err)
		}
		why = append(why, src.Name+": "+err.Error())
		if s.ctx.Err() != nil {
			break
		}
	}
	return "", errors.New(strings.Join(why, "; "))
}

// Wait waits, within ctx and WaitMax, for w to be here.
func (s *Service) Wait(ctx context.Context, w Want) error {
	f := s.Ensure(w)
	if f == nil {
		return nil
	}
	if len(s.cfg.Sources()) == 0 {
		// Nobody to wait for (a lone node whose copy was removed).
		return notFetched(w, "no live node to fetch it from")
	}
	tm := time.NewTimer(WaitMax)
	defer tm.Stop()
	select {
	case <-f.done:
		if s.cfg.Store.Has(w.Digest) {
			return nil
		}
	case <-tm.C:
	case <-ctx.Done():
	}
	why := "still fetching"
	if err := f.Err(); err != nil {
		why = err.Error()
	}
	return notFetched(w, why)
}

// notFetched is Wait's error for w, not here for why.
func notFetched(w Want, why string) error {
	return fmt.Errorf("tool %q: executable %s not yet fetched from %s or another node: %s", w.Tool, Short(w.Digest), w.Owner, why)
}

// Collect removes, until ctx ends, the blobs no tool has referred to
// for the grace period, and starts the fetch of any wanted one not here.
func (s *Service) Collect(ctx context.Context) {
	every := min(s.cfg.Grace/2, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep(time.Now())
			s.EnsureAll()
		}
	}
}

// Sweep is one round of Collect's removals, as of now.
func (s *Service) Sweep(now time.Time) {
	ents, err := s.cfg.Store.List()
	if err != nil {
		s.cfg.Warnf("blobs: listing the store: %v", err)
		return
	}
	refs := map[string]bool{}
	for _, w := range s.cfg.State.Wanted() {
		refs[w.Digest] = true
	}
	grace := s.cfg.Grace
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range ents {
		seen[e.Digest] = true
		if refs[e.Digest] {
			delete(s.unref, e.Digest)
			continue
		}
		since, ok := s.unref[e.Digest]
		if !ok {
			s.unref[e.Digest] = now
			continue
		}
		if now.Sub(since) < grace || now.Sub(e.Stored) < grace {
			continue
		}
		if err := s.cfg.Store.Remove(e.Digest); err != nil {
			s.cfg.Warnf("blobs: removing executable %s, which no tool refers to: %v", Short(e.Digest), err)
			continue
		}
		delete(s.unref, e.Digest)
		s.cfg.Logf("blobs: removed executable %s (%d bytes): no tool has referred to it for %s", Short(e.Digest), e.Size, grace)
	}
	for d := range s.unref {
		if !seen[d] {
			delete(s.unref, d)
		}
	}
}
