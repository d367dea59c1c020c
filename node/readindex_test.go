package node

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// A follower cut off from the leader's replication (its forwarding
// connection still up) misses a write the leader acknowledged: its agent
// reads then say it is catching up, never the stale listing its FSM holds
// (the control: the raw FSM is stale). Once replication resumes, the reads
// show the write.
func TestInMem_ReadIndexNeverStale(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2", "n3")
	all := c.up()
	l := c.waitLeader(all...)
	f := c.node(others(all, l.Name())[0])
	newSession(t, l, "s")
	if _, err := l.NewAgent("s", "name=A"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent on "+f.Name(), 5*time.Second, func() bool {
		got, err := f.Agents("s")
		return err == nil && slices.Equal(got, []string{"A"})
	})

	// Cut Raft between the leader and f only.
	c.cutRaft(l.Name(), f.Name())
	if _, err := l.NewAgent("s", "name=B"); err != nil {
		t.Fatal(err)
	}

	// Control: f's own state is stale.
	if s, ok := f.fsm.Session("s"); !ok || slices.Contains(s.AgentNames(), "B") {
		t.Fatalf("control: %s's FSM has %v; the cut did not make it stale", f.Name(), s.AgentNames())
	}
	start := time.Now()
	got, err := f.Agents("s")
	if err == nil {
		t.Fatalf("%s listed agents %v after the leader acknowledged B, without an error", f.Name(), got)
	}
	if !errors.Is(err, errCatchingUp) {
		t.Fatalf("%s: %v, want a catching-up error", f.Name(), err)
	}
	if _, err := f.Loaded("s", "A"); !errors.Is(err, errCatchingUp) {
		t.Fatalf("%s: the loaded set of A: %v, want a catching-up error", f.Name(), err)
	}
	t.Logf("%s answered after %s: %v", f.Name(), time.Since(start).Round(time.Millisecond), err)

	c.heal()
	waitFor(t, f.Name()+" to show B", 20*time.Second, func() bool {
		got, err := f.Agents("s")
		return err == nil && slices.Equal(got, []string{"A", "B"})
	})
}
