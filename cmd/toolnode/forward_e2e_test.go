package main

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Writes through a follower ride out the loss of the leader (issue 10):
// a write issued just after the leader is cut off (SIGSTOP: its ports
// still accept, nothing answers) returns within the write timeout,
// succeeding once a new leader exists; writes through a follower while
// the leader is SIGKILLed are retried instead of failing as "may or may
// not have been applied". tool_load and tool_unload are idempotent, which
// is what makes retrying a lost answer safe.
func TestE2E_Forward_LeaderLoss(t *testing.T) {
	t.Parallel()
	n1 := newCnode(t, "f1")
	n2 := newCnode(t, "f2").joining(n1)
	n3 := newCnode(t, "f3").joining(n1)
	nodes := []*cnode{n1, n2, n3}
	for _, n := range nodes { // on every node: no kill withdraws it
		n.addTool(t, "fw_tool", "A tool every node publishes.")
	}
	n1.launch(t)
	n1.waitServing(t, 30*time.Second)
	n2.launch(t)
	n3.launch(t)
	leaderName, _ := waitFormed(t, 30*time.Second, nodes...)
	leader := byName(nodes, leaderName)
	f := others(nodes, leader)[0]
	mustAsk9(t, f, "session/new", "name=s")
	mustAsk9(t, f, "session/s/agent/new", "name=A")
	createsReadBack(t, f)
	const ctl = "session/s/agent/A/ctl"
	pollUntil(t, 20*time.Second, "fw_tool to be loadable through "+f.name, func() (bool, string) {
		_, err := ask9(f.e.p9, ctl, "tool_load fw_tool", 10*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	loaded := true
	write := func(n *cnode) (time.Duration, error) {
		req := "tool_unload fw_tool"
		if !loaded {
			req = "tool_load fw_tool"
		}
		start := time.Now()
		_, err := ask9(n.e.p9, ctl, req, 30*time.Second)
		if err == nil {
			loaded = !loaded
		}
		return time.Since(start), err
	}
	if _, err := write(f); err != nil { // the forwarding connection is pooled now
		t.Fatal(err)
	}

	// Cut off: SIGSTOP the leader, then write through the follower.
	if err := leader.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	d, err := write(f)
	if err != nil {
		t.Fatalf("a write through %s just after the leader %s was cut off: %v after %s", f.name, leader.name, err, d)
	}
	if d > 10*time.Second {
		t.Fatalf("the write through %s took %s, beyond the 10 s write timeout", f.name, d)
	}
	// Control: the write needed the failover: another node leads now.
	now := currentLeader(t, others(nodes, leader))
	if now == leader {
		t.Fatalf("%s still leads: the write did not have to go around a lost leader", leader.name)
	}
	t.Logf("leader %s cut off; a write through %s succeeded after %s; %s leads", leader.name, f.name, d.Round(time.Millisecond), now.name)
	if err := leader.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFormed(t, 30*time.Second, nodes...)

	// SIGKILL the leader while a client keeps writing through a follower.
	leader = currentLeader(t, nodes)
	f = others(nodes, leader)[0]
	var writes, fails atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := write(f); err != nil {
				fails.Add(1)
				lastErr.Store(err.Error())
			}
			writes.Add(1)
		}
	}()
	pollUntil(t, 20*time.Second, "writes through "+f.name, func() (bool, string) { return writes.Load() >= 10, "" })
	leader.kill(t)
	killedAt := writes.Load()
	pollUntil(t, 30*time.Second, "writes through "+f.name+" after the kill", func() (bool, string) {
		return writes.Load() >= killedAt+10, fmt.Sprintf("%d writes since", writes.Load()-killedAt)
	})
	close(stop)
	<-done
	if n := fails.Load(); n > 0 {
		t.Fatalf("%d of %d writes through %s failed around the SIGKILL of %s; last: %v", n, writes.Load(), f.name, leader.name, lastErr.Load())
	}
	t.Logf("%d writes through %s, %d after %s was killed, none failed", writes.Load(), f.name, writes.Load()-killedAt, leader.name)

	// Acknowledged writes for 3 s while it is down (the leader backs off
	// replicating to it meanwhile), then restart it: its first agent
	// reads show the last of them, or say it is catching up.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if _, err := write(f); err != nil {
			t.Fatal(err)
		}
	}
	want := ""
	if loaded {
		want = "fw_tool\n"
	}
	leader.launch(t)
	leader.waitServing(t, 30*time.Second)
	var stale, caught, busy int
	for range 20 {
		got, err := read9(leader.e.p9, "session/s/agent/A/tools")
		switch {
		case err != nil && strings.Contains(err.Error(), "catching up"):
			busy++
		case err != nil:
			t.Fatalf("reading the agent on the restarted %s: %v", leader.name, err)
		case got == want:
			caught++
		default:
			stale++
			t.Errorf("the restarted %s serves A's tools %q, want %q", leader.name, got, want)
		}
	}
	t.Logf("the restarted %s: %d reads current, %d catching up, %d stale", leader.name, caught, busy, stale)
}

// createsReadBack makes sessions and agents through n, answered once the
// leader has committed them, and reads each back through n at once, on
// the connection that made it and on a new one: a walk into the agent,
// the session/ and agent/ listings, session/idx. None may miss it.
func createsReadBack(t *testing.T, n *cnode) {
	t.Helper()
	c, err := dial9(n.e.p9, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	const d = 10 * time.Second
	for i := range 25 {
		sess := fmt.Sprintf("ryw%d", i)
		if got, err := c.ask("session/new", "name="+sess, d); err != nil || got != sess+"\n" {
			t.Fatalf("session/new through %s: %q, %v", n.name, got, err)
		}
		if got, err := c.ask("session/"+sess+"/agent/new", "name=A", d); err != nil || got != "A\n" {
			t.Fatalf("session/%s/agent/new through %s: %q, %v", sess, n.name, got, err)
		}
		if got, err := c.read("session/"+sess+"/agent/A/tools", d); err != nil || got != "" {
			t.Fatalf("%s: reading back agent %s/A at once: %q, %v", n.name, sess, got, err)
		}
		if got, err := read9(n.e.p9, "session/"+sess+"/agent/A/tools"); err != nil || got != "" {
			t.Fatalf("%s: reading back agent %s/A on a new connection: %q, %v", n.name, sess, got, err)
		}
		if got, err := c.read("session/idx", d); err != nil || !slices.Contains(strings.Fields(got), sess) {
			t.Fatalf("%s: session/idx after making %s: %q, %v", n.name, sess, got, err)
		}
		for dir, want := range map[string]string{"session": sess, "session/" + sess + "/agent": "A"} {
			names, err := c.list(dir, d)
			if err != nil || !slices.Contains(names, want) {
				t.Fatalf("%s: listing %s after making %s: %v, %v", n.name, dir, want, names, err)
			}
		}
	}
}
