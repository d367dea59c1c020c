package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"sort"
	"sync"
	"time"
)

// ErrStop, returned by FollowerConfig.Apply or Restore, ends Run: the
// replica is fed by something else now (the node became a server).
var ErrStop = errors.New("stream: the replica is no longer fed by the stream")

// Defaults of a Follower.
const (
	DefaultMaxEntry    = 64 << 20
	DefaultMaxSnapshot = 1 << 30
	retryFailed        = 2 * time.Second // a server that failed is tried again after this
	rebalanceEvery     = 5 * time.Second // how often a client checks that it follows its best-ranked server
	// DefaultLeaderless is how long a client follows a server that says
	// it has no leader before it moves to another: longer than an
	// election, so a leader's failure moves no client.
	DefaultLeaderless = 5 * time.Second
	// DefaultRetryAdrift is how long a client does not go back to a
	// server it left for having no leader.
	DefaultRetryAdrift = 30 * time.Second
)

// errRebalance ends following a server that is no longer this client's
// best-ranked one (a server that appeared since it connected): clients
// that connected while the cluster had one server spread once it has
// more.
var errRebalance = errors.New("a better-ranked server is up: moving to it")

// errAdrift ends following a server that has had no leader for
// FollowerConfig.Leaderless while another server may have one: a server
// cut off from the leader sends no new entries, and a client that stayed
// would serve what it had until the partition healed.
type errAdrift struct{ d time.Duration }

func (e errAdrift) Error() string {
	return fmt.Sprintf("it has had no leader for %s: moving to another server", e.d.Round(time.Millisecond))
}

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	// Name ranks the servers for this client (rendezvous hashing).
	Name string
	// Servers lists the cluster addresses of the servers to follow from
	// (those gossip says are alive and in Raft), in any order.
	Servers func() []string
	// Dial connects to a server's stream (the node's cluster port, its
	// protocol byte sent).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Index is the index the replica has applied.
	Index func() uint64
	// Apply applies one entry to the replica; Restore replaces the
	// replica's state with a snapshot's encoding. Either may return
	// ErrStop.
	Apply   func(index uint64, data []byte) error
	Restore func(index uint64, r io.Reader) error
	Logf    func(format string, args ...any)

	Heartbeat   time.Duration // the servers'; a server silent for 5 of them is left (Leave is sooner); default DefaultHeartbeat
	MaxEntry    int           // cap of one entry; default DefaultMaxEntry
	MaxSnapshot int           // cap of a snapshot; default DefaultMaxSnapshot
	Rebalance   time.Duration // how often to check for a better-ranked server; default 5s
	// Leaderless is how long the server followed may say it has no
	// leader before the client moves to another server (one not left
	// for this in the last RetryAdrift); default DefaultLeaderless. A
	// server left for this once is left
	// at its first such word when the client comes back to it, until it
	// has been heard to have a leader again.
	Leaderless  time.Duration
	RetryAdrift time.Duration // default DefaultRetryAdrift
}

// Follower keeps a replica current from the servers' streams.
type Follower struct {
	cfg FollowerConfig

	mu        sync.Mutex
	server    string    // the server followed now; "" between servers
	serverIdx uint64    // the index its last heartbeat reported
	heard     time.Time // its last frame
	status    Status
	failed    map[string]time.Time // server → when it last failed
	adrift    map[string]time.Time // server → when the client last left it for having no leader
	moves     int                  // servers left after a failure
	conn      net.Conn             // the connection follow runs on
	connTo    string               // its server
	dropped   bool                 // Leave closed conn
}

