package raftfsm

import (
	"bytes"
	b64 "encoding/base64"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

type recorder struct {
	mu       sync.Mutex
	events   []Event
	restored int
}

func (r *recorder) Changed(ev []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev...)
}

func (r *recorder) Restored() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restored++
}

// harness applies commands at increasing indexes.
type harness struct {
	t     testing.TB
	fsm   *FSM
	index uint64
	log   []*raft.Log
}

func newHarness(t testing.TB, obs Observer) *harness {
	return &harness{t: t, fsm: New(obs)}
}

func (h *harness) apply(ct CommandType, body any) any {
	h.index++
	l := &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: MustEncode(ct, body)}
	h.log = append(h.log, l)
	return h.fsm.Apply(l)
}

func (h *harness) ok(ct CommandType, body any) Result {
	h.t.Helper()
	r := h.apply(ct, body)
	if err, isErr := r.(error); isErr {
		h.t.Fatalf("%s: unexpected error %v", ct, err)
	}
	return r.(Result)
}

func (h *harness) fail(ct CommandType, body any, want error) {
	h.t.Helper()
	r := h.apply(ct, body)
	err, isErr := r.(error)
	if !isErr {
		h.t.Fatalf("%s: succeeded, want error %v", ct, want)
	}
	if !errors.Is(err, want) {
		h.t.Fatalf("%s: error %v, want %v", ct, err, want)
	}
}

func tools(names ...string) PublishTools {
	p := PublishTools{Owner: "n1", Time: 1}
	for _, n := range names {
		p.Tools = append(p.Tools, ToolSpec{Name: n, Meta: []byte(`{"description":"` + n + `"}`)})
	}
	return p
}

func TestFSM_PublishWithdrawOwnership(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, rec)
	h.ok(CmdPublishTools, tools("a", "b"))
	if tl, ok := h.fsm.Tool("a"); !ok || tl.Owner != "n1" || tl.Index != 1 {
		t.Fatalf("tool a = %+v, %v", tl, ok)
	}
	// Another node publishes b: last write wins, b now owned by n2.
	h.ok(CmdPublishTools, PublishTools{Owner: "n2", Tools: []ToolSpec{{Name: "b", Meta: []byte(`{}`)}}})
	// n1's watcher withdraws a and b: only a is n1's.
	h.ok(CmdWithdrawTools, WithdrawTools{Owner: "n1", Names: []string{"a", "b"}})
	if _, ok := h.fsm.Tool("a"); ok {
		t.Fatal("a still published")
	}
	if tl, ok := h.fsm.Tool("b"); !ok || tl.Owner != "n2" {
		t.Fatalf("b = %+v, %v; want owned by n2", tl, ok)
	}
	// A withdrawal without owner removes whatever owns it.
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"b"}})
	if len(h.fsm.Tools()) != 0 {
		t.Fatalf("tools left: %v", h.fsm.Tools())
	}
	want := []Event{{1, "tool+", "a"}, {1, "tool+", "b"}, {2, "tool+", "b"}, {3, "tool-", "a"}, {4, "tool-", "b"}}
	if !reflect.DeepEqual(rec.events, want) {
		t.Fatalf("events = %v, want %v", rec.events, want)
	}
	h.fail(CmdPublishTools, tools("bad/name"), ErrInvalid)
}

// The log names executables by digest and size; the state holds no
// bytes.
func TestFSM_ExecByDigest(t *testing.T) {
	h := newHarness(t, nil)
	hash := ExecHash([]byte("#!/bin/sh\necho hi\n"))
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{
		{Name: "x", Meta: []byte(`{}`), ExecHash: hash, Size: 18},
		{Name: "y", Meta: []byte(`{}`), ExecHash: hash, Size: 18},
	}})
	if tl, _ := h.fsm.Tool("x"); tl.ExecHash != hash || tl.ExecSize != 18 {
		t.Fatalf("tool x = %+v", tl)
	}
	if !h.fsm.Referenced(hash) {
		t.Fatal("the digest is not referenced")
	}
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}})
	if !h.fsm.Referenced(hash) {
		t.Fatal("y still refers to it")
	}
	h.ok(CmdPublishTools, PublishTools{Tools: []ToolSpec{{Name: "y", Meta: []byte(`{}`)}}})
	if !h.fsm.Referenced(hash) {
		t.Fatal("the kept versions of x and y still refer to it")
	}
	h.ok(CmdSetKeepVersions, SetKeepVersions{Keep: 1})
	if h.fsm.Referenced(hash) {
		t.Fatal("no tool or kept version refers to it any more")
	}
	if snap := snapshotBytes(t, h.fsm); bytes.Contains(snap, []byte(`"blobs"`)) {
		t.Fatalf("the snapshot holds blobs: %s", snap)
	}
}

