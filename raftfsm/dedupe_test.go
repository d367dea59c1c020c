package raftfsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

// applyRaw applies one log entry as it is.
func (h *harness) applyRaw(entry []byte) any {
	h.index++
	l := &raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: entry}
	h.log = append(h.log, l)
	return h.fsm.Apply(l)
}

func request(t testing.TB, id string, ct CommandType, body any) []byte {
	t.Helper()
	b, err := Request(id, MustEncode(ct, body))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A create proposed twice with one id (a retry after a lost answer) makes
// one session and answers its name both times; the control: the same
// command proposed twice without an id makes two.
func TestRequest_AppliesOnce(t *testing.T) {
	h := newHarness(t, nil)
	entry := request(t, "r1", CmdCreateSession, CreateSession{Time: 1})
	first, again := h.applyRaw(entry), h.applyRaw(entry)
	if first != (Result{Name: "s1"}) || again != first {
		t.Fatalf("answers %v and %v, want s1 twice", first, again)
	}
	if got := h.fsm.SessionNames(); len(got) != 1 {
		t.Fatalf("sessions %v after a retried create, want one", got)
	}

	// The agent create likewise; a named one answers its name, not "exists".
	h.ok(CmdCreateSession, CreateSession{Name: "s", Time: 1})
	entry = request(t, "r2", CmdCreateAgent, CreateAgent{Session: "s", Name: "A"})
	for range 2 {
		if r := h.applyRaw(entry); r != (Result{Name: "A"}) {
			t.Fatalf("retried agent create: %v, want A", r)
		}
	}

	// Control: without an id the retry is a second create.
	c := newHarness(t, nil)
	plain := MustEncode(CmdCreateSession, CreateSession{Time: 1})
	c.applyRaw(plain)
	c.applyRaw(plain)
	if got := c.fsm.SessionNames(); len(got) != 2 {
		t.Fatalf("control: sessions %v, want two without ids", got)
	}
	named := MustEncode(CmdCreateSession, CreateSession{Name: "x", Time: 1})
	c.applyRaw(named)
	if r, _ := c.applyRaw(named).(error); !errors.Is(r, ErrExists) {
		t.Fatalf("control: a named create retried without an id: %v, want ErrExists", r)
	}
}

// A refused request is refused alike when retried, with its sentinel.
func TestRequest_RefusalRecorded(t *testing.T) {
	h := newHarness(t, nil)
	entry := request(t, "r1", CmdCreateAgent, CreateAgent{Session: "nope", Name: "A"})
	for range 2 {
		if err, _ := h.applyRaw(entry).(error); !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	}
	// The session appears; the retried request still answers as the
	// first time (it was refused then), and makes nothing.
	h.ok(CmdCreateSession, CreateSession{Name: "nope", Time: 1})
	if err, _ := h.applyRaw(entry).(error); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after the session appeared: %v, want the recorded ErrNotFound", err)
	}
	if s, _ := h.fsm.Session("nope"); len(s.Agents) != 0 {
		t.Fatalf("a retried request applied again: agents %v", s.AgentNames())
	}
}

// The record is in snapshots: a replica restored from one still applies a
// retried request once; and replicas that replay the same log agree byte
// for byte.
func TestRequest_SnapshotAndDeterminism(t *testing.T) {
	h := newHarness(t, nil)
	entry := request(t, "r1", CmdCreateSession, CreateSession{Time: 1})
	h.applyRaw(entry)
	r := New(nil)
	if err := r.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.fsm)))); err != nil {
		t.Fatal(err)
	}
	if got := r.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: entry}); got != (Result{Name: "s1"}) {
		t.Fatalf("restored replica: %v, want s1", got)
	}
	if got := r.SessionNames(); len(got) != 1 {
		t.Fatalf("restored replica: sessions %v, want one", got)
	}
	h.applyRaw(entry)
	if !bytes.Equal(snapshotBytes(t, h.fsm), snapshotBytes(t, r)) {
		t.Fatal("a restored replica and the original diverged")
	}
	replica := New(nil)
	for _, l := range h.log {
		replica.Apply(l)
	}
	if !bytes.Equal(snapshotBytes(t, h.fsm), snapshotBytes(t, replica)) {
		t.Fatal("replicas diverged")
	}
}

// The record is bounded: the oldest ids are forgotten first.
func TestRequest_Bounded(t *testing.T) {
	h := newHarness(t, nil)
	first := request(t, "r0", CmdCreateSession, CreateSession{Time: 1})
	h.applyRaw(first)
	for i := 1; i <= maxRequests; i++ {
		h.applyRaw(request(t, fmt.Sprintf("r%d", i), CmdKillSession, KillSession{Name: "none"}))
	}
	if got := h.fsm.RequestCount(); got != maxRequests {
		t.Fatalf("%d ids kept, want %d", got, maxRequests)
	}
	if got := h.applyRaw(first); got != (Result{Name: "s2"}) {
		t.Fatalf("a forgotten id applied as %v, want a new session s2", got)
	}
}

func TestRequest_Validate(t *testing.T) {
	cmd := MustEncode(CmdKillSession, KillSession{Name: "s"})
	good, err := Request("abc123", cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(good); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	if TypeOf(good) != CmdKillSession || !bytes.Equal(Unwrap(good), cmd) {
		t.Fatalf("TypeOf %v, Unwrap %q", TypeOf(good), Unwrap(good))
	}
	bad := map[string][]byte{
		"empty id":           append([]byte{byte(CmdRequest), 0}, cmd...),
		"id cut short":       {byte(CmdRequest), 9, 'a'},
		"id not alnum":       append([]byte{byte(CmdRequest), 3, 'a', '/', 'b'}, cmd...),
		"no command":         {byte(CmdRequest), 1, 'a'},
		"nested":             append([]byte{byte(CmdRequest), 1, 'a'}, good...),
		"invalid command":    append([]byte{byte(CmdRequest), 1, 'a'}, MustEncode(CmdKillSession, KillSession{Name: "../x"})...),
		"unknown command":    {byte(CmdRequest), 1, 'a', 200, '{', '}'},
		"nothing after type": {byte(CmdRequest)},
	}
	for name, entry := range bad {
		if err := Validate(entry); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
		// Apply refuses or skips it, never panics.
		h := newHarness(t, nil)
		if _, isErr := h.applyRaw(entry).(error); !isErr {
			t.Errorf("%s: applied", name)
		}
	}
	if _, err := Request("a", good); err == nil {
		t.Error("Request wrapped a request")
	}
}
