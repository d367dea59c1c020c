package raftfsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func pubX(desc string, time int64) PublishTools {
	exe := []byte("#!/bin/sh\necho " + desc + "\n")
	return PublishTools{Owner: "n1", Time: time, Tools: []ToolSpec{{Name: "x", Meta: metaOf(desc), ExecHash: ExecHash(exe), Size: int64(len(exe))}}}
}

func descFor(t *testing.T, f *FSM, node string) string {
	t.Helper()
	tl, ok := f.ToolFor("x", node)
	if !ok {
		t.Fatalf("no tool x for %s", node)
	}
	return string(tl.Meta)
}

// A canary makes the next publish live only on its nodes; promote makes
// it live everywhere; each is an event.
func TestCanary_PublishPromote(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, rec)
	h.ok(CmdPublishTools, pubX("one", 10))
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2", "n2"}, Publisher: "alice", Time: 11})
	// Nothing changes until the publish.
	if got := descFor(t, h.fsm, "n2"); got != string(metaOf("one")) {
		t.Fatalf("n2 before the canary publish serves %s", got)
	}
	h.ok(CmdPublishTools, pubX("two", 12))
	if got := states(history(t, h.fsm, "x")); got != "2:canary 1:live" {
		t.Fatalf("versions = %s", got)
	}
	if v, _ := history(t, h.fsm, "x").Get(2); strings.Join(v.Canary, ",") != "n2" {
		t.Fatalf("canary nodes = %v", v.Canary)
	}
	if got := descFor(t, h.fsm, "n2"); got != string(metaOf("two")) {
		t.Fatalf("canary node n2 serves %s", got)
	}
	if got := descFor(t, h.fsm, "n1"); got != string(metaOf("one")) {
		t.Fatalf("n1 serves %s, want the live version", got)
	}
	if tl, _ := h.fsm.Tool("x"); tl.Version != 1 {
		t.Fatalf("the live record is at version %d", tl.Version)
	}
	if tl, _ := h.fsm.ToolFor("x", "n2"); tl.Version != 2 {
		t.Fatalf("the canary record is at version %d", tl.Version)
	}
	if got := h.fsm.ToolsFor("n2"); len(got) != 1 || got[0].Version != 2 {
		t.Fatalf("ToolsFor(n2) = %+v", got)
	}
	r := h.ok(CmdPromote, Promote{Name: "x", Publisher: "alice", Time: 13})
	if r.Name != "2" {
		t.Fatalf("promote answered %q", r.Name)
	}
	if got := states(history(t, h.fsm, "x")); got != "2:live 1:old" {
		t.Fatalf("versions after promote = %s", got)
	}
	if got := descFor(t, h.fsm, "n1"); got != string(metaOf("two")) {
		t.Fatalf("n1 after promote serves %s", got)
	}
	if _, ok := h.fsm.Canary("x"); ok {
		t.Fatal("the canary is still pending after promote")
	}
	kinds := map[string]bool{}
	for _, e := range rec.events {
		kinds[e.Kind] = true
	}
	if !kinds["canary"] || !kinds["promote"] {
		t.Fatalf("events = %+v", rec.events)
	}
	// The next publish is live everywhere again.
	h.ok(CmdPublishTools, pubX("three", 14))
	if got := states(history(t, h.fsm, "x")); got != "3:live 2:old 1:old" {
		t.Fatalf("versions = %s", got)
	}
}

// abort marks the canary aborted and its nodes go back to the live
// version; a publish while one is pending replaces it.
func TestCanary_AbortReplace(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdPublishTools, pubX("one", 10))
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2", "n3"}, Manual: true, Time: 11})
	h.ok(CmdPublishTools, pubX("two", 12))
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 13, Name: "x", Meta: metaOf("three")})
	if got := states(history(t, h.fsm, "x")); got != "3:canary 2:aborted 1:live" {
		t.Fatalf("versions after the replacing publish = %s", got)
	}
	// The replacement builds on the canary's executable, not the live one.
	two, _ := history(t, h.fsm, "x").Get(2)
	if tl, _ := h.fsm.ToolFor("x", "n3"); tl.ExecHash != two.ExecHash || string(tl.Meta) != string(metaOf("three")) {
		t.Fatalf("n3 serves %+v", tl)
	}
	if c, _ := h.fsm.Canary("x"); !c.Manual || c.Tool.Version != 3 {
		t.Fatalf("canary = %+v", c)
	}
	h.ok(CmdAbort, Abort{Name: "x", Time: 14})
	if got := states(history(t, h.fsm, "x")); got != "3:aborted 2:aborted 1:live" {
		t.Fatalf("versions after abort = %s", got)
	}
	if got := descFor(t, h.fsm, "n3"); got != string(metaOf("one")) {
		t.Fatalf("n3 after abort serves %s", got)
	}
	// A rollback aborts a pending canary first.
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2"}, Time: 15})
	h.ok(CmdPublishTools, pubX("four", 16))
	h.ok(CmdRollback, Rollback{Name: "x", Version: 2, Owner: "n1", Time: 17})
	if got := states(history(t, h.fsm, "x")); got != "5:live 4:aborted 3:aborted 2:aborted 1:old" {
		t.Fatalf("versions after rollback = %s", got)
	}
	if got := descFor(t, h.fsm, "n2"); got != string(metaOf("two")) {
		t.Fatalf("n2 after rollback serves %s", got)
	}
	// A withdrawal aborts it too.
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2"}, Time: 18})
	h.ok(CmdPublishTools, pubX("six", 19))
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Time: 20})
	if got := states(history(t, h.fsm, "x")); !strings.HasPrefix(got, "7:withdrawn 6:aborted 5:old") {
		t.Fatalf("versions after withdrawal = %s", got)
	}
	if _, ok := h.fsm.ToolFor("x", "n2"); ok {
		t.Fatal("a withdrawn tool is still served on its canary node")
	}
}