// A snapshot records its format; Restore takes this build's (and the
// formats before versions and before trusted keys) and refuses any other, naming them, with the
// state left as it was.
func TestFSM_SnapshotFormat(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdCreateSession, CreateSession{Name: "s"})
	snap := snapshotBytes(t, h.fsm)
	if !bytes.Contains(snap, []byte(`"format":5`)) {
		t.Fatalf("the snapshot does not record its format: %s", snap)
	}
	r := New(nil)
	if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !r.HasSession("s") {
		t.Fatal("the restored state lacks the session")
	}
	for _, bad := range [][]byte{
		bytes.Replace(snap, []byte(`"format":5`), []byte(`"format":6`), 1),
		bytes.Replace(snap, []byte(`"format":5,`), nil, 1),
	} {
		err := r.Restore(io.NopCloser(bytes.NewReader(bad)))
		if err == nil || !strings.Contains(err.Error(), "this build reads formats 1 to 5") {
			t.Fatalf("a snapshot of another format: %v", err)
		}
		if !r.HasSession("s") {
			t.Fatal("a refused snapshot changed the state")
		}
	}
}

func base64(b []byte) string {
	var buf bytes.Buffer
	enc := b64.NewEncoder(b64.StdEncoding, &buf)
	enc.Write(b)
	enc.Close()
	return buf.String()
}

func TestFSM_SessionsAgentsLoad(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, rec)
	h.ok(CmdPublishTools, tools("read", "grep", "write"))
	h.ok(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{
		{Name: "coder", Data: []byte(`{}`), AutoLoad: []string{"read", "grep", "missing"}},
	}})
	if r := h.ok(CmdCreateSession, CreateSession{Name: "dev", Cwd: "/w", Profile: "coder", Time: 5}); r.Name != "dev" {
		t.Fatalf("session name %q", r.Name)
	}
	a, err := h.fsm.Agent("dev", "coder")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Loaded, []string{"read", "grep"}) || a.Rev != 2 {
		t.Fatalf("autoLoad agent = %+v", a)
	}
	h.fail(CmdCreateSession, CreateSession{Name: "dev"}, ErrExists)
	h.fail(CmdCreateSession, CreateSession{Name: "new"}, ErrInvalid)
	h.fail(CmdCreateSession, CreateSession{Name: "x", Profile: "nope"}, ErrNotFound)
	if _, ok := h.fsm.Session("x"); ok {
		t.Fatal("failed create left a session")
	}
	if r := h.ok(CmdCreateSession, CreateSession{}); r.Name != "s1" {
		t.Fatalf("generated session %q", r.Name)
	}
	if r := h.ok(CmdCreateAgent, CreateAgent{Session: "dev"}); r.Name != "a1" {
		t.Fatalf("generated agent %q", r.Name)
	}

	h.ok(CmdLoad, Load{Session: "dev", Agent: "a1", Names: []string{"write", "read"}})
	h.ok(CmdLoad, Load{Session: "dev", Agent: "a1", Names: []string{"write"}}) // no change
	a, _ = h.fsm.Agent("dev", "a1")
	if !reflect.DeepEqual(a.Loaded, []string{"write", "read"}) || a.Rev != 2 {
		t.Fatalf("after load: %+v", a)
	}
	// All or nothing: an unknown name refuses the whole command.
	h.fail(CmdLoad, Load{Session: "dev", Agent: "a1", Names: []string{"grep", "nope"}}, ErrNotFound)
	h.fail(CmdUnload, Load{Session: "dev", Agent: "a1", Names: []string{"read", "grep"}}, ErrNotLoaded)
	a, _ = h.fsm.Agent("dev", "a1")
	if len(a.Loaded) != 2 || a.Rev != 2 {
		t.Fatalf("refused command changed the agent: %+v", a)
	}
	h.ok(CmdUnload, Unload{Session: "dev", Agent: "a1", Names: []string{"write"}})
	a, _ = h.fsm.Agent("dev", "a1")
	if !reflect.DeepEqual(a.Loaded, []string{"read"}) || a.Rev != 3 {
		t.Fatalf("after unload: %+v", a)
	}
	h.fail(CmdLoad, Load{Session: "nope", Agent: "a1", Names: []string{"read"}}, ErrNotFound)
	h.fail(CmdLoad, Load{Session: "dev", Agent: "nope", Names: []string{"read"}}, ErrNotFound)

	h.ok(CmdKillAgent, KillAgent{Session: "dev", Name: "a1"})
	h.fail(CmdKillAgent, KillAgent{Session: "dev", Name: "a1"}, ErrNotFound)
	h.ok(CmdKillSession, KillSession{Name: "dev"})
	h.fail(CmdKillSession, KillSession{Name: "dev"}, ErrNotFound)
	if got := h.fsm.SessionNames(); !reflect.DeepEqual(got, []string{"s1"}) {
		t.Fatalf("sessions = %v", got)
	}

	kinds := map[string]int{}
	for _, e := range rec.events {
		kinds[e.Kind]++
	}
	want := map[string]int{"tool+": 3, "agent+": 2, "agent-": 2, "load": 4, "unload": 1}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("event kinds = %v, want %v", kinds, want)
	}
}

