package raftfsm

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

func states(h *History) string {
	var f []string
	for _, v := range h.Versions {
		f = append(f, fmt.Sprintf("%d:%s", v.Version, v.State))
	}
	return strings.Join(f, " ")
}

func history(t *testing.T, f *FSM, name string) *History {
	t.Helper()
	h, ok := f.ToolVersions(name)
	if !ok {
		t.Fatalf("tool %q has no versions", name)
	}
	return h
}

func metaOf(desc string) []byte { return []byte(`{"description":"` + desc + `"}`) }

// Every publish is the next version, whatever the command; a publish of
// the live content makes none; the tool records its live version.
func TestVersions_EveryPublish(t *testing.T) {
	h := newHarness(t, nil)
	exe1, exe2 := []byte("#!/bin/sh\necho 1\n"), []byte("#!/bin/sh\necho 2\n")
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Time: 10, Tools: []ToolSpec{{Name: "x", Meta: metaOf("one"), ExecHash: ExecHash(exe1), Size: int64(len(exe1))}}})
	// The same bytes again (a rescan, a restart): no version.
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Time: 11, Tools: []ToolSpec{{Name: "x", Meta: metaOf("one"), ExecHash: ExecHash(exe1), Size: int64(len(exe1))}}})
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n2", Origin: Origin9P, Time: 20, Name: "x", Meta: metaOf("two"), Publisher: "alice"})
	h.ok(CmdPutToolExec, PutToolExec{Owner: "n2", Origin: Origin9P, Time: 30, Name: "x", ExecHash: ExecHash(exe2), Size: int64(len(exe2)), Mode: 0o755, Publisher: "alice"})
	// The same digest with the default mode spelled out: no version.
	h.ok(CmdPutToolExec, PutToolExec{Owner: "n2", Origin: Origin9P, Time: 31, Name: "x", ExecHash: ExecHash(exe2), Size: int64(len(exe2)), Mode: 0o755, Publisher: "alice"})
	h.ok(CmdPutToolExec, PutToolExec{Owner: "n2", Origin: Origin9P, Time: 32, Name: "x", ExecHash: ExecHash(exe2), Size: int64(len(exe2)), Mode: 0o700, Publisher: "alice"})
	h.ok(CmdDropToolExec, DropToolExec{Name: "x", Owner: "n3", Publisher: "bob", Time: 40})
	hist := history(t, h.fsm, "x")
	if got := states(hist); got != "5:live 4:old 3:old 2:old 1:old" {
		t.Fatalf("versions = %s", got)
	}
	v1, _ := hist.Get(1)
	if v1.Publisher != "node:n1" || v1.Time != 10 || v1.ExecHash != ExecHash(exe1) || v1.ExecSize != int64(len(exe1)) || v1.Owner != "n1" || string(v1.Meta) != string(metaOf("one")) {
		t.Fatalf("version 1 = %+v", v1)
	}
	v3, _ := hist.Get(3)
	if v3.Publisher != "alice" || v3.Time != 30 || v3.ExecHash != ExecHash(exe2) || string(v3.Meta) != string(metaOf("two")) {
		t.Fatalf("version 3 = %+v", v3)
	}
	v5, _ := hist.Get(5)
	if v5.Publisher != "bob" || v5.ExecHash != "" || v5.Owner != "n3" || v5.Time != 40 {
		t.Fatalf("version 5 = %+v", v5)
	}
	if tl, _ := h.fsm.Tool("x"); tl.Version != 5 {
		t.Fatalf("the tool is live at version %d, want 5", tl.Version)
	}
	// An executable with no metadata yet is no tool: no version.
	h.ok(CmdPutToolExec, PutToolExec{Owner: "n2", Origin: Origin9P, Time: 50, Name: "y", ExecHash: ExecHash(exe1), Size: int64(len(exe1))})
	if _, ok := h.fsm.ToolVersions("y"); ok {
		t.Fatal("an executable without metadata made a version")
	}
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n2", Origin: Origin9P, Time: 51, Name: "y", Meta: metaOf("y")})
	if got := states(history(t, h.fsm, "y")); got != "1:live" {
		t.Fatalf("y's versions = %s", got)
	}
}

