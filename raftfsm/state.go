package raftfsm

import (
	"errors"
	"fmt"
	"maps"
	"sort"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/signing"
)

// Errors a refused command returns through the Raft future. They wrap
// with %w so callers can test them with errors.Is.
var (
	// ErrNotFound: a named tool, profile, session or agent does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a session or agent of that name already exists.
	ErrExists = errors.New("already exists")
	// ErrNotLoaded: unloading a tool the agent has not loaded.
	ErrNotLoaded = errors.New("not loaded")
	// ErrInvalid: a name or value the command may not carry.
	ErrInvalid = errors.New("invalid")
)

// refusal is a refused command's error: a sentence for people that still
// matches its sentinel with errors.Is.
type refusal struct {
	msg  string
	kind error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.kind }

func refuse(kind error, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), kind: kind}
}

// Tool is a published tool. Stored records are never modified in place:
// an update stores a new record. Callers must not modify what they get.
type Tool struct {
	Name     string `json:"name"`
	Meta     []byte `json:"meta"`
	ExecHash string `json:"execHash,omitempty"`
	ExecMode uint32 `json:"execMode,omitempty"`
	// ExecSize is the executable's length (0: published before sizes
	// were recorded).
	ExecSize int64  `json:"execSize,omitempty"`
	Owner    string `json:"owner"`
	Origin   string `json:"origin,omitempty"` // OriginDir or Origin9P
	// Index is the Raft index of the command that last published it.
	Index uint64 `json:"index"`
	// Time is when it was published (stamped by the proposer).
	Time int64 `json:"time"`
	// Version is the number of its live version (versions.go); 0 for a
	// tool that is not published yet.
	Version uint64 `json:"version,omitempty"`
	// Sig is the live version's armored SSH signature (empty: unsigned);
	// Signer the trusted key that signed it when it was published.
	Sig    []byte `json:"sig,omitempty"`
	Signer string `json:"signer,omitempty"`
}

// Profile is a published agent profile; immutable like Tool.
type Profile struct {
	Name     string   `json:"name"`
	Data     []byte   `json:"data"`
	AutoLoad []string `json:"autoLoad,omitempty"`
	// Tools, when set, limits the tools an agent made from the profile
	// may load and call (glob patterns, acl.Matches).
	Tools  []string `json:"tools,omitempty"`
	Owner  string   `json:"owner"`
	Origin string   `json:"origin,omitempty"`
	Index  uint64   `json:"index"`
	// Time is when it was published (stamped by the proposer; 0 for a
	// profile published before the field existed).
	Time int64 `json:"time,omitempty"`
}

// Published reports whether the tool has metadata: a tool whose
// executable came first is not a tool yet.
func (t *Tool) Published() bool { return len(t.Meta) > 0 }

// Agent is one agent of a session; immutable like Tool.
type Agent struct {
	Name    string `json:"name"`
	Profile string `json:"profile,omitempty"`
	// Tools is the allow-list of the profile it was made from, as it was
	// then (nil: every tool).
	Tools []string `json:"tools,omitempty"`
	// Limit is the allow-list of the token that made it (nil: none).
	Limit  []string `json:"limit,omitempty"`
	Loaded []string `json:"loaded"`
	Rev    uint64   `json:"rev"`
}

// Allows reports whether the agent's lists allow tool: its profile's and
// its maker's token's (DESIGN §9).
func (a *Agent) Allows(tool string) bool { return acl.Allowed(tool, a.Tools, a.Limit) }

// IsLoaded reports whether the agent has loaded tool.
func (a *Agent) IsLoaded(tool string) bool {
	for _, n := range a.Loaded {
		if n == tool {
			return true
		}
	}
	return false
}

// Session holds agents. Its other fields are fixed once stored, but its
// Agents map is changed in place as agents are made, changed and killed
// (a copy per change made creating N agents cost O(N²)), so it is read
// only under the FSM's lock: a Session given out (FSM.Session) or kept
// in a snapshot (state.clone) is a copy with a map of its own. Agents are
// immutable like Tool.
type Session struct {
	Name    string            `json:"name"`
	Owner   string            `json:"owner,omitempty"` // "": made before sessions had owners
	Cwd     string            `json:"cwd,omitempty"`
	Created int64             `json:"created"`
	Agents  map[string]*Agent `json:"agents"`
}

// AgentNames lists the session's agents, sorted.
func (s *Session) AgentNames() []string {
	return sortedKeys(s.Agents)
}

// copy is a Session with an Agents map of its own.
func (s *Session) copy() *Session {
	n := *s
	n.Agents = make(map[string]*Agent, len(s.Agents))
	maps.Copy(n.Agents, s.Agents)
	return &n
}

// SnapshotFormat is the version of the snapshot's encoding (state as
// JSON); a snapshot records it, and Restore refuses any other but 1, the
// format before versions, whose published tools it takes as version 1,
// 2, the format before trusted keys, which it restores with none, and 3,
// the format before canaries, which it restores with none pending. A
// build that knows only format 3 refuses a snapshot of format 4, so a
// node of an older build never restores the trusted keys or a canary
// away. Format 5 adds the upstream MCP servers (servers.go); 4 is
// restored with none.
const SnapshotFormat = 5

