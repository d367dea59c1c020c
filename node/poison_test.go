package node

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/raftfsm"
)

// A poisoned entry (an unknown command type, a body that does not decode)
// that reaches the log around the leader's validation is skipped by every
// node, also when it is replayed at a restart; the cluster keeps taking
// writes. This is the control of the end-to-end test in cmd/toolnode,
// which shows that such a command sent to the leader is never appended:
// here it is appended (straight through raft.Apply), and it is the
// apply-side skip that keeps the nodes up.
func TestInMem_PoisonedEntrySkipped(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2", "n3")
	all := c.up()
	l := c.waitLeader(all...)
	newSession(t, c.node(others(all, l.Name())[0]), "before")

	var indexes []uint64
	for _, entry := range [][]byte{
		{99, '{', '}'},                  // the unknown type of the issue
		{byte(raftfsm.CmdLoad), '{'},    // an undecodable body
		{byte(raftfsm.CmdLoad), 'n', 0}, // garbage
	} {
		if raftfsm.Validate(entry) == nil {
			t.Fatalf("Validate accepts %q", entry)
		}
		f := l.raftNode().Apply(entry, 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("appending %q around validation: %v", entry, err)
		}
		err, _ := f.Response().(error)
		if !errors.Is(err, raftfsm.ErrInvalid) {
			t.Fatalf("applying %q answered %v, want an error wrapping ErrInvalid", entry, f.Response())
		}
		indexes = append(indexes, f.Index())
	}
	last := indexes[len(indexes)-1]
	for _, name := range all {
		n := c.node(name)
		waitFor(t, name+" to apply the poisoned entries", 10*time.Second, func() bool { return n.fsm.LastIndex() >= last })
	}
	for _, name := range all {
		newSession(t, c.node(name), "after-"+name)
	}

	// A follower restarted on its data directory replays the log with
	// the poisoned entries in it and catches up.
	f := others(all, c.leader().Name())[0]
	c.crash(f)
	newSession(t, c.node(others(all, f)[0]), "while-down")
	r := c.restart(f)
	waitFor(t, f+" to catch up after its restart", 15*time.Second, func() bool {
		return hasSessions(r, "before", "after-n1", "after-n2", "after-n3", "while-down")
	})
}

// The leader refuses an invalid command, proposed on it or forwarded to
// it, and appends nothing.
func TestInMem_InvalidCommandRefused(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2")
	all := c.up()
	l := c.waitLeader(all...)
	follower := c.node(others(all, l.Name())[0])
	leaderAddr, _ := follower.raftNode().LeaderWithID()
	// The bootstrap writes the cluster's admin token at its first start:
	// let that write land before the log's length is watched.
	waitAdminTokens(t, c)

	for _, entry := range [][]byte{
		{99, '{', '}'},
		{byte(raftfsm.CmdKillSession), '{', '}'}, // no name
		append([]byte{byte(raftfsm.CmdCreateSession)}, `{"name":"x","evil":true}`...),
	} {
		before := l.raftNode().LastIndex()
		resp, err := follower.forward(string(leaderAddr), entry, 5*time.Second)
		if err != nil {
			t.Fatalf("forwarding %q: %v", entry, err)
		}
		if resp.Err == "" || resp.Kind != "invalid" || resp.Index != 0 {
			t.Fatalf("forwarded %q: answer %+v, want an invalid error and no index", entry, resp)
		}
		if _, _, err := l.applyHere(entry, 5*time.Second, "the test"); !errors.Is(err, raftfsm.ErrInvalid) {
			t.Fatalf("applying %q on the leader: %v, want ErrInvalid", entry, err)
		}
		if got := commandsSince(t, l, before); got != 0 {
			t.Fatalf("the log got %d commands after index %d with invalid command %q", got, before, entry)
		}
	}
	// Control: the same path appends a valid command.
	before := l.raftNode().LastIndex()
	resp, err := follower.forwardAs(string(leaderAddr), raftfsm.MustEncode(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: "ok", Owner: "anon@test"}), 5*time.Second, caller{who: "anon@test"})
	if err != nil || resp.Err != "" || resp.Index <= before {
		t.Fatalf("forwarding a valid command: %+v, %v", resp, err)
	}
}

// commandsSince counts the commands in the leader's log after index: the
// leader also appends Barriers of its own (raftnode.Notices.Nudge), which are no
// commands.
func commandsSince(t *testing.T, l *Node, index uint64) int {
	t.Helper()
	n := 0
	for i := index + 1; i <= l.raftNode().LastIndex(); i++ {
		var e raft.Log
		if err := l.logs.GetLog(i, &e); err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		if e.Type == raft.LogCommand {
			n++
		}
	}
	return n
}
