package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/stream"
)

// server is a real raftfsm FSM fed entries in log order, with a Hub
// publishing them and a loopback listener serving the stream.
type server struct {
	t    *testing.T
	mu   sync.Mutex // feeding and capturing, as the node's FSM wrapper does
	fsm  *raftfsm.FSM
	hub  *stream.Hub
	ln   net.Listener
	next uint64
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc

	snapshots int // served
	// adrift: the server says it has no leader (cut off from it).
	adrift atomic.Bool
}

func newServer(t *testing.T, window int) *server {
	t.Helper()
	s := &server{t: t, fsm: raftfsm.New(nil), next: 1}
	s.fsm.SetLogf(t.Logf)
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.hub = stream.NewHub(stream.HubConfig{
		WindowEntries: window,
		Heartbeat:     100 * time.Millisecond,
		Logf:          t.Logf,
		Status: func() stream.Status {
			if s.adrift.Load() {
				return stream.Status{}
			}
			return stream.Status{Leader: "L", LeaderAddr: "l:1"}
		},
		Snapshot: func() (uint64, func(io.Writer) error, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.snapshots++
			snap, err := s.fsm.Snapshot()
			if err != nil {
				return 0, nil, err
			}
			return s.fsm.LastIndex(), func(w io.Writer) error { return snap.Persist(&sink{w: w}) }, nil
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.hub.Serve(s.ctx, c)
			}()
		}
	}()
	t.Cleanup(s.kill)
	return s
}

// kill stops serving: the listener and every stream.
func (s *server) kill() {
	s.stop()
	s.ln.Close()
	s.hub.Close()
	s.wg.Wait()
}

// apply commits n sessions; every third index is skipped, as Raft's
// no-ops and configurations are, which the FSM never sees.
func (s *server) apply(n int) {
	for range n {
		s.mu.Lock()
		if s.next%3 == 0 {
			s.next++
		}
		i := s.next
		s.next++
		data := raftfsm.MustEncode(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: fmt.Sprintf("s%d", i), Time: 1})
		s.fsm.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data})
		s.hub.Publish(i, data)
		s.mu.Unlock()
	}
}

type sink struct{ w io.Writer }

func (k *sink) Write(p []byte) (int, error) { return k.w.Write(p) }
func (k *sink) Close() error                { return nil }
func (k *sink) ID() string                  { return "stream" }
func (k *sink) Cancel() error               { return nil }

// client is a replica FSM fed by a Follower; it records every index it
// applies and fails the test on a gap or a duplicate.
type client struct {
	t        *testing.T
	fsm      *raftfsm.FSM
	f        *stream.Follower
	mu       sync.Mutex
	applied  []uint64
	restores []uint64
	servers  []string
	// heartbeat is the servers' heartbeat the follower expects; 0:
	// 100 ms.
	heartbeat time.Duration
	// leaderless is FollowerConfig.Leaderless; 0: 300 ms.
	leaderless time.Duration
	// retryAdrift is FollowerConfig.RetryAdrift; 0: its default.
	retryAdrift time.Duration
	cancel      context.CancelFunc
	done        chan error
}

// preferring is a client name whose first choice among addrs is want.
func preferring(addrs []string, want string) string {
	for i := 0; ; i++ {
		if name := fmt.Sprintf("c%d", i); stream.Rank(name, addrs)[0] == want {
			return name
		}
	}
}

func newClient(t *testing.T, name string, servers ...string) *client {
	return newClientWith(t, nil, name, servers...)
}

// newClientWith is newClient with tweak (if not nil) applied to the
// client before its follower is made.
func newClientWith(t *testing.T, tweak func(*client), name string, servers ...string) *client {
	c := &client{t: t, fsm: raftfsm.New(nil), servers: servers}
	c.fsm.SetLogf(t.Logf)
	if tweak != nil {
		tweak(c)
	}
	c.f = c.follower(name)
	return c
}

