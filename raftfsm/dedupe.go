package raftfsm

import (
	"errors"
)

// Requests: a command proposed with an id applies once, however often it
// is proposed.
//
// A node that forwards a write and loses the answer (the leader crashed,
// the connection was cut) cannot tell whether the write was applied. To
// retry it safely, the proposer wraps the command in a request with an id
// of its own making, the same for every try: Apply applies the first entry
// with an id and records its result; a later entry with the same id
// changes nothing and returns the recorded result, so a retried create
// answers the name the first try made. The record is state, replicated and
// in snapshots, bounded to the last maxRequests ids in log order: a retry
// comes within the node's write timeout (10 s), and after a failover
// within a few seconds, before that many other requests are applied
// unless the cluster takes thousands a second throughout.
//
// The entry is the type byte CmdRequest, one byte giving the id's length,
// the id, then the wrapped command as it would be logged alone (its type
// byte and body). The body is not re-encoded, so a request is as large as
// its command plus the id.

// CmdRequest wraps a command with its proposer's id (Request). Its value is
// apart from the others so that new commands can be numbered on from
// theirs.
const CmdRequest CommandType = 0x40

// maxRequests bounds the ids the state keeps.
const maxRequests = 16384

// maxRequestID bounds an id's length.
const maxRequestID = 64

func init() {
	applyTable[CmdRequest] = applyRequest
	validators[CmdRequest] = validateRequest
	commandNames[CmdRequest] = "request"
}

// Request wraps the log entry cmd (a command's type byte and body) with
// the proposer's id: 1 to 64 letters and digits, unique to the proposal
// (random: 128 bits of crypto/rand).
func Request(id string, cmd []byte) ([]byte, error) {
	if err := checkRequestID(id); err != nil {
		return nil, err
	}
	if len(cmd) == 0 || CommandType(cmd[0]) == CmdRequest {
		return nil, refuse(ErrInvalid, "a request wraps one command that is not itself a request")
	}
	out := make([]byte, 0, 2+len(id)+len(cmd))
	out = append(out, byte(CmdRequest), byte(len(id)))
	out = append(out, id...)
	return append(out, cmd...), nil
}

// Unwrap returns the command a log entry carries: the wrapped command of
// a request, else the entry itself.
func Unwrap(entry []byte) []byte {
	if len(entry) == 0 || CommandType(entry[0]) != CmdRequest {
		return entry
	}
	if _, cmd, err := splitRequest(entry[1:]); err == nil {
		return cmd
	}
	return entry
}

// TypeOf is the type of the command a log entry carries (see Unwrap).
func TypeOf(entry []byte) CommandType {
	cmd := Unwrap(entry)
	if len(cmd) == 0 {
		return 0
	}
	return CommandType(cmd[0])
}

// splitRequest splits a request's body into its id and command.
func splitRequest(body []byte) (string, []byte, error) {
	if len(body) == 0 {
		return "", nil, errors.New("empty request")
	}
	n := int(body[0])
	if len(body) < 1+n {
		return "", nil, errors.New("request cut short in its id")
	}
	id, cmd := string(body[1:1+n]), body[1+n:]
	if err := checkRequestID(id); err != nil {
		return "", nil, err
	}
	if len(cmd) == 0 {
		return "", nil, errors.New("request without a command")
	}
	if CommandType(cmd[0]) == CmdRequest {
		return "", nil, errors.New("a request inside a request")
	}
	return id, cmd, nil
}

func checkRequestID(id string) error {
	if len(id) == 0 || len(id) > maxRequestID {
		return refuse(ErrInvalid, "a request id has 1 to %d characters, not %d", maxRequestID, len(id))
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return refuse(ErrInvalid, "a request id is letters and digits: %q", id)
		}
	}
	return nil
}

func validateRequest(body []byte, lim Limits) error {
	_, cmd, err := splitRequest(body)
	if err != nil {
		return err
	}
	return ValidateLimits(cmd, lim)
}

// applyRequest applies the wrapped command unless a request with the same
// id was applied before; either way it returns the first application's
// result.
func applyRequest(st *state, index uint64, body []byte, ev *[]Event) any {
	id, cmd, err := splitRequest(body)
	if err != nil {
		return skip("request: %v", err)
	}
	if r, ok := st.Requests.find(id); ok {
		return r.result()
	}
	fn, ok := applyTable[CommandType(cmd[0])]
	if !ok {
		return skip("request: unknown command type %d", cmd[0])
	}
	resp := fn(st, index, cmd[1:], ev)
	if err, ok := resp.(error); ok && errors.As(err, new(*skipped)) {
		return resp // not applied: nothing to remember
	}
	st.Requests.add(newRequestRecord(id, index, resp))
	return resp
}

// requestRecord is one applied request's result.
type requestRecord struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	Name  string `json:"name,omitempty"` // Result.Name
	Err   string `json:"err,omitempty"`  // a refused command's error
	Kind  string `json:"kind,omitempty"` // its sentinel, see errorKinds
}

// errorKinds name the sentinels a recorded refusal wraps.
var errorKinds = map[string]error{
	"notfound":  ErrNotFound,
	"exists":    ErrExists,
	"notloaded": ErrNotLoaded,
	"invalid":   ErrInvalid,
}

func newRequestRecord(id string, index uint64, resp any) *requestRecord {
	r := &requestRecord{ID: id, Index: index}
	switch v := resp.(type) {
	case Result:
		r.Name = v.Name
	case error:
		r.Err = v.Error()
		for k, e := range errorKinds {
			if errors.Is(v, e) {
				r.Kind = k
			}
		}
	}
	return r
}

// result is the recorded result as Apply returned it.
func (r *requestRecord) result() any {
	if r.Err == "" {
		return Result{Name: r.Name}
	}
	if kind, ok := errorKinds[r.Kind]; ok {
		return &refusal{msg: r.Err, kind: kind}
	}
	return errors.New(r.Err)
}

// requestLog is the state's record of applied requests, oldest first.
// Records are immutable; the slice is only appended to and cut from the
// front, so a snapshot's copy of it stays valid.
type requestLog struct {
	List []*requestRecord          `json:"list"`
	byID map[string]*requestRecord // derived, not stored
}

func (l *requestLog) find(id string) (*requestRecord, bool) {
	r, ok := l.byID[id]
	return r, ok
}

func (l *requestLog) add(r *requestRecord) {
	if l.byID == nil {
		l.byID = map[string]*requestRecord{}
	}
	l.List = append(l.List, r)
	l.byID[r.ID] = r
	for len(l.List) > maxRequests {
		delete(l.byID, l.List[0].ID)
		l.List[0] = nil
		l.List = l.List[1:]
	}
}

// clone copies the log for a snapshot.
func (l *requestLog) clone() requestLog {
	return requestLog{List: append([]*requestRecord(nil), l.List...)}
}

// fill derives the index of a decoded log.
func (l *requestLog) fill() {
	l.byID = make(map[string]*requestRecord, len(l.List))
	for _, r := range l.List {
		l.byID[r.ID] = r
	}
}

// RequestCount is how many request ids the state remembers.
func (f *FSM) RequestCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.st.Requests.List)
}