// NewFollower returns a Follower; Run starts it.
func NewFollower(cfg FollowerConfig) *Follower {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.MaxEntry <= 0 {
		cfg.MaxEntry = DefaultMaxEntry
	}
	if cfg.MaxSnapshot <= 0 {
		cfg.MaxSnapshot = DefaultMaxSnapshot
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Rebalance <= 0 {
		cfg.Rebalance = rebalanceEvery
	}
	if cfg.Leaderless == 0 {
		cfg.Leaderless = DefaultLeaderless
	}
	if cfg.RetryAdrift <= 0 {
		cfg.RetryAdrift = DefaultRetryAdrift
	}
	return &Follower{cfg: cfg, failed: map[string]time.Time{}, adrift: map[string]time.Time{}}
}

// Rank orders servers for a client by rendezvous hashing of the client's
// name with each server's address: each client prefers a different
// server, and when one goes only its clients move.
func Rank(client string, servers []string) []string {
	out := append([]string(nil), servers...)
	w := make(map[string]uint64, len(out))
	for _, s := range out {
		h := fnv.New64a()
		h.Write([]byte(client))
		h.Write([]byte{0})
		h.Write([]byte(s))
		w[s] = mix(h.Sum64())
	}
	sort.Slice(out, func(i, j int) bool {
		if w[out[i]] != w[out[j]] {
			return w[out[i]] > w[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// mix is splitmix64's finaliser: FNV's low bits alone spread poorly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// pick is the best-ranked server that has not failed lately.
func (f *Follower) pick() string { return f.pickExcept("") }

// pickExcept is pick with server not among the choices.
func (f *Follower) pickExcept(server string) string {
	ranked := Rank(f.cfg.Name, f.cfg.Servers())
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	for _, s := range ranked {
		if s == server {
			continue
		}
		if t, ok := f.failed[s]; ok && now.Sub(t) <= retryFailed {
			continue
		}
		if t, ok := f.adrift[s]; ok && now.Sub(t) <= f.cfg.RetryAdrift {
			continue
		}
		return s
	}
	return ""
}

// Run follows until ctx ends or the replica says ErrStop.
func (f *Follower) Run(ctx context.Context) error {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = 100 * time.Millisecond
		addr := f.pick()
		if addr == "" {
			continue
		}
		err := f.follow(ctx, addr)
		if errors.Is(err, ErrStop) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errRebalance) {
			f.mu.Lock()
			f.server = ""
			f.mu.Unlock()
			wait = 0
			continue
		}
		f.mu.Lock()
		if errors.As(err, new(errAdrift)) {
			f.adrift[addr] = time.Now()
		} else {
			f.failed[addr] = time.Now()
		}
		f.server = ""
		f.moves++
		f.mu.Unlock()
		f.cfg.Logf("stream: left server %s at index %d: %v", addr, f.cfg.Index(), err)
		wait = 0 // another server at once
	}
}

// follow streams from one server until it fails.
func (f *Follower) follow(ctx context.Context, addr string) error {
	c, err := f.cfg.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	f.mu.Lock()
	f.conn, f.connTo, f.dropped = c, addr, false
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.conn = nil
		f.mu.Unlock()
	}()
	var hello [helloSize]byte
	have := f.cfg.Index()
	binary.BigEndian.PutUint64(hello[:], have)
	c.SetWriteDeadline(time.Now().Add(helloWait))
	if _, err := c.Write(hello[:]); err != nil {
		return err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	lim := limits{entry: uint32(f.cfg.MaxEntry), snapshot: uint32(f.cfg.MaxSnapshot)}
	idle := 5 * f.cfg.Heartbeat
	first := true
	checked := time.Now()
	var lastStatus []byte // the last heartbeat's status, as sent
	// leaderless: since when the server has said it has no leader (zero
	// while it has one). While it lasts the read waits no longer than
	// until the client should move, and then moves if another server can
	// be followed, or looks again a while later.
	var leaderless time.Time
	// grace is Leaderless, or nothing for a server left for having no
	// leader that has not been heard to have one since: a client that
	// comes back to it while the partition lasts leaves at once.
	grace := f.cfg.Leaderless
	f.mu.Lock()
	if _, ok := f.adrift[addr]; ok {
		grace = 0
	}
	f.mu.Unlock()
	lastFrame := time.Now()
	for {
		wait, timed := max(time.Until(lastFrame.Add(idle)), 0), false
		if !leaderless.IsZero() {
			left := time.Until(leaderless.Add(grace))
			if left <= 0 {
				if f.pickExcept(addr) != "" {
					return errAdrift{time.Since(leaderless)}
				}
				left = f.cfg.Leaderless // nowhere to go yet (gossip may not know the others)
			}
			if left < wait {
				wait, timed = left, true
			}
		}
		fr, err := readFrame(br, c, lim, wait, 5*time.Minute)
		if err != nil {
			f.mu.Lock()
			dropped := f.dropped
			f.mu.Unlock()
			if dropped {
				return errors.New("gossip says it failed or left")
			}
			if errors.Is(err, errIdle) {
				if timed {
					continue // the stream is intact: look again
				}
				return fmt.Errorf("silent for %s: %w", time.Since(lastFrame).Round(time.Millisecond), err)
			}
			return err
		}
		lastFrame = time.Now()
		switch fr.kind {
		case frameSnapshot:
			if err := f.cfg.Restore(fr.index, bytes.NewReader(fr.data)); err != nil {
				return fmt.Errorf("restoring the snapshot at %d: %w", fr.index, err)
			}
		case frameEntry:
			if fr.index <= f.cfg.Index() {
				continue // applied already (from another server)
			}
			if err := f.cfg.Apply(fr.index, fr.data); err != nil {
				return fmt.Errorf("applying the entry at %d: %w", fr.index, err)
			}
		case frameHeartbeat:
			// The status is the same beat after beat while the cluster
			// is idle: it is decoded only when its bytes change (a
			// third of an idle client's work on a beat was this JSON).
			if !bytes.Equal(fr.data, lastStatus) {
				var st Status
				if err := json.Unmarshal(fr.data, &st); err != nil {
					return fmt.Errorf("heartbeat: %w", err)
				}
				lastStatus = fr.data
				f.mu.Lock()
				f.status = st
				f.mu.Unlock()
				switch {
				case st.Leader != "":
					leaderless = time.Time{}
					if grace == 0 {
						grace = f.cfg.Leaderless
						f.mu.Lock()
						delete(f.adrift, addr)
						f.mu.Unlock()
					}
				case leaderless.IsZero():
					leaderless = time.Now()
				}
			}
			f.mu.Lock()
			f.serverIdx = fr.index
			f.mu.Unlock()
			if first {
				first = false
				f.cfg.Logf("stream: following server %s from index %d", addr, have)
			}
			if time.Since(checked) >= f.cfg.Rebalance {
				checked = time.Now()
				if best := f.pick(); best != "" && best != addr {
					return errRebalance
				}
			}
		}
		f.mu.Lock()
		f.server, f.heard = addr, time.Now()
		f.mu.Unlock()
	}
}

// Leave stops following server addr, if the follower follows it now,
// and moves to the next server: gossip says addr failed or left, which
// its silence would tell only after five heartbeats. It reports whether
// it did.
func (f *Follower) Leave(addr string) bool {
	f.mu.Lock()
	c := f.conn
	ok := c != nil && f.connTo == addr
	if ok {
		f.dropped = true
	}
	f.mu.Unlock()
	if ok {
		c.Close()
	}
	return ok
}

// State is what a follower reports.
type State struct {
	Server      string    // the server followed; "" when none
	ServerIndex uint64    // the index that server last said it applied
	Heard       time.Time // its last frame
	Status      Status
	Moves       int // servers left after a failure since the start
}

// State reports where the follower is.
func (f *Follower) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return State{Server: f.server, ServerIndex: f.serverIdx, Heard: f.heard, Status: f.status, Moves: f.moves}
}

// Ready is nil when the follower follows a server heard from lately and
// the replica has applied what that server last reported.
func (f *Follower) Ready() error {
	st := f.State()
	if st.Server == "" {
		return errors.New("not following any server")
	}
	if time.Since(st.Heard) > 3*f.cfg.Heartbeat {
		return fmt.Errorf("server %s silent for %s", st.Server, time.Since(st.Heard).Round(time.Millisecond))
	}
	if st.Status.Leader == "" {
		return fmt.Errorf("server %s knows no leader", st.Server)
	}
	if idx := f.cfg.Index(); idx < st.ServerIndex {
		return fmt.Errorf("catching up: applied index %d of server %s's %d", idx, st.Server, st.ServerIndex)
	}
	return nil
}
