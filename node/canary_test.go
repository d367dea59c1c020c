package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/rollout"
)

// A canary node runs the canary version while another runs the live
// one; promote makes it live on both; abort sends the canary node back.
// A canary naming no member, and promote with no canary, are refused.
func TestNode_CanaryPromoteAbort(t *testing.T) {
	root := t.TempDir()
	n1, _ := startBlobMember(t, "n1", root)
	n2, _ := startBlobMember(t, "n2", root, n1.gossip.LocalAddr())
	waitFor(t, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	fs1 := mount(t, n1.P9Addr())
	script := func(word string) []byte { return []byte("#!/bin/sh\necho " + word + "\n") }
	if err := put9(fs1, "t/c.meta", 0o644, []byte(`{"description":"c"}`)); err != nil {
		t.Fatal(err)
	}
	if err := put9Exec(fs1, "c", script("one")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	says := func(n *Node, _, want string) {
		t.Helper()
		session := "s" + n.cfg.Name
		waitFor(t, n.cfg.Name+" runs the version saying "+want, 10*time.Second, func() bool {
			out, err := n.Call(ctx, session, "a", "c", nil)
			return err == nil && strings.TrimSpace(string(out)) == want
		})
	}
	for _, n := range []*Node{n1, n2} {
		waitFor(t, n.cfg.Name+" has c", 10*time.Second, func() bool { _, ok := n.catalog.Get("c"); return ok })
		if _, err := callTool(ctx, t, n, "s"+n.cfg.Name, "c"); err != nil {
			t.Fatalf("%s: %v", n.cfg.Name, err)
		}
	}
	if err := tell(fs1, "v/c/ctl", "canary n9"); err == nil || !strings.Contains(err.Error(), "invalid canary: no node n9") {
		t.Fatalf("a canary on no member: %v", err)
	}
	if err := tell(fs1, "v/c/ctl", "promote"); err == nil || !strings.Contains(err.Error(), `invalid promote: tool "c" has no canary`) {
		t.Fatalf("promote with no canary: %v", err)
	}

	if err := tell(fs1, "v/c/ctl", "canary n2"); err != nil {
		t.Fatal(err)
	}
	if err := put9Exec(fs1, "c", script("two")); err != nil {
		t.Fatal(err)
	}
	fs2 := mount(t, n2.P9Addr())
	waitFor(t, "the canary in n2's idx", 10*time.Second, func() bool {
		return strings.HasPrefix(readFile(t, fs2, "v/c/idx"), "3 canary ")
	})
	says(n2, "s", "two")
	says(n1, "s", "one")
	// t/ on each node serves the version live for it.
	if got := readFile(t, fs2, "t/c"); got != string(script("two")) {
		t.Fatalf("n2's t/c = %q", got)
	}
	if got := readFile(t, fs1, "t/c"); got != string(script("one")) {
		t.Fatalf("n1's t/c = %q", got)
	}

	if err := tell(fs1, "v/c/ctl", "promote"); err != nil {
		t.Fatal(err)
	}
	says(n1, "s", "two")
	says(n2, "s", "two")
	if !strings.HasPrefix(readFile(t, fs1, "v/c/idx"), "3 live ") {
		t.Fatalf("idx after promote:\n%s", readFile(t, fs1, "v/c/idx"))
	}

	if err := tell(fs1, "v/c/ctl", "canary n1"); err != nil {
		t.Fatal(err)
	}
	if err := put9Exec(fs1, "c", script("three")); err != nil {
		t.Fatal(err)
	}
	says(n1, "s", "three")
	says(n2, "s", "two")
	if err := tell(fs1, "v/c/ctl", "abort"); err != nil {
		t.Fatal(err)
	}
	says(n1, "s", "two")
	if got := readFile(t, fs1, "v/c/idx"); !strings.HasPrefix(got, "4 aborted ") {
		t.Fatalf("idx after abort:\n%s", got)
	}
	waitFor(t, "canary, promote and abort among n2's events", 5*time.Second, func() bool {
		var ev []string
		for _, e := range eventsSince(ctx, n2, 0) {
			ev = append(ev, e.Kind+" "+e.Name)
		}
		return slices.Contains(ev, "canary c") && slices.Contains(ev, "promote c") && slices.Contains(ev, "abort c")
	})
}

// A canary failing more than half of at least 5 calls is aborted by the
// cluster within 5 s: its node runs the live version again, with a log
// line on the leader and the abort event. The control: the same failing
// canary marked manual stays.
func TestNode_CanaryAutoAbort(t *testing.T) {
	root := t.TempDir()
	n1, log1 := startBlobMember(t, "n1", root)
	n2, _ := startBlobMember(t, "n2", root, n1.gossip.LocalAddr())
	waitFor(t, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	fs1 := mount(t, n1.P9Addr())
	if err := put9(fs1, "t/c.meta", 0o644, []byte(`{"description":"c"}`)); err != nil {
		t.Fatal(err)
	}
	if err := put9Exec(fs1, "c", []byte("#!/bin/sh\necho fine\n")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitFor(t, "n2 has c", 10*time.Second, func() bool { _, ok := n2.catalog.Get("c"); return ok })
	if _, err := callTool(ctx, t, n2, "s", "c"); err != nil {
		t.Fatal(err)
	}
	failing := func(how string, word string) {
		t.Helper()
		if err := tell(fs1, "v/c/ctl", "canary n2"+how); err != nil {
			t.Fatal(err)
		}
		if err := put9Exec(fs1, "c", []byte("#!/bin/sh\necho "+word+" >&2\nexit 1\n")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "n2 running the canary", 10*time.Second, func() bool {
			_, err := n2.Call(ctx, "s", "a", "c", nil)
			return err != nil
		})
		for range 5 {
			n2.Call(ctx, "s", "a", "c", nil)
		}
	}

	// The control: a manual canary is not aborted.
	failing(" manual", "manual")
	deadline := time.Now().Add(3 * rollout.ReportEvery)
	for time.Now().Before(deadline) {
		c, ok := n1.fsm.Canary("c")
		if !ok {
			t.Fatal("a manual canary was aborted")
		}
		if c.Calls >= 6 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c, ok := n1.fsm.Canary("c"); !ok || c.Calls < 6 || c.Failed < 6 {
		t.Fatalf("the manual canary's reports: %+v", c)
	}
	// Two more rounds of the leader's check: still pending.
	for end := time.Now().Add(2 * rollout.ReportEvery); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, ok := n1.fsm.Canary("c"); !ok {
			t.Fatal("a manual canary was aborted")
		}
	}
	if err := tell(fs1, "v/c/ctl", "abort"); err != nil {
		t.Fatal(err)
	}

	failing("", "auto")
	begin := time.Now()
	waitFor(t, "the automatic abort", 5*time.Second, func() bool {
		_, pending := n1.fsm.Canary("c")
		return !pending
	})
	t.Logf("aborted %s after the sixth call", time.Since(begin).Round(time.Millisecond))
	out, err := n2.Call(ctx, "s", "a", "c", nil)
	if err != nil || strings.TrimSpace(string(out)) != "fine" {
		t.Fatalf("n2 after the abort: %q %v", out, err)
	}
	if !strings.Contains(log1.String(), "versions: aborted the canary of c") {
		t.Fatal("no log line for the automatic abort on the leader")
	}
	waitFor(t, "two aborts among n2's events", 5*time.Second, func() bool {
		var kinds []string
		for _, e := range eventsSince(ctx, n2, 0) {
			kinds = append(kinds, e.Kind+" "+e.Name)
		}
		return strings.Count(strings.Join(kinds, ";"), "abort c") == 2
	})
}

// eventsSince is n's events after index after, waiting within ctx for one.
func eventsSince(ctx context.Context, n *Node, after uint64) []p9.Event {
	evs, _ := n.events.Events(ctx, after)
	return evs
}