// The newest KeepVersions versions are kept, and the live one however
// old; the executables only dropped versions named are unreferenced.
func TestVersions_KeepLimit(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdSetKeepVersions, SetKeepVersions{Keep: 3})
	var digests []string
	for i := 1; i <= 5; i++ {
		exe := []byte(fmt.Sprintf("#!/bin/sh\necho %d\n", i))
		digests = append(digests, ExecHash(exe))
		h.ok(CmdPublishTools, PublishTools{Owner: "n1", Time: int64(i), Tools: []ToolSpec{{Name: "x", Meta: metaOf("x"), ExecHash: ExecHash(exe), Size: int64(len(exe))}}})
	}
	hist := history(t, h.fsm, "x")
	if got := states(hist); got != "5:live 4:old 3:old" || hist.Last != 5 {
		t.Fatalf("versions = %s (last %d)", got, hist.Last)
	}
	for i, d := range digests {
		if want := i >= 2; h.fsm.Referenced(d) != want {
			t.Errorf("version %d's executable referenced = %v, want %v", i+1, !want, want)
		}
	}
	if got := len(h.fsm.KeptExecs()); got != 3 {
		t.Fatalf("kept executables = %d, want 3", got)
	}
	// Roll back to 3: it is live again as 6; then publish past the bound.
	h.ok(CmdRollback, Rollback{Name: "x", Version: 3, Publisher: "alice", Owner: "n2", Time: 6})
	if got := states(history(t, h.fsm, "x")); got != "6:live 5:old 4:old" {
		t.Fatalf("after the rollback: %s", got)
	}
	// Lowering the bound drops at once.
	h.ok(CmdSetKeepVersions, SetKeepVersions{Keep: 1})
	if got := states(history(t, h.fsm, "x")); got != "6:live" {
		t.Fatalf("with keep 1: %s", got)
	}
	if h.fsm.KeepVersions() != 1 {
		t.Fatalf("keep = %d", h.fsm.KeepVersions())
	}
	h.fail(CmdSetKeepVersions, SetKeepVersions{Keep: 0}, ErrInvalid)
	// With keep 1, a withdrawal keeps the withdrawn version only; the
	// live one is gone with it.
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Publisher: "alice", Time: 7})
	if got := states(history(t, h.fsm, "x")); got != "7:withdrawn" {
		t.Fatalf("after the withdrawal with keep 1: %s", got)
	}
	for _, d := range digests {
		if h.fsm.Referenced(d) {
			t.Fatalf("executable %s still referenced", d[:8])
		}
	}
}

