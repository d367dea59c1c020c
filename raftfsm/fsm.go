package raftfsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/hashicorp/raft"
)

// Event is a change the FSM made, reported to the observer after each
// Apply. Kinds: tool+, tool-, agent+, agent-, load, unload, rollback,
// canary, promote, abort,
// trust+, trust- (a key's name). Name is the
// tool name; "S/A" for agents; "S/A/TOOL" for load and unload.
type Event struct {
	Index uint64
	Kind  string
	Name  string
}

// Observer hears about changes. Both methods are called from the Raft
// goroutine after the FSM's lock is released; they must not block for
// long and must not call back into Raft.
type Observer interface {
	// Changed reports the events of one applied entry.
	Changed(events []Event)
	// Restored reports that the whole state was replaced by a snapshot.
	Restored()
}

// Result is what a successful command returns through the Raft future.
type Result struct {
	// Name is the name a create command made (generated or given); for
	// a rollback, the number of the version live after it.
	Name string
}

// FSM is toolnode's raft.FSM. Reads through its accessor methods are safe
// concurrently with Apply.
type FSM struct {
	mu      sync.RWMutex
	st      *state
	index   uint64        // last applied index
	applied chan struct{} // closed and replaced when index moves
	obs     Observer
	logf    func(format string, args ...any)
	// verdicts are TrustError's answers (trust.go).
	verdicts verdicts
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM. obs may be nil.
func New(obs Observer) *FSM {
	return &FSM{st: newState(), obs: obs, applied: make(chan struct{}), logf: log.Printf}
}

// applyFunc applies one decoded command body at a log index, appending
// the events it causes. It returns the command's response: a Result or an
// error value (never a panic for a refused command).
type applyFunc func(st *state, index uint64, body []byte, ev *[]Event) any

var applyTable = map[CommandType]applyFunc{
	CmdPublishTools:     applyPublishTools,
	CmdWithdrawTools:    applyWithdrawTools,
	CmdPublishProfiles:  applyPublishProfiles,
	CmdWithdrawProfiles: applyWithdrawProfiles,
	CmdCreateSession:    applyCreateSession,
	CmdKillSession:      applyKillSession,
	CmdCreateAgent:      applyCreateAgent,
	CmdKillAgent:        applyKillAgent,
	CmdLoad:             applyLoad,
	CmdUnload:           applyUnload,
	CmdPutToolMeta:      applyPutToolMeta,
	CmdPutToolExec:      applyPutToolExec,
	CmdDropToolExec:     applyDropToolExec,
	CmdPutToken:         applyPutToken,
	CmdRevokeToken:      applyRevokeToken,
	CmdSetKeepVersions:  applySetKeepVersions,
	CmdRollback:         applyRollback,
	CmdAddKey:           applyAddKey,
	CmdRemoveKey:        applyRemoveKey,
	CmdCanary:           applyCanary,
	CmdPromote:          applyPromote,
	CmdAbort:            applyAbort,
	CmdCanaryReport:     applyCanaryReport,
}

// Apply applies one committed log entry and returns a Result or an error
// value. It never panics: an entry it cannot apply (empty, of an unknown
// type, with a body it cannot decode, or one whose apply function fails
// unexpectedly) is skipped with one log line and an error wrapping
// ErrInvalid, leaving the state as it was. The leader refuses such
// entries before they are appended (Validate), so one in the log was
// written around it; skipping it the same way on every node keeps the
// replicas identical and the cluster up.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var events []Event
	f.mu.Lock()
	resp := f.applyEntry(l, &events)
	f.advance(l.Index)
	f.mu.Unlock()
	if err, ok := resp.(error); ok && errors.As(err, new(*skipped)) {
		f.logf("raftfsm: skipped the log entry at index %d: %v", l.Index, err)
	}
	if f.obs != nil && len(events) > 0 {
		f.obs.Changed(events)
	}
	return resp
}

// applyEntry dispatches one entry; f.mu is held.
func (f *FSM) applyEntry(l *raft.Log, ev *[]Event) (resp any) {
	if len(l.Data) == 0 {
		return skip("empty entry")
	}
	t := CommandType(l.Data[0])
	fn, ok := applyTable[t]
	if !ok {
		return skip("unknown command type %d", l.Data[0])
	}
	defer func() {
		// A bug in an apply function fails the same way on every node:
		// the entry is skipped, not the node stopped. What the function
		// changed before it failed stays changed, on every node alike.
		if r := recover(); r != nil {
			*ev = nil
			resp = skip("%s command failed: %v", t, r)
		}
	}()
	return fn(f.st, l.Index, l.Data[1:], ev)
}

// skipped is the error of an entry Apply skipped: it wraps ErrInvalid.
type skipped struct{ msg string }

func (e *skipped) Error() string { return e.msg }
func (e *skipped) Unwrap() error { return ErrInvalid }

func skip(format string, args ...any) error {
	return &skipped{msg: fmt.Sprintf(format, args...)}
}

// SetLogf sets where the FSM logs the entries it skips (default
// log.Printf). Call it before the FSM is given to Raft.
func (f *FSM) SetLogf(logf func(format string, args ...any)) {
	f.logf = logf
}

// advance records the last applied index and wakes WaitApplied; f.mu is
// held.
func (f *FSM) advance(index uint64) {
	f.index = index
	close(f.applied)
	f.applied = make(chan struct{})
}

// WaitApplied blocks until the entry at index has been applied here, or
// done is closed (then it reports false). A follower uses it to read its
// own write back: the leader answers with the index the write got.
func (f *FSM) WaitApplied(index uint64, done <-chan struct{}) bool {
	for {
		f.mu.RLock()
		reached, ch := f.index >= index, f.applied
		f.mu.RUnlock()
		if reached {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// decode unmarshals a command body; an undecodable one is skipped (see
// Apply). It is lenient where Validate is strict: an entry the leader
// accepted applies alike on every node, whatever version validated it.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return skip("undecodable %T: %v", v, err)
	}
	return nil
}

// Snapshot captures the state; Persist writes it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st.clone()
	st.Applied = f.index
	st.Format = SnapshotFormat
	return &snapshot{st: st}, nil
}

// Restore replaces the whole state with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := newState()
	if err := json.NewDecoder(rc).Decode(st); err != nil {
		return fmt.Errorf("raftfsm: restore: %w", err)
	}
	if st.Format != SnapshotFormat && st.Format != snapshotFormatV1 && st.Format != snapshotFormatV2 && st.Format != snapshotFormatV3 && st.Format != snapshotFormatV4 {
		return fmt.Errorf("raftfsm: restore: a snapshot of format %d; this build reads formats %d to %d", st.Format, snapshotFormatV1, SnapshotFormat)
	}
	st.fill()
	if st.Format == snapshotFormatV1 {
		st.versionsFromTools()
	}
	f.mu.Lock()
	f.st = st
	f.advance(st.Applied)
	f.mu.Unlock()
	if f.obs != nil {
		f.obs.Restored()
	}
	return nil
}

type snapshot struct{ st *state }

// Persist encodes the captured state as JSON into the sink.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	enc := json.NewEncoder(sink)
	if err := enc.Encode(s.st); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftfsm: persist: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