// Bad canary commands are refused with ErrInvalid, by Validate or by the
// state check the leader makes before it appends, and change nothing.
func TestCanary_Validation(t *testing.T) {
	h := newHarness(t, nil)
	for _, c := range []struct {
		ct   CommandType
		body any
		want string
	}{
		{CmdCanary, SetCanary{Name: "x"}, "no node named"},
		{CmdCanary, SetCanary{Name: "x", Nodes: []string{"a b"}}, "bad node name"},
		{CmdCanary, SetCanary{Name: "../x", Nodes: []string{"n2"}}, "bad tool name"},
		{CmdAbort, Abort{Name: "x", Reason: "a\nb"}, "line break"},
	} {
		err := Validate(MustEncode(c.ct, c.body))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate %s %+v = %v, want %q", c.ct, c.body, err, c.want)
		}
	}
	check := func(ct CommandType, body any, want string) {
		t.Helper()
		err := h.fsm.CheckCanary(MustEncode(ct, body))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("CheckCanary %s = %v, want %q", ct, err, want)
		}
		h.fail(ct, body, ErrInvalid)
	}
	check(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2"}}, "invalid canary: tool \"x\" has no live version")
	h.ok(CmdPublishTools, pubX("one", 10))
	check(CmdPromote, Promote{Name: "x"}, "invalid promote: tool \"x\" has no canary")
	check(CmdAbort, Abort{Name: "x"}, "invalid abort: tool \"x\" has no canary")
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2"}})
	check(CmdPromote, Promote{Name: "x"}, "has no version yet")
	h.ok(CmdPublishTools, pubX("two", 12))
	check(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n3"}}, "canary version 2 pending")
	if got := states(history(t, h.fsm, "x")); got != "2:canary 1:live" {
		t.Fatalf("versions = %s", got)
	}
}

// The snapshot carries a pending canary; a snapshot of format 3 restores
// with none.
func TestCanary_Snapshot(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdPublishTools, pubX("one", 10))
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2"}})
	h.ok(CmdPublishTools, pubX("two", 12))
	snap := snapshotBytes(t, h.fsm)
	r := New(nil)
	if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if got := descFor(t, r, "n2"); got != string(metaOf("two")) {
		t.Fatalf("restored n2 serves %s", got)
	}
	if got := descFor(t, r, "n1"); got != string(metaOf("one")) {
		t.Fatalf("restored n1 serves %s", got)
	}
	v3 := bytes.Replace(snap, []byte(`"format":5`), []byte(`"format":3`), 1)
	if bytes.Equal(v3, snap) {
		t.Fatal("the snapshot does not record format 5")
	}
	old := New(nil)
	if err := old.Restore(io.NopCloser(bytes.NewReader(v3))); err != nil {
		t.Fatalf("a format-3 snapshot: %v", err)
	}
}

// Reports tally a canary's calls; Failing is the automatic abort's rule;
// a report for another version or from a node not the canary's is
// refused.
func TestCanary_Reports(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdPublishTools, pubX("one", 10))
	h.ok(CmdCanary, SetCanary{Name: "x", Nodes: []string{"n2", "n3"}})
	h.fail(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n2", Calls: 1}, ErrInvalid)
	h.ok(CmdPublishTools, pubX("two", 12))
	h.fail(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n1", Calls: 1}, ErrInvalid)
	h.fail(CmdCanaryReport, CanaryReport{Name: "x", Version: 1, Node: "n2", Calls: 1}, ErrInvalid)
	h.fail(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n2", Calls: 1, Failed: 2}, ErrInvalid)
	h.ok(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n2", Calls: 2, Failed: 2})
	h.ok(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n3", Calls: 2, Failed: 1})
	if c, _ := h.fsm.Canary("x"); c.Calls != 4 || c.Failed != 3 || c.Failing() {
		t.Fatalf("after 4 calls, 3 failed: %+v failing=%v", c, c.Failing())
	}
	h.ok(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n3", Calls: 1})
	if c, _ := h.fsm.Canary("x"); !c.Failing() {
		t.Fatalf("5 calls, 3 failed, not failing: %+v", c)
	}
	h.ok(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n3", Calls: 1})
	if c, _ := h.fsm.Canary("x"); c.Failing() {
		t.Fatalf("6 calls, 3 failed (half, not more), failing: %+v", c)
	}
	m := &Canary{Tool: &Tool{}, Manual: true, Calls: 10, Failed: 10}
	if m.Failing() {
		t.Fatal("a manual canary is failing")
	}
	if err := Validate(MustEncode(CmdCanaryReport, CanaryReport{Name: "x", Version: 2, Node: "n2"})); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a report of no calls: %v", err)
	}
}