// An entry Apply cannot apply is skipped: an error value wrapping
// ErrInvalid, one log line, the state unchanged, the index advanced.
func TestFSM_SkipsBadEntry(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"unknown type", []byte{99, '{', '}'}},
		{"type 0xff", []byte{0xff, '{', '}'}},
		{"bad body", []byte{byte(CmdLoad), '{'}},
		{"body of the wrong shape", []byte{byte(CmdPublishTools), '[', ']'}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.ok(CmdPublishTools, tools("a"))
			before := snapshotBytes(t, h.fsm)
			var logged []string
			h.fsm.SetLogf(func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
			r := h.fsm.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: tc.data})
			err, ok := r.(error)
			if !ok || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Apply = %v, want an error wrapping ErrInvalid", r)
			}
			if len(logged) != 1 || !strings.Contains(logged[0], "index 2") {
				t.Fatalf("log lines %q, want one naming index 2", logged)
			}
			if h.fsm.LastIndex() != 2 {
				t.Fatalf("applied index %d, want 2", h.fsm.LastIndex())
			}
			// The same state, but for the applied index.
			after := snapshotBytes(t, h.fsm)
			if !bytes.Equal(bytes.Replace(after, []byte(`"applied":2`), []byte(`"applied":1`), 1), before) {
				t.Fatalf("state changed:\n%s\n%s", before, after)
			}
		})
	}
}

// bufSink is a raft.SnapshotSink over a buffer.
type bufSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { s.cancelled = true; return nil }
func (s *bufSink) Close() error  { return nil }

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink.Bytes()
}

// bigState builds a state with n tools and m agents (m/10 sessions).
func bigState(t testing.TB, n, m int) *harness {
	h := newHarness(t, nil)
	exe := []byte("#!/bin/sh\ncat\n")
	exeHash := ExecHash(exe)
	batch := PublishTools{Owner: "n1", Time: 1}
	for i := 0; i < n; i++ {
		ts := ToolSpec{Name: fmt.Sprintf("tool%05d", i), Meta: []byte(fmt.Sprintf(`{"description":"tool %d"}`, i))}
		if i%100 == 0 {
			ts.ExecHash, ts.Size = exeHash, int64(len(exe))
		}
		batch.Tools = append(batch.Tools, ts)
	}
	h.ok(CmdPublishTools, batch)
	for s := 0; s < m/10; s++ {
		sess := fmt.Sprintf("sess%d", s)
		h.ok(CmdCreateSession, CreateSession{Name: sess, Time: int64(s)})
		for a := 0; a < 10; a++ {
			agent := fmt.Sprintf("agent%d", a)
			h.ok(CmdCreateAgent, CreateAgent{Session: sess, Name: agent})
			h.ok(CmdLoad, Load{Session: sess, Agent: agent, Names: []string{
				fmt.Sprintf("tool%05d", (s*10+a)%n), fmt.Sprintf("tool%05d", (s*10+a+1)%n)}})
		}
	}
	return h
}