// A rollback publishes a copy of a kept version as the next one; one to
// a version not kept, or to a withdrawal, changes nothing.
func TestVersions_Rollback(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, rec)
	exe := []byte("#!/bin/sh\necho 1\n")
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Time: 1, Tools: []ToolSpec{{Name: "x", Meta: metaOf("one"), ExecHash: ExecHash(exe), Size: int64(len(exe)), Mode: 0o750}}})
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 2, Name: "x", Meta: metaOf("two")})
	h.ok(CmdDropToolExec, DropToolExec{Name: "x", Time: 3})
	rec.events = nil
	r := h.ok(CmdRollback, Rollback{Name: "x", Version: 1, Publisher: "alice", Owner: "n2", Time: 4})
	if r.Name != "4" {
		t.Fatalf("the rollback answered %q, want version 4", r.Name)
	}
	tl, _ := h.fsm.Tool("x")
	if tl.Version != 4 || string(tl.Meta) != string(metaOf("one")) || tl.ExecHash != ExecHash(exe) || tl.ExecMode != 0o750 || tl.Owner != "n2" || tl.Time != 4 {
		t.Fatalf("tool after the rollback = %+v", tl)
	}
	hist := history(t, h.fsm, "x")
	v4, _ := hist.Get(4)
	if v4.From != 1 || v4.Publisher != "alice" || v4.State != StateLive || states(hist) != "4:live 3:old 2:old 1:old" {
		t.Fatalf("history = %s, v4 = %+v", states(hist), v4)
	}
	want := []Event{{h.index, "rollback", "x"}, {h.index, "tool+", "x"}}
	if !reflect.DeepEqual(rec.events, want) {
		t.Fatalf("events = %v, want %v", rec.events, want)
	}
	// To the live content: nothing changes.
	before := snapshotBytes(t, h.fsm)
	if r := h.ok(CmdRollback, Rollback{Name: "x", Version: 1, Owner: "n2", Time: 5}); r.Name != "4" {
		t.Fatalf("a rollback to the live content answered %q", r.Name)
	}
	after := bytes.Replace(snapshotBytes(t, h.fsm), appliedField(h.index), appliedField(h.index-1), 1)
	if !bytes.Equal(before, after) {
		t.Fatal("a rollback to the live content changed the state")
	}
	// Not kept, unknown tool, a withdrawal: refused, nothing changed.
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Time: 6})
	for _, bad := range []Rollback{
		{Name: "x", Version: 99, Owner: "n2", Time: 7},
		{Name: "x", Version: 5, Owner: "n2", Time: 7},
		{Name: "nope", Version: 1, Owner: "n2", Time: 7},
	} {
		before := snapshotBytes(t, h.fsm)
		r := h.apply(CmdRollback, bad)
		err, isErr := r.(error)
		if !isErr || !strings.HasPrefix(err.Error(), "invalid rollback: ") {
			t.Fatalf("rollback %+v: %v", bad, r)
		}
		after := bytes.Replace(snapshotBytes(t, h.fsm), appliedField(h.index), appliedField(h.index-1), 1)
		if !bytes.Equal(before, after) {
			t.Fatalf("a refused rollback (%v) changed the state", err)
		}
	}
	// A rollback brings a withdrawn tool back.
	h.ok(CmdRollback, Rollback{Name: "x", Version: 2, Owner: "n2", Time: 8})
	if tl, ok := h.fsm.Tool("x"); !ok || tl.Version != 6 || string(tl.Meta) != string(metaOf("two")) {
		t.Fatalf("after rolling a withdrawn tool back: %+v, %v", tl, ok)
	}
	if got := states(history(t, h.fsm, "x")); got != "6:live 5:withdrawn 4:old 3:old 2:old 1:old" {
		t.Fatalf("history = %s", got)
	}
}

// rm t/NAME.meta records a withdrawn version; publishing again makes the
// next one. A directory withdrawal of another node's tool records
// nothing.
func TestVersions_Withdrawn(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 1, Name: "x", Meta: metaOf("x"), Publisher: "alice"})
	h.ok(CmdWithdrawTools, WithdrawTools{Owner: "n2", Origin: OriginDir, Names: []string{"x"}, Time: 2})
	if got := states(history(t, h.fsm, "x")); got != "1:live" {
		t.Fatalf("after another node's directory withdrawal: %s", got)
	}
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Publisher: "bob", Time: 3})
	hist := history(t, h.fsm, "x")
	w, _ := hist.Get(2)
	if states(hist) != "2:withdrawn 1:old" || w.Publisher != "bob" || w.Time != 3 || w.HasContent() || w.ExecHash != "" {
		t.Fatalf("history = %s, withdrawn = %+v", states(hist), w)
	}
	if _, ok := h.fsm.Tool("x"); ok {
		t.Fatal("the tool is still in t/")
	}
	if got := h.fsm.VersionedTools(); !reflect.DeepEqual(got, []string{"x"}) {
		t.Fatalf("versioned tools = %v", got)
	}
	// Withdrawing again records nothing more.
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Time: 4})
	if got := states(history(t, h.fsm, "x")); got != "2:withdrawn 1:old" {
		t.Fatalf("after a second withdrawal: %s", got)
	}
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 5, Name: "x", Meta: metaOf("x"), Publisher: "alice"})
	if got := states(history(t, h.fsm, "x")); got != "3:live 2:withdrawn 1:old" {
		t.Fatalf("after publishing again: %s", got)
	}
}