func (c *client) follower(name string) *stream.Follower {
	hb := c.heartbeat
	if hb == 0 {
		hb = 100 * time.Millisecond
	}
	leaderless := c.leaderless
	if leaderless == 0 {
		leaderless = 300 * time.Millisecond
	}
	return stream.NewFollower(stream.FollowerConfig{
		Name: name,
		Servers: func() []string {
			c.mu.Lock()
			defer c.mu.Unlock()
			return append([]string(nil), c.servers...)
		},
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		Index: c.fsm.LastIndex,
		Apply: func(index uint64, data []byte) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			if n := len(c.applied); n > 0 && index <= c.applied[n-1] {
				c.t.Errorf("entry %d applied after %d: a duplicate or out of order", index, c.applied[n-1])
			}
			c.applied = append(c.applied, index)
			c.fsm.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
			return nil
		},
		Restore: func(index uint64, r io.Reader) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.restores = append(c.restores, index)
			c.applied = append(c.applied, index)
			return c.fsm.Restore(io.NopCloser(r))
		},
		Heartbeat:   hb,
		Rebalance:   300 * time.Millisecond,
		Leaderless:  leaderless,
		RetryAdrift: c.retryAdrift,
		Logf:        c.t.Logf,
	})
}

func (c *client) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan error, 1)
	go func() { c.done <- c.f.Run(ctx) }()
	c.t.Cleanup(c.stop)
}

func (c *client) stop() {
	if c.cancel != nil {
		c.cancel()
		<-c.done
		c.cancel = nil
	}
}