func TestFSM_SnapshotRestoreLargeState(t *testing.T) {
	h := bigState(t, 10000, 1000)
	before := snapshotBytes(t, h.fsm)

	rec := &recorder{}
	restored := New(rec)
	restored.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: MustEncode(CmdPublishTools, tools("stale"))})
	if err := restored.Restore(io.NopCloser(bytes.NewReader(before))); err != nil {
		t.Fatal(err)
	}
	if rec.restored != 1 {
		t.Fatal("observer not told of the restore")
	}
	if _, ok := restored.Tool("stale"); ok {
		t.Fatal("restore kept previous state")
	}
	if got := len(restored.Tools()); got != 10000 {
		t.Fatalf("restored %d tools", got)
	}
	a, err := restored.Agent("sess99", "agent9")
	if err != nil || a.Rev != 2 || len(a.Loaded) != 2 {
		t.Fatalf("restored agent = %+v, %v", a, err)
	}
	if after := snapshotBytes(t, restored); !bytes.Equal(before, after) {
		t.Fatal("snapshot of the restored FSM differs from the original")
	}
	// Withdrawing all tools that share the executable leaves it
	// unreferenced.
	tl, _ := restored.Tool("tool00000")
	var names []string
	for _, x := range restored.Tools() {
		if x.ExecHash == tl.ExecHash {
			names = append(names, x.Name)
		}
	}
	restored.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: MustEncode(CmdWithdrawTools, WithdrawTools{Names: names})})
	restored.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: MustEncode(CmdSetKeepVersions, SetKeepVersions{Keep: 1})})
	if restored.Referenced(tl.ExecHash) {
		t.Fatal("the executable is still referenced after the withdrawal of every tool using it")
	}
}

// Two replicas applying the same log end with identical snapshots.
func TestFSM_Deterministic(t *testing.T) {
	h := bigState(t, 500, 100)
	h.ok(CmdUnload, Unload{Session: "sess3", Agent: "agent1", Names: []string{"tool00031"}})
	h.ok(CmdKillSession, KillSession{Name: "sess4"})
	replica := New(nil)
	for _, l := range h.log {
		replica.Apply(l)
	}
	if !bytes.Equal(snapshotBytes(t, h.fsm), snapshotBytes(t, replica)) {
		t.Fatal("replicas diverged")
	}
}

// A snapshot is a point-in-time view: later applies do not change it.
func TestFSM_SnapshotIsolation(t *testing.T) {
	h := newHarness(t, nil)
	h.ok(CmdPublishTools, tools("a"))
	h.ok(CmdCreateSession, CreateSession{Name: "s"})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "x"})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "gone"})
	snap, _ := h.fsm.Snapshot()
	given, _ := h.fsm.Session("s")
	h.ok(CmdLoad, Load{Session: "s", Agent: "x", Names: []string{"a"}})
	h.ok(CmdPublishTools, tools("b"))
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "later"})
	h.ok(CmdKillAgent, KillAgent{Session: "s", Name: "gone"})
	if got := given.AgentNames(); !slices.Equal(got, []string{"gone", "x"}) {
		t.Fatalf("a session given out before saw later writes: agents %v", got)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	f := New(nil)
	if err := f.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	a, _ := f.Agent("s", "x")
	if len(a.Loaded) != 0 || len(f.Tools()) != 1 {
		t.Fatalf("snapshot saw later writes: agent %+v, %d tools", a, len(f.Tools()))
	}
	if got, _ := f.AgentNames("s"); !slices.Equal(got, []string{"gone", "x"}) {
		t.Fatalf("snapshot saw later writes: agents %v", got)
	}
}

// BenchmarkFSM_CreateAgent makes and kills one agent in a session that
// has n others: the cost must not grow with n (agents are changed in
// place, not by copying the session's map).
func BenchmarkFSM_CreateAgent(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			h := newHarness(b, nil)
			h.ok(CmdCreateSession, CreateSession{Name: "s"})
			for i := range n {
				h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: fmt.Sprintf("a%d", i)})
			}
			create := MustEncode(CmdCreateAgent, CreateAgent{Session: "s", Name: "fresh"})
			kill := MustEncode(CmdKillAgent, KillAgent{Session: "s", Name: "fresh"})
			index := uint64(n + 10)
			b.ResetTimer()
			for range b.N {
				for _, d := range [][]byte{create, kill} {
					index++
					if r := h.fsm.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: d}); r != nil {
						if err, ok := r.(error); ok {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}

func BenchmarkFSM_ApplyLoad(b *testing.B) {
	h := newHarness(b, nil)
	h.ok(CmdPublishTools, tools("a", "b"))
	h.ok(CmdCreateSession, CreateSession{Name: "s"})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "x"})
	load := MustEncode(CmdLoad, Load{Session: "s", Agent: "x", Names: []string{"a"}})
	unload := MustEncode(CmdUnload, Unload{Session: "s", Agent: "x", Names: []string{"a"}})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := load
		if i%2 == 1 {
			d = unload
		}
		h.fsm.Apply(&raft.Log{Index: uint64(i + 10), Type: raft.LogCommand, Data: d})
	}
}