// Versions and the bound are in the snapshot; a snapshot of the format
// before versions restores with each published tool at version 1.
func TestVersions_Snapshot(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdSetKeepVersions, SetKeepVersions{Keep: 4})
	for i := 1; i <= 3; i++ {
		h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: int64(i), Name: "x", Meta: metaOf(fmt.Sprint(i)), Publisher: "alice"})
	}
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Time: 4})
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 5, Name: "y", Meta: metaOf("y")})
	snap := snapshotBytes(t, h.fsm)
	r := New(nil)
	if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), snap) {
		t.Fatal("the restored state snapshots differently")
	}
	if got := states(history(t, r, "x")); got != "4:withdrawn 3:old 2:old 1:old" || r.KeepVersions() != 4 {
		t.Fatalf("restored x = %s, keep %d", got, r.KeepVersions())
	}
	// The next version continues the numbering on the restored replica
	// as on the original.
	for _, f := range []*FSM{h.fsm, r} {
		hh := &harness{t: t, fsm: f, index: h.index}
		hh.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 6, Name: "x", Meta: metaOf("6")})
	}
	if !bytes.Equal(snapshotBytes(t, r), snapshotBytes(t, h.fsm)) {
		t.Fatal("the replicas diverged after the restore")
	}

	// Format 1: no versions in it.
	old := newHarness(t, nil)
	old.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 9, Name: "z", Meta: metaOf("z")})
	v1 := snapshotBytes(t, old.fsm)
	v1 = bytes.Replace(v1, []byte(`"format":5`), []byte(`"format":1`), 1)
	i := bytes.Index(v1, []byte(`,"versions":`))
	j := bytes.Index(v1, []byte(`,"lastSession"`))
	if i < 0 || j < i {
		t.Fatalf("unexpected snapshot layout: %s", v1)
	}
	v1 = append(v1[:i:i], v1[j:]...)
	v1 = bytes.Replace(v1, []byte(`,"version":1`), nil, 1)
	up := New(nil)
	if err := up.Restore(io.NopCloser(bytes.NewReader(v1))); err != nil {
		t.Fatal(err)
	}
	if got := states(history(t, up, "z")); got != "1:live" {
		t.Fatalf("a format-1 tool's versions = %s", got)
	}
	if tl, _ := up.Tool("z"); tl.Version != 1 {
		t.Fatalf("a format-1 tool is live at %d", tl.Version)
	}
	if !bytes.Equal(snapshotBytes(t, up), snapshotBytes(t, old.fsm)) {
		t.Fatalf("the upgraded state differs:\n%s\n%s", snapshotBytes(t, up), snapshotBytes(t, old.fsm))
	}
}

// Bad version commands are refused before they are appended.
func TestVersions_Validate(t *testing.T) {
	for name, e := range map[string][]byte{
		"version 0":        MustEncode(CmdRollback, Rollback{Name: "x", Owner: "n1", Time: 1}),
		"bad name":         MustEncode(CmdRollback, Rollback{Name: "a/b", Version: 1, Owner: "n1", Time: 1}),
		"no owner":         MustEncode(CmdRollback, Rollback{Name: "x", Version: 1, Time: 1}),
		"space publisher":  MustEncode(CmdRollback, Rollback{Name: "x", Version: 1, Owner: "n1", Publisher: "a b", Time: 1}),
		"dash publisher":   MustEncode(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Name: "x", Meta: metaOf("x"), Publisher: "-"}),
		"newline pub":      MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Publisher: "a\nb", Tools: []ToolSpec{{Name: "x", Meta: metaOf("x")}}}),
		"keep 0":           MustEncode(CmdSetKeepVersions, SetKeepVersions{}),
		"keep too many":    MustEncode(CmdSetKeepVersions, SetKeepVersions{Keep: MaxKeepVersions + 1}),
		"negative time":    MustEncode(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}, Time: -1}),
		"long publisher":   MustEncode(CmdDropToolExec, DropToolExec{Name: "x", Publisher: strings.Repeat("p", maxOwner+1)}),
		"rollback unknown": append([]byte{byte(CmdRollback)}, `{"name":"x","version":1,"owner":"n1","time":1,"x":1}`...),
	} {
		if err := Validate(e); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