// waitFollowing polls until the follower follows addr, failing the test
// after d.
func (c *client) waitFollowing(addr string, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for c.f.State().Server != addr {
		if time.Now().After(deadline) {
			c.t.Fatalf("following %q, want %q", c.f.State().Server, addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitIndex polls until the replica has applied the server's last
// index, failing the test after a deadline, and returns the server's
// sessions at that index.
func (c *client) waitIndex(s *server) []string {
	c.t.Helper()
	s.mu.Lock()
	want, names := s.fsm.LastIndex(), s.fsm.SessionNames()
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for c.fsm.LastIndex() < want {
		if time.Now().After(deadline) {
			c.t.Fatalf("replica at index %d, want %d", c.fsm.LastIndex(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return names
}

// waitFor polls until the replica has applied index and holds the
// server's sessions, failing the test after a deadline.
func (c *client) waitFor(s *server) {
	c.t.Helper()
	names := c.waitIndex(s)
	if got := c.fsm.SessionNames(); !slices.Equal(got, names) {
		c.t.Fatalf("replica sessions %v, server's %v", got, names)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.f.Ready() != nil {
		if time.Now().After(deadline) {
			c.t.Fatalf("caught up but not ready: %v", c.f.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkSequence: after its snapshots, the replica applied exactly the
// server's indices, each once, in order.
func (c *client) checkSequence(s *server) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i < len(c.applied); i++ {
		if c.applied[i] <= c.applied[i-1] {
			c.t.Fatalf("applied %v: not strictly increasing", c.applied)
		}
	}
	from := uint64(0)
	if len(c.restores) > 0 {
		from = c.restores[len(c.restores)-1]
	}
	var want []uint64
	for i := from + 1; i < s.next; i++ {
		if i%3 != 0 {
			want = append(want, i)
		}
	}
	var got []uint64
	for _, i := range c.applied {
		if i > from {
			got = append(got, i)
		}
	}
	if !slices.Equal(got, want) {
		c.t.Fatalf("after the snapshot at %d applied %v, want %v", from, got, want)
	}
}

func TestStreamFromWindow(t *testing.T) {
	s := newServer(t, 100)
	s.apply(10)
	c := newClient(t, "c1", s.ln.Addr().String())
	c.start()
	c.waitFor(s)
	s.apply(10) // pushed as applied
	c.waitFor(s)
	c.checkSequence(s)
	if len(c.restores) != 0 || s.snapshots != 0 {
		t.Errorf("a client the window covers got %d snapshots", s.snapshots)
	}
	if st := c.f.State(); st.Status.Leader != "L" || st.Status.LeaderAddr != "l:1" {
		t.Errorf("status %+v, want the server's", st.Status)
	}
}

func TestStreamSnapshotThenEntries(t *testing.T) {
	s := newServer(t, 4)
	s.apply(20) // the window holds the last 4: a client at 0 needs a snapshot
	c := newClient(t, "c1", s.ln.Addr().String())
	c.start()
	c.waitFor(s)
	if s.snapshots != 1 || len(c.restores) != 1 {
		t.Fatalf("snapshots served %d, restored %v; want one", s.snapshots, c.restores)
	}
	s.apply(3)
	c.waitFor(s)
	c.checkSequence(s)
}

func TestStreamResumeFromIndex(t *testing.T) {
	s := newServer(t, 50)
	s.apply(5)
	c := newClient(t, "c1", s.ln.Addr().String())
	c.start()
	c.waitFor(s)
	c.stop()
	s.apply(10) // missed while away, still in the window
	c.f = c.follower("c1")
	c.start()
	c.waitFor(s)
	c.checkSequence(s)
	if s.snapshots != 0 {
		t.Errorf("a resume the window covers cost %d snapshots", s.snapshots)
	}
	// Away longer than the window: a snapshot, then entries again.
	c.stop()
	s.apply(80)
	c.f = c.follower("c1")
	c.start()
	c.waitFor(s)
	s.apply(2)
	c.waitFor(s)
	c.checkSequence(s)
	if s.snapshots != 1 {
		t.Errorf("a resume past the window got %d snapshots, want 1", s.snapshots)
	}
}

// A server dies while entries flow: the client moves to another that
// applies the same log, resumes from its last index, and applies every
// entry exactly once.
func TestStreamServerDeathMoves(t *testing.T) {
	a, b := newServer(t, 1000), newServer(t, 1000)
	both := func(n int) { a.apply(n); b.apply(n) }
	both(5)
	addrs := []string{a.ln.Addr().String(), b.ln.Addr().String()}
	// A client name whose first choice is a.
	name := preferring(addrs, addrs[0])
	c := newClient(t, name, addrs...)
	c.start()
	c.waitFor(a)
	if st := c.f.State(); st.Server != addrs[0] {
		t.Fatalf("following %q, want %q", st.Server, addrs[0])
	}
	a.apply(7) // b lags behind a: the client is ahead of b when it moves
	a.kill()
	c.mu.Lock()
	c.servers = addrs[1:] // gossip says a is dead
	c.mu.Unlock()
	c.waitFollowing(addrs[1], 10*time.Second)
	b.apply(7) // b catches up: entries the client has are not applied again
	b.apply(5)
	c.waitFor(b)
	c.checkSequence(b)
	if st := c.f.State(); st.Moves < 1 {
		t.Errorf("moves %d, want at least 1", st.Moves)
	}
}

// A server cut off from the leader keeps serving its stream but gets no
// new entries, and says it has no leader: its client moves to a server
// that gets them, and does not go back while rebalancing. The control,
// a client that waits an hour before it leaves a leaderless server, misses
// the entries for as long as the cut lasts.
func TestStreamLeavesLeaderlessServer(t *testing.T) {
	for _, protect := range []bool{true, false} {
		a, b := newServer(t, 1000), newServer(t, 1000)
		both := func(n int) { a.apply(n); b.apply(n) }
		both(5)
		addrs := []string{a.ln.Addr().String(), b.ln.Addr().String()}
		const wait = 300 * time.Millisecond
		leaderless := wait
		if !protect {
			leaderless = time.Hour
		}
		c := newClientWith(t, func(c *client) { c.leaderless = leaderless }, preferring(addrs, addrs[0]), addrs...)
		c.start()
		c.waitFor(a)
		a.adrift.Store(true)
		a.hub.StatusChanged()
		b.apply(7) // the leader's entries reach b only
		if !protect {
			time.Sleep(5 * wait) // five times the protection's wait
			st := c.f.State()
			if st.Server != addrs[0] || c.fsm.LastIndex() >= b.fsm.LastIndex() {
				t.Fatalf("control: following %q at index %d (b at %d); want a client stuck on a", st.Server, c.fsm.LastIndex(), b.fsm.LastIndex())
			}
			c.stop()
			continue
		}
		c.waitFor(b)
		if st := c.f.State(); st.Server != addrs[1] || st.Moves != 1 {
			t.Fatalf("following %q after %d moves, want b after 1", st.Server, st.Moves)
		}
		// Rebalancing (every 300 ms) would prefer a: the client stays
		// on b while a is remembered as adrift.
		for range 4 {
			b.apply(1)
			time.Sleep(300 * time.Millisecond)
		}
		c.waitFor(b)
		c.checkSequence(b)
		if st := c.f.State(); st.Server != addrs[1] {
			t.Fatalf("went back to %q", st.Server)
		}
		c.stop()
	}
}

// A client that comes back to a server it left for having no leader
// (rebalancing prefers it) leaves it at once while it still has none,
// rather than after Leaderless again; once it has a leader again, the
// client stays.
func TestStreamLeavesAdriftServerAtOnceWhenBack(t *testing.T) {
	a, b := newServer(t, 1000), newServer(t, 1000)
	a.apply(3)
	b.apply(3)
	addrs := []string{a.ln.Addr().String(), b.ln.Addr().String()}
	const leaderless = 2 * time.Second
	c := newClientWith(t, func(c *client) { c.leaderless, c.retryAdrift = leaderless, 300*time.Millisecond }, preferring(addrs, addrs[0]), addrs...)
	c.start()
	c.waitFor(a)
	a.adrift.Store(true)
	a.hub.StatusChanged()
	c.waitFollowing(addrs[1], 10*time.Second)
	// Three seconds of rebalancing towards a, every 300 ms.
	var onA, longest time.Duration
	last := time.Now()
	for end := last.Add(3 * time.Second); time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		now := time.Now()
		if c.f.State().Server == addrs[0] {
			onA += now.Sub(last)
			longest = max(longest, onA)
		} else {
			onA = 0
		}
		last = now
	}
	st := c.f.State()
	t.Logf("%d moves; longest stay on the leaderless server when back: %v", st.Moves, longest)
	if st.Moves < 2 {
		t.Fatalf("%d moves: the client never came back to a", st.Moves)
	}
	if longest >= leaderless/2 {
		t.Fatalf("back on the leaderless server for %v (Leaderless %v)", longest, leaderless)
	}
	b.apply(2)
	c.waitFor(b)
	a.adrift.Store(false)
	a.hub.StatusChanged()
	c.waitFollowing(addrs[0], 10*time.Second)
	a.apply(10)
	c.waitFor(a)
}

// With no other server to go to, a client stays with a leaderless one
// (the whole cluster is electing, or has lost its quorum, or gossip has
// not yet told of the others), and still gets what it sends. Once
// another server is known, the client moves to it.
func TestStreamStaysWithOnlyServerLeaderless(t *testing.T) {
	a, b := newServer(t, 1000), newServer(t, 1000)
	a.apply(3)
	b.apply(3)
	c := newClient(t, "c", a.ln.Addr().String())
	c.start()
	c.waitFor(a)
	a.adrift.Store(true)
	a.hub.StatusChanged()
	time.Sleep(time.Second) // three times Leaderless
	a.apply(2)
	c.waitIndex(a) // not waitFor: not ready while a has no leader
	c.checkSequence(a)
	if st := c.f.State(); st.Moves != 0 || st.Server != a.ln.Addr().String() {
		t.Fatalf("following %q after %d moves with nowhere to go", st.Server, st.Moves)
	}
	// Caught up, but not ready: what it has may be stale.
	if err := c.f.Ready(); err == nil || !strings.Contains(err.Error(), "knows no leader") {
		t.Fatalf("Ready with a leaderless server = %v", err)
	}
	b.apply(4)
	c.mu.Lock()
	c.servers = append(c.servers, b.ln.Addr().String())
	c.mu.Unlock()
	c.waitFor(b)
	if st := c.f.State(); st.Server != b.ln.Addr().String() {
		t.Fatalf("following %q once b is known, want b", st.Server)
	}
}

// Clients spread over servers, and when one server goes only its clients
// move.
func TestRankSpreadsAndMovesFew(t *testing.T) {
	servers := []string{"s1:1", "s2:1", "s3:1", "s4:1", "s5:1"}
	count := map[string]int{}
	moved := 0
	for i := range 1000 {
		name := fmt.Sprintf("client%d", i)
		first := stream.Rank(name, servers)[0]
		count[first]++
		if first != stream.Rank(name, servers[:4])[0] && first != "s5:1" {
			moved++
		}
	}
	for _, s := range servers {
		if count[s] < 150 || count[s] > 250 {
			t.Errorf("server %s chosen by %d of 1000 clients, want about 200: %v", s, count[s], count)
		}
	}
	if moved != 0 {
		t.Errorf("%d clients of the servers that stayed moved when s5 went", moved)
	}
}

// A replica that stalls while the server goes on catches up: a
// subscriber whose queue outgrows the window is closed and resumes from
// its index; either way no entry is lost.
func TestStreamStalledReplicaCatchesUp(t *testing.T) {
	s := newServer(t, 8)
	c := newClient(t, "c1", s.ln.Addr().String())
	block := make(chan struct{})
	var once sync.Once
	// A replica that stalls on its first entry while the server goes on.
	c.f = stream.NewFollower(stream.FollowerConfig{
		Name:    "c1",
		Servers: func() []string { return []string{s.ln.Addr().String()} },
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		Index: c.fsm.LastIndex,
		Apply: func(index uint64, data []byte) error {
			once.Do(func() { <-block })
			c.fsm.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data})
			return nil
		},
		Restore: func(index uint64, r io.Reader) error {
			c.mu.Lock()
			c.restores = append(c.restores, index)
			c.mu.Unlock()
			return c.fsm.Restore(io.NopCloser(r))
		},
		Heartbeat: 100 * time.Millisecond,
		Logf:      t.Logf,
	})
	c.start()
	s.apply(1)
	// The server's queue for the stalled client overflows; the kernel's
	// buffers hold what was written before.
	deadline := time.Now().Add(10 * time.Second)
	for s.hub.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no subscriber")
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.apply(40)
	close(block)
	c.waitFor(s)
	s.apply(3)
	c.waitFor(s)
}

// A replica that says ErrStop ends the follower (the node became a server).
func TestStreamStop(t *testing.T) {
	s := newServer(t, 10)
	s.apply(3)
	f := stream.NewFollower(stream.FollowerConfig{
		Name:    "c",
		Servers: func() []string { return []string{s.ln.Addr().String()} },
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		Index:     func() uint64 { return 0 },
		Apply:     func(uint64, []byte) error { return stream.ErrStop },
		Restore:   func(uint64, io.Reader) error { return stream.ErrStop },
		Heartbeat: 100 * time.Millisecond,
	})
	done := make(chan error, 1)
	go func() { done <- f.Run(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, stream.ErrStop) {
			t.Fatalf("Run: %v, want ErrStop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}

// Clients that connected while there was one server move to their
// best-ranked server once it is up, without a gap.
func TestStreamRebalances(t *testing.T) {
	a, b := newServer(t, 1000), newServer(t, 1000)
	both := func(n int) { a.apply(n); b.apply(n) }
	both(5)
	addrs := []string{a.ln.Addr().String(), b.ln.Addr().String()}
	name := preferring(addrs, addrs[1])
	c := newClient(t, name, addrs[0]) // only a is known at first
	c.start()
	c.waitFor(a)
	c.mu.Lock()
	c.servers = addrs // b is up
	c.mu.Unlock()
	both(3)
	deadline := time.Now().Add(10 * time.Second)
	for c.f.State().Server != addrs[1] {
		if time.Now().After(deadline) {
			t.Fatalf("still following %q, want the better-ranked %q", c.f.State().Server, addrs[1])
		}
		both(1)
		time.Sleep(20 * time.Millisecond)
	}
	both(4)
	c.waitFor(b)
	c.checkSequence(b)
	if st := c.f.State(); st.Moves != 0 {
		t.Errorf("a rebalance counted as %d failures", st.Moves)
	}
}

// freezer forwards connections to a server until frozen, then holds them
// open and silent: a partition, where the server neither closes the
// stream nor sends on it.
type freezer struct {
	ln     net.Listener
	frozen chan struct{}
}

func newFreezer(t *testing.T, to string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fz := &freezer{ln: ln, frozen: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					select {
					case <-fz.frozen:
						return // dropped, and the connection stays open
					default:
					}
					if err != nil {
						dst.Close()
						return
					}
					dst.Write(buf[:n])
				}
			}
			go pipe(s, c)
			go pipe(c, s)
		}
	}()
	return fz
}

// A server cut off by a partition goes silent without closing the
// stream. Told by gossip (Leave), the client moves to the next server at
// once, where silence alone would take five heartbeats. The control: the
// same client, not told, stays on the silent server.
func TestStreamLeaveOnGossip(t *testing.T) {
	a, b := newServer(t, 1000), newServer(t, 1000)
	both := func(n int) { a.apply(n); b.apply(n) }
	both(5)
	fz := newFreezer(t, a.ln.Addr().String())
	addrs := []string{fz.ln.Addr().String(), b.ln.Addr().String()}
	name := preferring(addrs, addrs[0])
	c := newClient(t, name, addrs...)
	c.heartbeat = time.Hour // silence never ends this stream here
	c.f = c.follower(name)
	if c.f.Leave(addrs[0]) {
		t.Fatal("Leave before following reported a server left")
	}
	c.start()
	c.waitFor(a)
	close(fz.frozen)
	both(3)
	// The control: untold, the client stays on the silent server.
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if st := c.f.State(); st.Server != addrs[0] {
			t.Fatalf("control: left the silent server untold, now on %q", st.Server)
		}
	}
	if c.f.Leave(addrs[1]) {
		t.Fatal("Leave of a server not followed reported a server left")
	}
	c.mu.Lock()
	c.servers = addrs[1:] // gossip says a is dead
	c.mu.Unlock()
	if !c.f.Leave(addrs[0]) {
		t.Fatal("Leave of the followed server reported nothing left")
	}
	c.waitFollowing(addrs[1], 5*time.Second)
	c.waitFor(b)
}