// snapshotFormatV1 is the format before tools had versions;
// snapshotFormatV2 the format before trusted keys; snapshotFormatV3 the
// format before canaries.
const (
	snapshotFormatV1 = 1
	snapshotFormatV2 = 2
	snapshotFormatV3 = 3
	snapshotFormatV4 = 4
)

// state is everything the FSM holds. It is also the snapshot format.
type state struct {
	// Format is SnapshotFormat in a snapshot; 0 in the live state.
	Format   int                 `json:"format,omitempty"`
	Tools    map[string]*Tool    `json:"tools"`
	Profiles map[string]*Profile `json:"profiles"`
	Sessions map[string]*Session `json:"sessions"`
	// Tokens are the 9P tokens by name (tokens.go).
	Tokens map[string]*Token `json:"tokens,omitempty"`
	// Versions are every tool's kept versions (versions.go), also of
	// tools withdrawn; KeepVersions is how many are kept (0: the
	// default).
	Versions     map[string]*History `json:"versions,omitempty"`
	KeepVersions int                 `json:"keepVersions,omitempty"`
	// Trust are the trusted publisher keys by name (trust.go).
	Trust map[string]*TrustedKey `json:"trust,omitempty"`
	// Canaries are the tools' pending canaries by tool (canary.go).
	Canaries map[string]*Canary `json:"canaries,omitempty"`
	// Servers are the upstream MCP server definitions (servers.go).
	Servers map[string]*Server `json:"servers,omitempty"`
	// LastSession and LastAgent number generated names ("s1", "a1").
	LastSession uint64 `json:"lastSession"`
	LastAgent   uint64 `json:"lastAgent"`
	// Applied is the index of the last entry applied, as of a snapshot.
	Applied uint64 `json:"applied"`
	// Requests are the ids of the last requests applied, with their
	// results (dedupe.go).
	Requests requestLog `json:"requests"`

	// byHash finds a token by the hash of its secret; derived, not stored.
	byHash map[string]*Token
	// keys are Trust's keys parsed, sorted by name; derived, not stored.
	keys []*signing.Key
}

func newState() *state {
	return &state{
		Tools:    map[string]*Tool{},
		Profiles: map[string]*Profile{},
		Sessions: map[string]*Session{},
		Tokens:   map[string]*Token{},
		Versions: map[string]*History{},
		Trust:    map[string]*TrustedKey{},
		Canaries: map[string]*Canary{},
		Servers:  map[string]*Server{},
		byHash:   map[string]*Token{},
	}
}

// clone is a shallow copy, safe because records are immutable, but for
// each session's Agents map, which is copied (see Session).
func (s *state) clone() *state {
	c := &state{
		Tools:        make(map[string]*Tool, len(s.Tools)),
		Profiles:     make(map[string]*Profile, len(s.Profiles)),
		Sessions:     make(map[string]*Session, len(s.Sessions)),
		LastSession:  s.LastSession,
		LastAgent:    s.LastAgent,
		Requests:     s.Requests.clone(),
		Tokens:       make(map[string]*Token, len(s.Tokens)),
		Versions:     maps.Clone(s.Versions),
		KeepVersions: s.KeepVersions,
		Trust:        maps.Clone(s.Trust),
		Canaries:     maps.Clone(s.Canaries),
		Servers:      maps.Clone(s.Servers),
		keys:         s.keys,
		byHash:       make(map[string]*Token, len(s.byHash)),
	}
	for k, v := range s.Tokens {
		c.Tokens[k] = v
		c.byHash[v.Hash] = v
	}
	for k, v := range s.Tools {
		c.Tools[k] = v
	}
	for k, v := range s.Profiles {
		c.Profiles[k] = v
	}
	for k, v := range s.Sessions {
		c.Sessions[k] = v.copy()
	}
	return c
}

// fill makes nil maps empty (a decoded snapshot may lack some).
func (s *state) fill() {
	if s.Tools == nil {
		s.Tools = map[string]*Tool{}
	}
	if s.Profiles == nil {
		s.Profiles = map[string]*Profile{}
	}
	if s.Sessions == nil {
		s.Sessions = map[string]*Session{}
	}
	for _, se := range s.Sessions {
		if se.Agents == nil {
			se.Agents = map[string]*Agent{}
		}
	}
	if s.Tokens == nil {
		s.Tokens = map[string]*Token{}
	}
	if s.Versions == nil {
		s.Versions = map[string]*History{}
	}
	if s.Trust == nil {
		s.Trust = map[string]*TrustedKey{}
	}
	if s.Canaries == nil {
		s.Canaries = map[string]*Canary{}
	}
	if s.Servers == nil {
		s.Servers = map[string]*Server{}
	}
	s.rekey()
	s.byHash = make(map[string]*Token, len(s.Tokens))
	for _, t := range s.Tokens {
		s.byHash[t.Hash] = t
	}
	s.Requests.fill()
}

// setTool stores t (nil removes name). The executables tools refer to are
// outside the state: a node's blob store keeps them, and collects those no
// tool refers to any more.
func (s *state) setTool(name string, t *Tool) {
	if t == nil {
		delete(s.Tools, name)
		return
	}
	s.Tools[name] = t
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
