package node

import (
	"bytes"
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

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// waitAdminTokens waits until the bootstrap's write of the cluster's
// admin token has landed on every node, so that the log holds still for
// what a test watches.
func waitAdminTokens(t *testing.T, c *inmemCluster) {
	t.Helper()
	for _, name := range c.up() {
		n := c.node(name)
		waitFor(t, name+" to apply the cluster's admin token", 10*time.Second, func() bool {
			return len(n.fsm.Tokens()) > 0
		})
	}
}

// stopBroadcast makes leader l tell no server of its commits unasked,
// from now on while it leads: the variant without the broadcast, for
// the controls (commit notices to a node that forwarded a write or asked
// the leader's index still go). The leader loop records the leadership
// when Raft tells it, which may come after the test saw l lead: it waits
// for that first, so the record cannot turn the broadcast back on.
func stopBroadcast(t *testing.T, l *Node) {
	t.Helper()
	waitFor(t, l.Name()+"'s leader loop to record its leadership", 10*time.Second, l.commits.Leading)
	l.commits.SetLeading(false)
}

// heldBack is the control of the commit notices: told nothing, follower f
// stores the entry of a session written on leader l and does not apply
// it, for noticeTime after it stored it (a notice, were one sent, comes
// within milliseconds). Another entry after it in the leader's log would
// tell f, as Raft does: a Barrier that a late notice of an earlier write
// fell back to (tellCommitted) is one the test cannot rule out. So f is
// judged only while the leader's log ends at the write (read after f's
// state: a log that ends there then ended there before); otherwise the
// write is made again, at most five times. It returns the session's name.
func heldBack(t *testing.T, l, f *Node, name string) string {
	const noticeTime = 300 * time.Millisecond
	t.Helper()
	for try := range 5 {
		made := name
		if try > 0 {
			made = fmt.Sprintf("%s%d", name, try)
		}
		newSession(t, l, made)
		idx := l.fsm.LastIndex()
		waitFor(t, f.Name()+" to store the entry", 5*time.Second, func() bool { return f.raftNode().LastIndex() >= idx })
		for end := time.Now().Add(noticeTime); f.fsm.LastIndex() < idx && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		applied := f.fsm.LastIndex()
		last := l.raftNode().LastIndex()
		switch {
		case applied < idx:
			return made
		case last == idx:
			t.Fatalf("control: %s applied index %d, the last of the leader's log, with no commit notice and no CommitTimeout", f.Name(), idx)
		}
		t.Logf("control: %s applied index %d, committed by an entry after it (the leader's log ends at %d); writing again", f.Name(), idx, last)
	}
	t.Fatalf("control: the leader's log never ended at the write in five tries")
	return ""
}

// With a CommitTimeout of an hour and no broadcast of commits, a follower
// learns that an entry is committed only from the entry after it. The
// control: a write on the leader reaches the follower's log, and the
// follower does not apply it.
// A write forwarded through the follower still returns, applied there
// (read-your-writes): the leader sent it a commit notice, which also
// brings the control's write. Another follower's agent read is current at
// once: the ReadIndex gets it a notice too.
func TestInMem_CommitNotice(t *testing.T) {
	t.Parallel()
	c := newInmemClusterWith(t, 0, func(cfg *Config) { cfg.CommitTimeout = time.Hour }, "n1", "n2", "n3")
	all := c.up()
	l := c.waitLeader(all...)
	stopBroadcast(t, l)
	fs := others(all, l.Name())
	f, g := c.node(fs[0]), c.node(fs[1])
	waitAdminTokens(t, c)

	control := heldBack(t, l, f, "control")

	newSession(t, f, "through-f") // fails unless f applied it
	if !hasSessions(f, control) {
		t.Fatalf("%s applied its own write but not the control's before it", f.Name())
	}

	if _, err := l.NewAgent("through-f", "name=A"); err != nil {
		t.Fatal(err)
	}
	got, err := g.Agents("through-f")
	if err != nil || !slices.Equal(got, []string{"A"}) {
		t.Fatalf("%s: agents %v, %v; want [A] (a ReadIndex that brings a commit notice)", g.Name(), got, err)
	}

	// A walk finds a name this node has at once, and one it has not yet
	// applied once it is current: never "not found" for a session or
	// agent the leader acknowledged (the control: f's own state lacks it).
	newSession(t, l, "walked")
	if _, err := l.NewAgent("walked", "name=W"); err != nil {
		t.Fatal(err)
	}
	// (Judged only while the leader's log ends at the agent: heldBack.)
	aidx := l.fsm.LastIndex()
	if _, err := f.fsm.Agent("walked", "W"); err == nil && l.raftNode().LastIndex() == aidx {
		t.Fatalf("control: %s applied the agent with no commit notice", f.Name())
	}
	if err := f.WalkAgent("walked", "W"); err != nil {
		t.Fatalf("%s: walk to an agent the leader acknowledged: %v", f.Name(), err)
	}
	if err := f.WalkSession("walked"); err != nil {
		t.Fatalf("%s: walk to a session the leader acknowledged: %v", f.Name(), err)
	}
	if err := f.WalkSession("none"); !errors.Is(err, p9.ErrNotFound) {
		t.Fatalf("%s: walk to a session nobody made: %v, want not found", f.Name(), err)
	}
	if err := f.WalkAgent("walked", "none"); !errors.Is(err, p9.ErrNotFound) {
		t.Fatalf("%s: walk to an agent nobody made: %v, want not found", f.Name(), err)
	}
}

// With a CommitTimeout of an hour, every server applies a write made on
// the leader at once, voters and non-voters: the leader tells each of
// them of every commit (the broadcast); a client, fed by a server's
// stream, has it as soon as its server does. A server the leader cannot
// reach holds up neither the writes nor the others' notices. The
// control: without the broadcast a follower stores the entry and does
// not apply it (TestInMem_CommitNotice's control, here on the same
// shape of cluster).
func TestInMem_CommitBroadcast(t *testing.T) {
	t.Parallel()
	for _, broadcast := range []bool{true, false} {
		c := newInmemCluster(t, 3)
		c.servers = 4 // n4 a non-voter, n5 a client
		c.tweak = func(cfg *Config) { cfg.CommitTimeout = time.Hour }
		for _, name := range []string{"n1", "n2", "n3", "n4"} {
			c.add(name)
		}
		client := c.addClient("n5")
		all := c.up()
		l := c.waitLeader(others(all, "n5")...)
		waitFor(t, "n4 a non-voter", 10*time.Second, func() bool { return suffrages(l)["n4"] == raft.Nonvoter })
		waitAdminTokens(t, c)
		waitFor(t, "n5 to follow a server", 10*time.Second, func() bool { return client.Ready() == nil })

		if !broadcast {
			stopBroadcast(t, l)
			heldBack(t, l, c.node(others(all, l.Name(), "n4", "n5")[0]), "b")
			continue
		}
		newSession(t, l, "b")
		idx := l.fsm.LastIndex()
		for _, name := range others(all, l.Name()) {
			n := c.node(name)
			waitFor(t, name+" to apply the leader's write", 5*time.Second, func() bool { return n.fsm.LastIndex() >= idx })
		}

		// Many writes at once: each server applies all of them, told of
		// the batches they commit in.
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := l.NewSession(fmt.Sprintf("name=m%d", i)); err != nil {
					t.Errorf("session m%d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		idx = l.fsm.LastIndex()
		for _, name := range others(all, l.Name()) {
			n := c.node(name)
			waitFor(t, name+" to apply the leader's 40 writes", 5*time.Second, func() bool { return n.fsm.LastIndex() >= idx })
		}

		// One server cut off from the leader: the others are still told.
		// Not the one n5 follows: n5 would be told only once it moved
		// (TestInMem_ClientLeavesServerCutOffFromLeader).
		st, _ := client.followerState()
		cut := others(all, l.Name(), "n5", strings.TrimPrefix(st.Server, "raft-"))[0]
		c.cutRaft(l.Name(), cut)
		for i := range 3 {
			newSession(t, l, fmt.Sprintf("c%d", i))
			idx := l.fsm.LastIndex()
			for _, name := range others(all, l.Name(), cut) {
				n := c.node(name)
				waitFor(t, fmt.Sprintf("%s to apply write %d with %s cut off", name, i, cut), 5*time.Second, func() bool { return n.fsm.LastIndex() >= idx })
			}
		}
		c.heal()
	}
}

// The notice is safe because the follower checks it like any
// AppendEntries: one whose entry's term does not match the follower's log
// is refused and applies nothing (the protection); the control, the same
// notice with the right term, is taken.
func TestInMem_CommitNoticeChecked(t *testing.T) {
	t.Parallel()
	c := newInmemClusterWith(t, 0, func(cfg *Config) { cfg.CommitTimeout = time.Hour }, "n1", "n2", "n3")
	all := c.up()
	l := c.waitLeader(all...)
	stopBroadcast(t, l)
	f := c.node(others(all, l.Name())[0])
	waitAdminTokens(t, c)

	newSession(t, l, "s")
	idx := l.fsm.LastIndex()
	waitFor(t, f.Name()+" to store the entry", 5*time.Second, func() bool { return f.raftNode().LastIndex() >= idx })
	var entry raft.Log
	if err := l.logs.GetLog(idx, &entry); err != nil {
		t.Fatal(err)
	}
	term := l.raftNode().CurrentTerm()
	id, addr := raft.ServerID(f.Name()), f.transport.LocalAddr()

	resp, err := l.commits.SendCommitNotice(id, addr, idx, entry.Term-1, term)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Success || f.fsm.LastIndex() >= idx {
		t.Fatalf("a notice of the wrong term was taken (success %v; applied %d of %d)", resp.Success, f.fsm.LastIndex(), idx)
	}
	if resp, err = l.commits.SendCommitNotice(id, addr, idx+1, term, term); err != nil || resp.Success {
		t.Fatalf("a notice of an entry the follower does not have: %+v, %v; want refused", resp, err)
	}

	resp, err = l.commits.SendCommitNotice(id, addr, idx, entry.Term, term)
	if err != nil || !resp.Success {
		t.Fatalf("control: the right notice: %+v, %v", resp, err)
	}
	waitFor(t, f.Name()+" to apply the noticed entry", 5*time.Second, func() bool { return f.fsm.LastIndex() >= idx })
	if l.raftNode().State() != raft.Leader || l.raftNode().CurrentTerm() != term {
		t.Fatalf("the notices disturbed the leader: state %v, term %d (was %d)", l.raftNode().State(), l.raftNode().CurrentTerm(), term)
	}
}

// cutAnswer cuts the connection it wraps at the first answer to a
// forwarded command once armed, after the leader has applied the
// command: the command's answer is lost, as when the leader crashes or
// the network fails between commit and answer.
type cutAnswer struct {
	net.Conn
	armed   *atomic.Bool
	applied func() bool // the leader has applied the command
	sawCmd  bool        // the last message written carries a command
	t       *testing.T
}

func (c *cutAnswer) Write(p []byte) (int, error) {
	if len(p) > 1 {
		c.sawCmd = bytes.Contains(p, []byte(`"cmd":"`))
	}
	return c.Conn.Write(p)
}

func (c *cutAnswer) Read(p []byte) (int, error) {
	if c.sawCmd && c.armed.CompareAndSwap(true, false) {
		deadline := time.Now().Add(10 * time.Second)
		for !c.applied() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.sawCmd = false
	}
	return n, err
}

// A create forwarded through a follower whose answer is lost after the
// leader applied it is retried, and makes one session (one agent), whose
// name it answers. The control, the same create proposed once without a
// request id (proposeBare): it fails as one that may or may not have been
// applied, and it was.
func TestInMem_RetriedCreateAppliesOnce(t *testing.T) {
	t.Parallel()
	for _, ids := range []bool{true, false} {
		name := "with request ids"
		if !ids {
			name = "control: without request ids"
		}
		t.Run(name, func(t *testing.T) {
			c := newInmemCluster(t, 0, "n1", "n2", "n3")
			all := c.up()
			l := c.waitLeader(all...)
			f := c.node(others(all, l.Name())[0])
			waitAdminTokens(t, c)
			newSession(t, l, "s")
			sessions := func() []string { return l.fsm.SessionNames() }
			agents := func() []string { names, _ := l.fsm.AgentNames("s"); return names }
			var (
				armed  atomic.Bool
				mu     sync.Mutex
				list   func() []string // what the armed create adds to, on the leader
				before int
			)
			c.mu.Lock()
			c.wrap = func(from, to string, conn net.Conn) net.Conn {
				if from != f.Name() {
					return conn
				}
				return &cutAnswer{Conn: conn, armed: &armed, t: t, applied: func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(list()) > before
				}}
			}
			c.mu.Unlock()
			f.fwd.CloseAll() // the next write dials, through the wrapper

			for _, tc := range []struct {
				what   string
				list   func() []string
				create func() (string, error)
				walk   func(string) error
			}{
				{"session", sessions, func() (string, error) {
					if !ids {
						return proposeBare(f, raftfsm.CmdCreateSession, raftfsm.CreateSession{Owner: "anon@test", Time: nowNano()})
					}
					return anonOf(f).NewSession("")
				}, f.WalkSession},
				{"agent", agents, func() (string, error) {
					if !ids {
						return proposeBare(f, raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: "s"})
					}
					return anonOf(f).NewAgent("s", "")
				}, func(a string) error { return f.WalkAgent("s", a) }},
			} {
				mu.Lock()
				list, before = tc.list, len(tc.list())
				mu.Unlock()
				armed.Store(true)
				got, err := tc.create()
				if armed.Load() {
					t.Fatalf("%s: the answer was never cut: the test did not test", tc.what)
				}
				after := tc.list()
				if !ids {
					if !errors.Is(err, errAmbiguous) || len(after) != before+1 {
						t.Fatalf("control: %s: %q, %v, now %v; want an ambiguous failure and one new", tc.what, got, err, after)
					}
					continue
				}
				if err != nil {
					t.Fatalf("a %s create whose answer was lost: %v", tc.what, err)
				}
				if len(after) != before+1 || !slices.Contains(after, got) {
					t.Fatalf("a retried %s create answered %q; now %v (were %d): want one new, the one answered", tc.what, got, after, before)
				}
				if err := tc.walk(got); err != nil {
					t.Fatalf("%s does not read back its %s %s: %v", f.Name(), tc.what, got, err)
				}
			}
		})
	}
}

// A session or agent made through a follower is answered once the leader
// has committed it (appliedLater), and the writer still finds it through
// that follower at once: walks wait for every write acknowledged through
// the node, listings check with the leader. The control: with the
// leader's replication to the follower cut, the follower answers the
// create without having applied it, and its walk then says it is
// catching up, never that the agent does not exist.
func TestInMem_CreateThroughFollowerReadsBack(t *testing.T) {
	t.Parallel()
	c := newInmemClusterWith(t, 0, func(cfg *Config) { cfg.CommitTimeout = time.Hour }, "n1", "n2", "n3")
	all := c.up()
	l := c.waitLeader(all...)
	f := c.node(others(all, l.Name())[0])
	waitAdminTokens(t, c)

	for i := range 30 {
		sess := fmt.Sprintf("s%d", i)
		if got, err := anonOf(f).NewSession("name=" + sess); err != nil || got != sess {
			t.Fatalf("session %s through %s: %q, %v", sess, f.Name(), got, err)
		}
		if err := f.WalkSession(sess); err != nil {
			t.Fatalf("%s: walk to its own session %s: %v", f.Name(), sess, err)
		}
		if got, err := anonOf(f).NewAgent(sess, "name=A"); err != nil || got != "A" {
			t.Fatalf("agent %s/A through %s: %q, %v", sess, f.Name(), got, err)
		}
		if err := f.WalkAgent(sess, "A"); err != nil {
			t.Fatalf("%s: walk to its own agent %s/A: %v", f.Name(), sess, err)
		}
		if got, err := f.Agents(sess); err != nil || !slices.Equal(got, []string{"A"}) {
			t.Fatalf("%s: agents of %s: %v, %v; want [A]", f.Name(), sess, got, err)
		}
		if got, err := f.Sessions(); err != nil || !slices.Contains(got, sess) {
			t.Fatalf("%s: sessions %v, %v; want %s among them", f.Name(), got, err, sess)
		}
		if _, err := f.Loaded(sess, "A"); err != nil {
			t.Fatalf("%s: the loaded set of its own agent %s/A: %v", f.Name(), sess, err)
		}
	}

	// Control: cut Raft between the leader and f only.
	c.cutRaft(l.Name(), f.Name())
	if got, err := anonOf(f).NewAgent("s0", "name=cut"); err != nil || got != "cut" {
		t.Fatalf("agent s0/cut through %s with its replication cut: %q, %v", f.Name(), got, err)
	}
	if _, err := f.fsm.Agent("s0", "cut"); err == nil {
		t.Fatalf("control: %s applied s0/cut with its replication cut: the create did not answer at commit", f.Name())
	}
	if err := f.WalkAgent("s0", "cut"); !errors.Is(err, errCatchingUp) {
		t.Fatalf("%s: walk to its own agent it has not applied: %v, want a catching-up error", f.Name(), err)
	}
	c.heal()
	waitFor(t, f.Name()+" to find s0/cut", 20*time.Second, func() bool { return f.WalkAgent("s0", "cut") == nil })
}

// proposeBare proposes a command once through n, without the request id
// every write of the node carries: what a retry could not tell from a new
// write.
func proposeBare(n *Node, t raftfsm.CommandType, body any) (string, error) {
	data, err := raftfsm.Encode(t, body)
	if err != nil {
		return "", err
	}
	r, err := n.applyOnce(t, data, applyTimeout, caller{who: "anon@test"})
	return r.Name, err
}
