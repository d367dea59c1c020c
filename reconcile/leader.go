package reconcile

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
)

// roundEvery is how often the leader reconciles when nothing has changed
// (a trigger starts a round at once); roundRetry, how soon after a round
// that left work undone; changeWait, how long one configuration change
// may wait to be enqueued.
const (
	roundEvery = 5 * time.Second
	roundRetry = 500 * time.Millisecond
	changeWait = 10 * time.Second
)

// Raft is the part of *raft.Raft the leader loop uses.
type Raft interface {
	// Barrier waits until every entry before it is applied.
	Barrier(timeout time.Duration) raft.Future
	// GetConfiguration reads the latest configuration.
	GetConfiguration() raft.ConfigurationFuture
	// AddVoter adds a voter, promotes a non-voter or moves a voter.
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	// AddNonvoter adds or moves a non-voter.
	AddNonvoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	// RemoveServer takes a server out of the configuration.
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	// DemoteVoter makes a voter a non-voter.
	DemoteVoter(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

var _ Raft = (*raft.Raft)(nil)

// ErrClientPeer marks a probe's error for a peer whose certificate is a
// client node's: it stays a client, which is logged at info level, and
// the round needs no retry for it.
var ErrClientPeer = errors.New("a client node's certificate")

// ClientPeer wraps err, a probe's finding that the peer's certificate is
// a client node's, so that errors.Is(err, ErrClientPeer); its text is
// err's.
func ClientPeer(err error) error { return clientPeerError{err} }

type clientPeerError struct{ err error }

func (e clientPeerError) Error() string   { return e.err.Error() }
func (e clientPeerError) Unwrap() []error { return []error{e.err, ErrClientPeer} }

// Config is what a Leader is given by its node.
type Config struct {
	Name      string             // this node's name
	LocalAddr raft.ServerAddress // this node's cluster address
	Voters    int                // voters to keep (-voters)
	Servers   int                // servers to keep in all (-servers)
	Raft      Raft               // this node's Raft

	// Members lists gossip's members, this node among them.
	Members func() []cluster.Member
	// Trigger asks for a round now (a membership change); may be nil.
	Trigger <-chan struct{}
	// Probe checks that addr's cluster port answers as a server's; its
	// error wraps ErrClientPeer (ClientPeer) when the certificate there
	// is a client node's.
	Probe func(addr string) error
	// ClientOnly reports whether addr presented a client node's
	// certificate lately (Probe or another dial saw it).
	ClientOnly func(addr string) bool
	// OnLeading is told of every leadership change before the loop
	// starts or stops; may be nil.
	OnLeading func(leading bool)
	// BarrierTimeout bounds a term's first Barrier.
	BarrierTimeout time.Duration
	// TermStart runs once a term, after its Barrier and before its first
	// round, with the term's context; may be nil.
	TermStart func(ctx context.Context)

	Logf  func(format string, args ...any) // info
	Warnf func(format string, args ...any) // warnings
}

// Leader runs the leader loop of one node.
type Leader struct {
	cfg Config

	mu      sync.Mutex
	unreach map[string]string // node → why it is kept out of Raft
}

// New returns a Leader for cfg; Watch or Run starts it.
func New(cfg Config) *Leader { return &Leader{cfg: cfg, unreach: map[string]string{}} }

// Watch runs a leader loop while this node leads, until ctx ends. notify
// is raft.Config.NotifyCh, which, unlike LeaderCh, never drops a change.
func (l *Leader) Watch(ctx context.Context, notify <-chan bool) {
	var term *run
	defer func() { term.stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case leading := <-notify:
			if l.cfg.OnLeading != nil {
				l.cfg.OnLeading(leading)
			}
			switch {
			case leading && term == nil:
				term = l.start(ctx)
			case !leading:
				term.stop()
				term = nil
			}
		}
	}
}

// run is one term's leader loop.
type run struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *Leader) start(ctx context.Context) *run {
	ctx, cancel := context.WithCancel(ctx)
	r := &run{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		l.Run(ctx)
	}()
	return r
}

// stop ends the loop and waits for it; a nil run is a no-op.
func (r *run) stop() {
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// Run is one term's loop, until ctx ends: wait until every earlier entry
// is applied, run Config.TermStart, then reconcile now, on every trigger,
// and periodically (consul's leader loop is the model).
func (l *Leader) Run(ctx context.Context) {
	l.cfg.Logf("leading the cluster")
	if err := l.cfg.Raft.Barrier(l.cfg.BarrierTimeout).Error(); err != nil {
		l.cfg.Warnf("leader barrier: %v", err)
	}
	if l.cfg.TermStart != nil {
		l.cfg.TermStart(ctx)
	}
	for {
		next := roundEvery
		if !l.Reconcile() {
			next = roundRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-l.cfg.Trigger:
		case <-time.After(next):
		}
	}
}

// Reconcile makes one round: it reads Raft's configuration, and makes
// Plan's changes one configuration entry each, stopping at the first
// failure. It reports whether everything was done: false after a failure
// or when a node to add did not answer, so the loop tries again soon.
func (l *Leader) Reconcile() (done bool) {
	f := l.cfg.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		l.cfg.Warnf("reconcile: reading the raft configuration: %v", err)
		return false
	}
	v := View{
		Self:     l.cfg.Name,
		SelfAddr: l.cfg.LocalAddr,
		Voters:   l.cfg.Voters,
		Servers:  l.cfg.Servers,
		Config:   f.Configuration().Servers,
		Members:  l.cfg.Members(),
	}
	p := &probes{l: l}
	for c := range Plan(v, p) {
		if !l.apply(c) {
			return false
		}
	}
	return !p.retry
}

// apply makes one change and logs it.
func (l *Leader) apply(c Change) bool {
	r := l.cfg.Raft
	var fut raft.IndexFuture
	switch c.Op {
	case AddVoter:
		fut = r.AddVoter(c.ID, c.Address, 0, changeWait)
	case AddNonvoter:
		fut = r.AddNonvoter(c.ID, c.Address, 0, changeWait)
	case Remove:
		fut = r.RemoveServer(c.ID, 0, changeWait)
	case Demote:
		fut = r.DemoteVoter(c.ID, 0, changeWait)
	}
	if err := fut.Error(); err != nil {
		l.cfg.Warnf("reconcile: %s: %v", c.What, err)
		return false
	}
	l.cfg.Logf("reconcile: %s", c.What)
	return true
}

// probes are a round's Peers: Config's probe, with the bookkeeping of
// who is kept out and whether a retry is due.
type probes struct {
	l     *Leader
	retry bool // a node to add did not answer
}

func (p *probes) ClientOnly(addr string) bool { return p.l.cfg.ClientOnly(addr) }

func (p *probes) Reachable(name, addr string) bool {
	err := p.l.cfg.Probe(addr)
	p.l.noteUnreachable(name, err)
	if err != nil && !errors.Is(err, ErrClientPeer) {
		p.retry = true
	}
	return err == nil
}

// noteUnreachable logs, once per node and reason, why a node is kept out
// of Raft, and when it is let in after all.
func (l *Leader) noteUnreachable(name string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, had := l.unreach[name]
	switch {
	case err == nil && had:
		delete(l.unreach, name)
		l.cfg.Logf("reconcile: %s's cluster port answers now", name)
	case err != nil && prev != err.Error():
		l.unreach[name] = err.Error()
		if errors.Is(err, ErrClientPeer) {
			l.cfg.Logf("reconcile: keeping %s out of Raft: %v; it stays a client", name, err)
			return
		}
		l.cfg.Warnf("reconcile: keeping %s out of Raft: its cluster port does not answer: %v", name, err)
	}
}
