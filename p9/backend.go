package p9

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors the tree maps to 9P error messages. A Backend may wrap
// them with %w to add the name of what was not found.
var (
	// ErrNotFound: the named tool, profile, session or agent does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a session or agent with that name already exists.
	ErrExists = errors.New("already exists")
)

// ToolEntry is one line of t/idx: a tool visible on this node.
type ToolEntry struct {
	Name        string
	Description string
}

// Event is one line of the events file: "INDEX KIND NAME".
type Event struct {
	Index uint64
	Kind  string // tool+, tool-, agent+, agent-, load, unload, node+, node-
	Name  string
}

// Walker may be implemented by a Backend whose Agents is costly (a
// follower's read of agent state first checks that it is current with the
// leader): walks to session/S and session/S/agent/A ask it instead whether
// the name exists. A name the node has is found at once, since what the
// walk reaches reads current state when it is read; a name it has not is
// looked for again once the node is current, so a name just created
// elsewhere is never "not found". Both return nil, or an error wrapping
// ErrNotFound, or another (the node cannot answer now).
type Walker interface {
	WalkSession(session string) error
	WalkAgent(session, agent string) error
}

// Backend is what the tree serves: one small interface per part of the
// tree. The node implements it; p9 imports neither raftfsm nor cluster.
// Every method is safe for concurrent use and returns errors whose text
// is a sentence a person can act on; the tree sends that text as the 9P
// error.
type Backend interface {
	Catalog   // t/ read
	Publisher // t/ and a/ written
	Profiles  // a/ read
	EventLog  // events
	Cluster   // node, cluster/
	Sessions  // session/
	Agents    // session/S/agent/
}

// Catalog is t/ as read: the tools visible here, and every tool published.
type Catalog interface {
	// ToolIndex lists the tools visible on this node, sorted by name.
	ToolIndex() []ToolEntry
	// ToolNames lists every tool published to the cluster, sorted.
	ToolNames() []string
	// ToolMeta returns the metadata of a published tool as published.
	ToolMeta(name string) ([]byte, bool)
	// ToolExecutable returns the published executable of a tool, if any:
	// its size, and how to read it (never the whole of it in memory).
	ToolExecutable(name string) (Executable, bool)
	// ToolDoc returns the full documentation of a tool (the tools file).
	ToolDoc(name string) (string, error)
	// ToolTime is when the tool's current version (metadata or
	// executable, whichever came last) was published. The zero time when
	// unknown. Stat shows it as the file's mtime, so it must not change
	// between reads.
	ToolTime(name string) time.Time
	// ToolExecMode is the file mode of a tool's published executable
	// (e.g. 0755), as given when it was created through t/.
	ToolExecMode(name string) (uint32, bool)
}

// Publisher publishes and withdraws tools and profiles through t/ and a/.
type Publisher interface {
	// PublishToolMeta validates and publishes t/NAME.meta (the whole
	// document); an invalid one changes nothing and its error says why.
	PublishToolMeta(name string, data []byte) error
	// NewExecUpload makes the scratch file an upload of t/NAME is
	// written into (on disk: an executable can be large).
	NewExecUpload() (ExecUpload, error)
	// PublishToolExec publishes t/NAME, the executable: the first size
	// bytes of up, with its mode. It takes up over (stores or discards
	// it); a Close of up afterwards does nothing.
	PublishToolExec(name string, up ExecUpload, size int64, mode uint32) error
	// ChmodToolExec publishes a tool's executable again with a new mode.
	ChmodToolExec(name string, mode uint32) error
	// WithdrawTool removes a tool (rm t/NAME.meta) cluster-wide.
	WithdrawTool(name string) error
	// RemoveToolExec removes a tool's published executable (rm t/NAME).
	RemoveToolExec(name string) error
	// PublishProfile validates and publishes a/NAME.json.
	PublishProfile(name string, data []byte) error
	// WithdrawProfile removes a profile (rm a/NAME.json).
	WithdrawProfile(name string) error
	// MaxExecutable is the largest executable PublishToolExec takes.
	MaxExecutable() int64
}

// Profiles is a/ as read.
type Profiles interface {
	// ProfileNames lists the published agent profiles, sorted.
	ProfileNames() []string
	// Profile returns a profile as published.
	Profile(name string) ([]byte, bool)
	// ProfileTime is when the profile was published, as ToolTime.
	ProfileTime(name string) time.Time
}

// EventLog is the events file.
type EventLog interface {
	// Events returns the events with an index greater than after, blocking
	// until there is at least one or ctx is done (then it returns nil, nil).
	// LastEvent is the index of the newest event, where a new reader starts.
	Events(ctx context.Context, after uint64) ([]Event, error)
	LastEvent() uint64
}

// Cluster is the node file and cluster/.
type Cluster interface {
	// NodeInfo is the text of the node file; Members of cluster/members.
	NodeInfo() string
	Members() string
	// Where lists the nodes that can run a tool, one a line.
	Where(tool string) (string, error)
}

// Sessions is session/.
type Sessions interface {
	// Sessions lists session names, sorted; an error when the node cannot
	// answer now (e.g. catching up).
	Sessions() ([]string, error)
	// NewSession creates a session from the text written to session/new
	// ("name=S [agent=PROFILE] [cwd=DIR]") and returns its name.
	NewSession(spec string) (string, error)
	// KillSession removes a session and its agents.
	KillSession(session string) error
}

// Agents is session/S/agent/: the agents, their loaded tools, and calls.
type Agents interface {
	// Agents lists the agents of a session, sorted; ErrNotFound if the
	// session does not exist.
	Agents(session string) ([]string, error)
	// NewAgent creates an agent from "name=A [profile=P]".
	NewAgent(session, spec string) (string, error)
	// KillAgent removes an agent.
	KillAgent(session, agent string) error
	// Loaded is the agent's loaded set in load order; Rev its revision.
	Loaded(session, agent string) ([]string, error)
	Rev(session, agent string) (uint64, error)
	// Load and Unload change the loaded set.
	Load(session, agent string, names []string) error
	Unload(session, agent string, names []string) error
	// ToolsAll is the answer of tools_all for an agent: every tool the
	// cluster knows that the agent and its principal may use (DESIGN §9),
	// NAME<TAB>description<TAB>nodes, one a line.
	ToolsAll(session, agent string) string
	// Preamble is the agent's tool preamble.
	Preamble(session, agent string) (string, error)
	// Call runs a tool (or a built-in) for an agent and returns its
	// standard output. args is a JSON object.
	Call(ctx context.Context, session, agent, tool string, args []byte) ([]byte, error)
}

// CallStarter is implemented by a Backend whose calls can be checked
// before they run. StartCall makes every check that needs no run (the
// agent, the tool and whether it is loaded, the arguments against its
// schema, the session's cwd) and returns run, which runs the call once
// and returns what Call would. An error of StartCall fails the write of
// the call file; otherwise the write answers at once and the tool runs
// while the client sends its read, which waits for run and fails with
// run's error. Without it a write of the call file runs Call and answers
// when the tool has ended.
type CallStarter interface {
	StartCall(ctx context.Context, session, agent, tool string, args []byte) (run func(context.Context) ([]byte, error), err error)
}

// Executable is a published executable as the tree serves it.
type Executable struct {
	Size int64
	// Open opens it for reading at offsets.
	Open func() (ExecReader, error)
}

// ExecReader reads a published executable.
type ExecReader interface {
	io.ReaderAt
	io.Closer
}

// ExecUpload is the scratch file of an executable being written through
// t/NAME: written and read at offsets, published with
// Backend.PublishToolExec, or discarded by Close.
type ExecUpload interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Close() error
}
