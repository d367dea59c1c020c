package node

import (
	"context"
	"io"
	"log"
	"slices"
	"sync"
	"testing"
	"time"
)

// procsNode is a Node with only what procs.go reads, its GOMAXPROCS
// changes recorded instead of made.
func procsNode(t *testing.T) (*Node, func() []int) {
	n := &Node{cfg: Config{ClientProcs: 1}, logger: log.New(io.Discard, "", 0)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	t.Cleanup(n.cancel)
	var mu sync.Mutex
	var got []int // 1: ClientProcs set; 0: back to the default
	n.procs.set = func(int) { mu.Lock(); got = append(got, 1); mu.Unlock() }
	n.procs.reset = func() { mu.Lock(); got = append(got, 0); mu.Unlock() }
	n.procs.linger = 100 * time.Millisecond
	return n, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), got...)
	}
}

// A started client goes to ClientProcs, a server back to the default;
// nothing changes before the start.
func TestProcsFollowTheRole(t *testing.T) {
	n, got := procsNode(t)
	n.applyProcs() // not started: the start keeps every processor
	if g := got(); len(g) != 0 {
		t.Fatalf("changes before the start: %v", g)
	}
	n.startProcs() // a client
	n.rep.isServer.Store(true)
	n.applyProcs()
	n.applyProcs()
	n.rep.isServer.Store(false)
	n.applyProcs()
	if g, want := got(), []int{1, 0, 1}; !slices.Equal(g, want) {
		t.Fatalf("changes = %v, want %v", g, want)
	}
}

// A node that starts as a client takes ClientProcs before its start, once;
// made a server, it goes back to the default.
func TestProcsClientFromTheStart(t *testing.T) {
	n, got := procsNode(t)
	n.startAsClient()
	n.startProcs() // still a client: no second change
	if g, want := got(), []int{1}; !slices.Equal(g, want) {
		t.Fatalf("changes = %v, want %v", g, want)
	}
	n.rep.isServer.Store(true) // the leader added it
	n.applyProcs()
	if g, want := got(), []int{1, 0}; !slices.Equal(g, want) {
		t.Fatalf("changes = %v, want %v", g, want)
	}
}

// A client runs calls on the default and goes back to ClientProcs
// the linger (callProcsLinger) after the last one; a call within it keeps
// the default.
func TestProcsDuringCalls(t *testing.T) {
	n, got := procsNode(t)
	n.startProcs()
	n.procsCall(1)
	n.procsCall(1)
	n.procsCall(-1)
	n.procsCall(-1)
	n.procsCall(1) // within the linger: no change
	n.procsCall(-1)
	if g, want := got(), []int{1, 0}; !slices.Equal(g, want) {
		t.Fatalf("changes while calls ran = %v, want %v", g, want)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(got(), []int{1, 0, 1}) {
		if time.Now().After(deadline) {
			t.Fatalf("changes %v after the linger, want [1 0 1]", got())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Without ClientProcs nothing changes.
	m, got2 := procsNode(t)
	m.cfg.ClientProcs = 0
	m.startProcs()
	m.procsCall(1)
	m.procsCall(-1)
	if g := got2(); len(g) != 0 {
		t.Fatalf("changes without ClientProcs: %v", g)
	}
}
