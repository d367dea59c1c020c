package raftfsm

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Event is a change the FSM made, reported to the observer after each
// Apply. Kinds: tool+, tool-, agent+, agent-, load, unload. Name is the
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
	// Name is the name a create command made (generated or given).
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
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM. obs may be nil.
func New(obs Observer) *FSM {
	return &FSM{st: newState(), obs: obs, applied: make(chan struct{})}
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
}

// Apply applies one committed log entry. It panics on an entry it cannot
// decode: a replica that cannot apply the log must stop, not diverge.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("raftfsm: empty log entry at index %d", l.Index))
	}
	t := CommandType(l.Data[0])
	fn, ok := applyTable[t]
	if !ok {
		panic(fmt.Sprintf("raftfsm: unknown command type %d at index %d", l.Data[0], l.Index))
	}
	var events []Event
	f.mu.Lock()
	resp := fn(f.st, l.Index, l.Data[1:], &events)
	f.advance(l.Index)
	f.mu.Unlock()
	if f.obs != nil && len(events) > 0 {
		f.obs.Changed(events)
	}
	return resp
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

// decode unmarshals a command body or panics (see Apply).
func decode(body []byte, v any) {
	if err := json.Unmarshal(body, v); err != nil {
		panic(fmt.Sprintf("raftfsm: undecodable %T: %v", v, err))
	}
}

// Snapshot captures the state; Persist writes it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st.clone()
	st.Applied = f.index
	return &snapshot{st: st}, nil
}

// Restore replaces the whole state with a snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := newState()
	if err := json.NewDecoder(rc).Decode(st); err != nil {
		return fmt.Errorf("raftfsm: restore: %w", err)
	}
	st.fill()
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
