package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
)

// nopFSM is a state machine with no state: these tests change only
// Raft's configuration.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnap{}, nil }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type nopSnap struct{}

func (nopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnap) Release()                          {}

// inmemRafts starts real Rafts on in-memory stores and transports, all
// connected; the first bootstraps a cluster of one and leads it.
func inmemRafts(t *testing.T, names ...string) map[string]*raft.Raft {
	t.Helper()
	trans := map[string]*raft.InmemTransport{}
	for _, name := range names {
		_, trans[name] = raft.NewInmemTransport(raft.ServerAddress(name))
	}
	for _, a := range trans {
		for _, b := range trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	rafts := map[string]*raft.Raft{}
	for i, name := range names {
		c := raft.DefaultConfig()
		c.LocalID = raft.ServerID(name)
		c.HeartbeatTimeout = 50 * time.Millisecond
		c.ElectionTimeout = 50 * time.Millisecond
		c.LeaderLeaseTimeout = 50 * time.Millisecond
		c.CommitTimeout = 5 * time.Millisecond
		c.Logger = hclog.NewNullLogger()
		store := raft.NewInmemStore()
		snaps := raft.NewInmemSnapshotStore()
		if i == 0 {
			cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: c.LocalID, Address: trans[name].LocalAddr()}}}
			if err := raft.BootstrapCluster(c, store, store, snaps, trans[name], cfg); err != nil {
				t.Fatal(err)
			}
		}
		r, err := raft.NewRaft(c, nopFSM{}, store, store, snaps, trans[name])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Shutdown().Error() })
		rafts[name] = r
	}
	waitFor(t, names[0]+" to lead", func() bool { return rafts[names[0]].State() == raft.Leader })
	return rafts
}

// waitFor polls cond until it holds, or fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// suffrages is r's configuration, by name.
func suffrages(t *testing.T, r *raft.Raft) map[string]raft.ServerSuffrage {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	out := map[string]raft.ServerSuffrage{}
	for _, s := range f.Configuration().Servers {
		out[string(s.ID)] = s.Suffrage
	}
	return out
}

// logs collects what a Leader logs.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) to(level string) func(string, ...any) {
	return func(f string, a ...any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, level+" "+fmt.Sprintf(f, a...))
	}
}

func (l *logs) has(line string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if s == line {
			return true
		}
	}
	return false
}

// gossip is a member list a test changes.
type gossip struct {
	mu sync.Mutex
	ms []cluster.Member
}

func (g *gossip) set(ms ...cluster.Member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ms = ms
}

func (g *gossip) members() []cluster.Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]cluster.Member(nil), g.ms...)
}

// at the in-memory transports' addresses: a node's address is its name.
func inmem(name, state string) cluster.Member {
	return cluster.Member{Name: name, State: state, Meta: cluster.Meta{Cluster: name}}
}

// Reconcile applies its plan on real Raft: adds, promotes, replaces and
// removes, each logged; a node whose port does not answer is kept out
// and the round asks for a retry.
func TestReconcileRaft(t *testing.T) {
	rafts := inmemRafts(t, "n1", "n2", "n3", "n4")
	g := &gossip{}
	var lg logs
	down := map[string]bool{}
	var downMu sync.Mutex
	l := New(Config{
		Name: "n1", LocalAddr: "n1", Voters: 2, Servers: 3, Raft: rafts["n1"],
		Members: g.members,
		Probe: func(addr string) error {
			downMu.Lock()
			defer downMu.Unlock()
			if down[addr] {
				return errors.New("connection refused")
			}
			return nil
		},
		ClientOnly: func(string) bool { return false },
		Logf:       lg.to("INFO"), Warnf: lg.to("WARN"),
	})
	check := func(wantDone bool, want map[string]raft.ServerSuffrage) {
		t.Helper()
		if done := l.Reconcile(); done != wantDone {
			t.Fatalf("Reconcile = %t, want %t; log %q", done, wantDone, lg.lines)
		}
		if got := suffrages(t, rafts["n1"]); !reflect.DeepEqual(got, want) {
			t.Fatalf("configuration %v, want %v", got, want)
		}
	}

	downMu.Lock()
	down["n4"] = true
	downMu.Unlock()
	g.set(inmem("n1", "alive"), inmem("n2", "alive"), inmem("n3", "alive"), inmem("n4", "alive"))
	check(true, map[string]raft.ServerSuffrage{"n1": raft.Voter, "n2": raft.Voter, "n3": raft.Nonvoter})

	g.set(inmem("n1", "alive"), inmem("n2", "dead"), inmem("n3", "alive"), inmem("n4", "alive"))
	check(false, map[string]raft.ServerSuffrage{"n1": raft.Voter, "n2": raft.Nonvoter, "n3": raft.Voter})

	g.set(inmem("n1", "alive"), inmem("n2", "left"), inmem("n3", "alive"), inmem("n4", "alive"))
	check(false, map[string]raft.ServerSuffrage{"n1": raft.Voter, "n3": raft.Voter})

	downMu.Lock()
	down["n4"] = false
	downMu.Unlock()
	check(true, map[string]raft.ServerSuffrage{"n1": raft.Voter, "n3": raft.Voter, "n4": raft.Nonvoter})
	check(true, map[string]raft.ServerSuffrage{"n1": raft.Voter, "n3": raft.Voter, "n4": raft.Nonvoter})

	for _, line := range []string{
		"INFO reconcile: added n2 as a voter",
		"INFO reconcile: added n3 as a non-voter",
		"WARN reconcile: keeping n4 out of Raft: its cluster port does not answer: connection refused",
		"INFO reconcile: promoted n3 to replace the failed voter n2",
		"INFO reconcile: demoted the failed voter n2",
		"INFO reconcile: removed n2, which left",
		"INFO reconcile: n4's cluster port answers now",
		"INFO reconcile: added n4 as a non-voter",
	} {
		if !lg.has(line) {
			t.Errorf("no log line %q in %q", line, lg.lines)
		}
	}
	if n := strings.Count(strings.Join(lg.lines, "\n"), "keeping n4 out of Raft"); n != 1 {
		t.Errorf("n4 kept out logged %d times, want once", n)
	}
}

