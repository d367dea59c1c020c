package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Many writes through one follower at once share one multiplexed
// connection to the leader, each answered and applied once; a follower
// whose leader does not speak 'M' (an older version) forwards the same
// writes one per connection, as before.
func Test_InMem_ForwardMux(t *testing.T) {
	t.Parallel()
	for _, oldLeader := range []bool{false, true} {
		name := "multiplexed"
		if oldLeader {
			name = "a leader that does not multiplex"
		}
		t.Run(name, func(t *testing.T) {
			c := newInmemClusterWith(t, 0, func(cfg *Config) {
				cfg.noForwardMux = oldLeader && cfg.Name != "n3"
			}, "n1", "n2", "n3")
			all := c.up()
			l := c.waitLeader(all...)
			if l.Name() == "n3" {
				n1 := c.node("n1")
				if err := l.raftNode().LeadershipTransferToServer(raft.ServerID("n1"), n1.transport.LocalAddr()).Error(); err != nil {
					t.Fatal(err)
				}
				l = c.waitLeader(all...)
			}
			f := c.node("n3")
			waitAdminTokens(t, c)
			newSession(t, l, "s")

			const writers = 32
			var wg sync.WaitGroup
			names := make([]string, writers)
			errs := make([]error, writers)
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					names[i], errs[i] = f.NewAgent("s", fmt.Sprintf("name=a%d", i))
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("writes through %s: %v", f.Name(), err)
			}
			got, _ := l.fsm.AgentNames("s")
			slices.Sort(names)
			slices.Sort(got)
			if !slices.Equal(got, names) {
				t.Fatalf("the leader has agents %v, the writers were answered %v", got, names)
			}
			leaderAddr := string(l.transport.LocalAddr())
			f.fwdMux.mu.Lock()
			mc := f.fwdMux.conns[leaderAddr]
			_, refused := f.fwdMux.legacy[leaderAddr]
			f.fwdMux.mu.Unlock()
			switch {
			case oldLeader && (mc != nil || !refused):
				t.Fatalf("the leader does not speak 'M', yet %s holds a multiplexed connection to it (%v) or did not note the refusal (%v)", f.Name(), mc != nil, refused)
			case !oldLeader && (mc == nil || refused):
				t.Fatalf("%s forwarded without a multiplexed connection (refused: %v)", f.Name(), refused)
			}
			for _, a := range names {
				if err := f.WalkAgent("s", a); err != nil {
					t.Fatalf("%s does not read back its agent %s: %v", f.Name(), a, err)
				}
			}
		})
	}
}

// fakeMuxLeader is the leader's end of a multiplexed connection, driven
// by the test: it reads requests and answers those it is told to.
type fakeMuxLeader struct {
	c    net.Conn
	reqs chan fwdRequest
}

func newMuxPair(t *testing.T) (*muxClient, *fakeMuxLeader, *Node) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	n := &Node{logger: log.New(io.Discard, "", 0), ctx: context.Background()}
	mc := &muxClient{c: a, calls: map[uint64]chan fwdResponse{}, done: make(chan struct{})}
	go mc.readLoop(n, "leader")
	l := &fakeMuxLeader{c: b, reqs: make(chan fwdRequest, 16)}
	go func() {
		br := bufio.NewReader(b)
		for {
			var req fwdRequest
			if err := readMsg(br, &req, maxForward); err != nil {
				close(l.reqs)
				return
			}
			l.reqs <- req
		}
	}()
	return mc, l, n
}

func (l *fakeMuxLeader) next(t *testing.T) fwdRequest {
	t.Helper()
	select {
	case req, ok := <-l.reqs:
		if !ok {
			t.Fatal("the connection closed")
		}
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("no request within 10s")
	}
	return fwdRequest{}
}

// Answers on a multiplexed connection reach their own writes in whatever
// order they come; a leader that stops answering fails every write in
// flight at once as ambiguous (each may have been applied) and closes the
// connection, so the next write is certainly unsent and dials again.
func TestForwardMuxAnswersAndTimeout(t *testing.T) {
	mc, l, _ := newMuxPair(t)
	type result struct {
		resp fwdResponse
		err  error
	}
	results := make([]chan result, 3)
	for i := range results {
		results[i] = make(chan result, 1)
		timeout := 10 * time.Second
		if i == 2 {
			timeout = 300 * time.Millisecond
		}
		go func() {
			resp, err := mc.call(fwdRequest{Cmd: []byte(fmt.Sprintf("w%d", i))}, "leader", timeout)
			results[i] <- result{resp, err}
		}()
		l.next(t) // in order: write i's ID is i+1
	}
	// The second, then the first, answered out of order.
	for _, id := range []uint64{2, 1} {
		if err := writeMsg(l.c, fwdResponse{ID: id, Index: 100 + id}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []uint64{101, 102} {
		r := <-results[i]
		if r.err != nil || r.resp.Index != want {
			t.Fatalf("write %d: %+v, %v; want index %d", i, r.resp, r.err, want)
		}
	}
	// The third is never answered.
	r := <-results[2]
	if !errors.Is(r.err, errAmbiguous) {
		t.Fatalf("a write the leader never answered: %v, want it ambiguous", r.err)
	}
	select {
	case <-mc.done:
	default:
		t.Fatal("the connection stays open after a write went unanswered")
	}
	if _, err := mc.call(fwdRequest{Cmd: []byte("late")}, "leader", time.Second); !errors.Is(err, errUnsent) {
		t.Fatalf("a write on the failed connection: %v, want it unsent", err)
	}
}

// A connection that fails with writes in flight fails each of them as
// ambiguous at once, not after its timeout.
func TestForwardMuxConnectionLost(t *testing.T) {
	mc, l, _ := newMuxPair(t)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := mc.call(fwdRequest{Cmd: []byte(fmt.Sprintf("w%d", i))}, "leader", time.Minute)
			errs <- err
		}()
		l.next(t)
	}
	start := time.Now()
	l.c.Close()
	for range 4 {
		if err := <-errs; !errors.Is(err, errAmbiguous) {
			t.Fatalf("a write in flight when the connection was lost: %v, want it ambiguous", err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the writes failed %v after the connection was lost", d)
	}
}