func TestFSM_WaitApplied(t *testing.T) {
	h := newHarness(t, nil)
	done := make(chan struct{})
	got := make(chan bool)
	go func() { got <- h.fsm.WaitApplied(2, done) }()
	h.ok(CmdPublishTools, tools("a"))
	select {
	case <-got:
		t.Fatal("WaitApplied(2) returned at index 1")
	default:
	}
	h.ok(CmdPublishTools, tools("b"))
	if !<-got {
		t.Fatal("WaitApplied(2) failed at index 2")
	}
	close(done)
	if h.fsm.WaitApplied(3, done) {
		t.Fatal("WaitApplied(3) succeeded at index 2")
	}
	// A replica restored from a snapshot knows the index it reached.
	r := New(nil)
	var sink bufSink
	snap, _ := h.fsm.Snapshot()
	snap.Persist(&sink)
	if err := r.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	if r.LastIndex() != 2 || !r.WaitApplied(2, done) {
		t.Fatalf("restored index = %d", r.LastIndex())
	}
}

func TestFSM_PublishByFileAndOrigins(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, rec)
	exe := []byte("#!/bin/sh\necho x\n")
	// The executable first (cp tool tool.meta): not a tool yet.
	h.ok(CmdPutToolExec, PutToolExec{Owner: "n2", Origin: Origin9P, Name: "x", ExecHash: ExecHash(exe), Size: int64(len(exe)), Mode: 0o750})
	h.ok(CmdCreateSession, CreateSession{Name: "s"})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "a"})
	h.fail(CmdLoad, Load{Session: "s", Agent: "a", Names: []string{"x"}}, ErrNotFound)
	if len(rec.events) != 1 || rec.events[0].Kind != "agent+" {
		t.Fatalf("events before the metadata: %v", rec.events)
	}
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n2", Origin: Origin9P, Name: "x", Meta: []byte(`{}`)})
	tl, _ := h.fsm.Tool("x")
	if tl.ExecHash != ExecHash(exe) || tl.ExecMode != 0o750 || tl.Origin != Origin9P || !tl.Published() {
		t.Fatalf("tool after meta = %+v", tl)
	}
	h.ok(CmdLoad, Load{Session: "s", Agent: "a", Names: []string{"x"}})
	// n2's watcher withdraws only what it published from its directory.
	h.ok(CmdWithdrawTools, WithdrawTools{Owner: "n2", Origin: OriginDir, Names: []string{"x"}})
	if _, ok := h.fsm.Tool("x"); !ok {
		t.Fatal("a directory withdrawal removed a tool published through 9P")
	}
	h.ok(CmdDropToolExec, DropToolExec{Name: "x"})
	tl, _ = h.fsm.Tool("x")
	if tl.ExecHash != "" || !tl.Published() {
		t.Fatalf("after dropping the executable: %+v", tl)
	}
	if !h.fsm.Referenced(ExecHash(exe)) {
		t.Fatal("the dropped executable is not referenced by the version that had it")
	}
	h.ok(CmdSetKeepVersions, SetKeepVersions{Keep: 1})
	if h.fsm.Referenced(ExecHash(exe)) {
		t.Fatal("the dropped executable is still referenced")
	}
	h.fail(CmdDropToolExec, DropToolExec{Name: "x"}, ErrNotFound)
	h.fail(CmdPutToolMeta, PutToolMeta{Name: "y"}, ErrInvalid)
	h.ok(CmdWithdrawTools, WithdrawTools{Names: []string{"x"}})
	if len(h.fsm.Tools()) != 0 {
		t.Fatal("rm did not withdraw")
	}
}