// A change Raft refuses ends the round: it is logged, and nothing after
// it is tried.
func TestReconcileStopsAtFailure(t *testing.T) {
	rafts := inmemRafts(t, "n1")
	var lg logs
	var probed []string
	l := New(Config{
		Name: "n1", LocalAddr: "n1", Voters: 5, Raft: rafts["n1"],
		// n2 and n3 share an address: Raft refuses the second.
		Members: func() []cluster.Member {
			return []cluster.Member{inmem("n1", "alive"), inmem("n2", "alive"), at(inmem("n3", "alive"), "n2"), inmem("n4", "alive")}
		},
		Probe:      func(addr string) error { probed = append(probed, addr); return nil },
		ClientOnly: func(string) bool { return false },
		Logf:       lg.to("INFO"), Warnf: lg.to("WARN"),
	})
	// n2's entry commits under the configuration before it, of n1 alone,
	// so n2 needs no Raft of its own here.
	if l.Reconcile() {
		t.Fatalf("Reconcile = true with a duplicate address; log %q", lg.lines)
	}
	if want := []string{"n2", "n2"}; !reflect.DeepEqual(probed, want) {
		t.Errorf("probed %q, want %q: nothing after the refused change", probed, want)
	}
	found := false
	for _, s := range lg.lines {
		found = found || strings.HasPrefix(s, "WARN reconcile: added n3 as a voter: ")
	}
	if !found {
		t.Errorf("no warning for the refused change in %q", lg.lines)
	}
}

// Watch runs a term's loop while told this node leads: it says so, waits
// on a Barrier, runs TermStart, reconciles, and on a trigger reconciles
// again; it stops when leadership is lost, and tells OnLeading of every
// change first.
func TestWatch(t *testing.T) {
	rafts := inmemRafts(t, "n1", "n2")
	g := &gossip{}
	g.set(inmem("n1", "alive"))
	var lg logs
	var leadMu sync.Mutex
	var told []bool
	trigger := make(chan struct{}, 1)
	l := New(Config{
		Name: "n1", LocalAddr: "n1", Voters: 3, Raft: rafts["n1"],
		Members: g.members, Trigger: trigger,
		Probe:      func(string) error { return nil },
		ClientOnly: func(string) bool { return false },
		OnLeading:  func(b bool) { leadMu.Lock(); told = append(told, b); leadMu.Unlock() },
		TermStart:  func(context.Context) { lg.to("INFO")("term begun") },
		Logf:       lg.to("INFO"), Warnf: lg.to("WARN"),
		BarrierTimeout: 5 * time.Second,
	})
	ctx, cancel := context.WithCancel(context.Background())
	notify := make(chan bool)
	done := make(chan struct{})
	go func() { defer close(done); l.Watch(ctx, notify) }()
	notify <- true
	waitFor(t, "leading the cluster", func() bool { return lg.has("INFO leading the cluster") })
	g.set(inmem("n1", "alive"), inmem("n2", "alive"))
	trigger <- struct{}{}
	waitFor(t, "n2 added on the trigger", func() bool { return suffrages(t, rafts["n1"])["n2"] == raft.Voter })
	notify <- false
	cancel()
	<-done
	leadMu.Lock()
	defer leadMu.Unlock()
	if want := []bool{true, false}; !reflect.DeepEqual(told, want) {
		t.Errorf("OnLeading told %v, want %v", told, want)
	}
	if want := []string{"INFO leading the cluster", "INFO term begun", "INFO reconcile: added n2 as a voter"}; !reflect.DeepEqual(lg.lines, want) {
		t.Errorf("log %q, want %q", lg.lines, want)
	}
}
