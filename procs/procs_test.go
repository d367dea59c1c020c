package procs

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// testProcs is a Procs with ClientProcs 1, its GOMAXPROCS changes
// recorded instead of made.
func testProcs(t *testing.T, clientProcs int) (*Procs, func() []int) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := New(ctx, clientProcs, func(string, ...any) {})
	var mu sync.Mutex
	var got []int // 1: ClientProcs set; 0: back to the default
	n.set = func(int) { mu.Lock(); got = append(got, 1); mu.Unlock() }
	n.reset = func() { mu.Lock(); got = append(got, 0); mu.Unlock() }
	n.linger = 100 * time.Millisecond
	return n, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), got...)
	}
}

// A started client goes to ClientProcs, a server back to the default;
// nothing changes before the start.
func TestProcsFollowTheRole(t *testing.T) {
	n, got := testProcs(t, 1)
	n.Role(true) // not started: the start keeps every processor
	if g := got(); len(g) != 0 {
		t.Fatalf("changes before the start: %v", g)
	}
	n.Start(true) // a client
	n.Role(false)
	n.Role(false)
	n.Role(true)
	if g, want := got(), []int{1, 0, 1}; !slices.Equal(g, want) {
		t.Fatalf("changes = %v, want %v", g, want)
	}
}

// A node that starts as a client takes ClientProcs before its start, once;
// made a server, it goes back to the default.
func TestProcsClientFromTheStart(t *testing.T) {
	n, got := testProcs(t, 1)
	n.StartAsClient()
	n.Start(true) // still a client: no second change
	if g, want := got(), []int{1}; !slices.Equal(g, want) {
		t.Fatalf("changes = %v, want %v", g, want)
	}
	n.Role(false) // the leader added it
	if g, want := got(), []int{1, 0}; !slices.Equal(g, want) {
		t.Fatalf("changes = %v, want %v", g, want)
	}
}

// A client runs calls on the default and goes back to ClientProcs
// the linger (Linger) after the last one; a call within it keeps
// the default.
func TestProcsDuringCalls(t *testing.T) {
	n, got := testProcs(t, 1)
	n.Start(true)
	n.Call(1)
	n.Call(1)
	n.Call(-1)
	n.Call(-1)
	n.Call(1) // within the linger: no change
	n.Call(-1)
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
	m, got2 := testProcs(t, 0)
	m.Start(true)
	m.Call(1)
	m.Call(-1)
	if g := got2(); len(g) != 0 {
		t.Fatalf("changes without ClientProcs: %v", g)
	}
}
