package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// Caller is whom a write is made for: a principal's name (a token's,
// anon@IP) and the secret it attached with; the zero Caller is the node
// itself.
type Caller struct {
	Who   string
	Token string
}

// Config is what a Service needs of its node.
type Config struct {
	// Node is this node's name.
	Node string
	// FSM is the replicated state.
	FSM *raftfsm.FSM
	// Apply writes a command for a caller, through the leader, and
	// returns once it is applied here.
	Apply func(c Caller, t raftfsm.CommandType, body any) (raftfsm.Result, error)
	// Known reports whether a node of that name is a member (of gossip
	// or of the Raft configuration).
	Known func(name string) bool
	// Leading reports whether this node leads.
	Leading func() bool
	// Record writes an audit line (who, action, target, outcome).
	Record func(start time.Time, who, action, target string, err error)
	// Logf logs a line.
	Logf func(format string, args ...any)
	// Warnf logs a warning.
	Warnf func(format string, args ...any)
	// Now is the time a command is stamped with.
	Now func() int64
}

// Service serves a node's versions and canaries.
type Service struct {
	cfg   Config
	tally tally
}

// New makes the service of a node.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	return &Service{cfg: cfg}
}

// PublisherName is a principal as a version records it: one field of a
// v/NAME/idx line.
func PublisherName(who string) string {
	if who == "" {
		return ""
	}
	b := []byte(who)
	for i, c := range b {
		if c <= ' ' || c == 0x7f {
			b[i] = '_'
		}
	}
	if len(b) > 256 {
		b = b[:256]
	}
	if string(b) == "-" {
		return "_"
	}
	return string(b)
}

// orNode names a caller in a log line.
func orNode(who string) string {
	if who == "" {
		return "this node"
	}
	return who
}

// SetKeepVersions proposes keep as the cluster's -keep-versions when the
// state holds another; the leader calls it at the start of its term.
func (s *Service) SetKeepVersions(ctx context.Context, keep int) {
	if ctx.Err() != nil || s.cfg.FSM.KeepVersions() == keep {
		return
	}
	if _, err := s.cfg.Apply(Caller{}, raftfsm.CmdSetKeepVersions, raftfsm.SetKeepVersions{Keep: keep}); err != nil {
		s.cfg.Warnf("versions: making -keep-versions %d the cluster's: %v", keep, err)
		return
	}
	s.cfg.Logf("versions: the cluster keeps the newest %d versions of each tool, and its live one (-keep-versions)", keep)
}

// VersionedTools lists the tools with kept versions (v/).
func (s *Service) VersionedTools() []string { return s.cfg.FSM.VersionedTools() }

// ToolVersions lists a tool's kept versions, newest first (v/NAME/idx).
func (s *Service) ToolVersions(name string) ([]p9.VersionEntry, bool) {
	h, ok := s.cfg.FSM.ToolVersions(name)
	if !ok {
		return nil, false
	}
	out := make([]p9.VersionEntry, len(h.Versions))
	for i, v := range h.Versions {
		e := p9.VersionEntry{
			Version: v.Version, State: v.State, Publisher: v.Publisher, Digest: v.ExecHash,
			Size: v.ExecSize, Signer: s.cfg.FSM.SignerOf(name, v), HasMeta: v.HasContent(),
		}
		if v.Time > 0 {
			e.Time = time.Unix(0, v.Time)
		}
		out[i] = e
	}
	return out, true
}

// Version is a kept version of a tool.
func (s *Service) Version(name string, version uint64) (*raftfsm.Version, bool) {
	h, ok := s.cfg.FSM.ToolVersions(name)
	if !ok {
		return nil, false
	}
	return h.Get(version)
}

// VersionMeta is a kept version's metadata as published.
func (s *Service) VersionMeta(name string, version uint64) ([]byte, bool) {
	v, ok := s.Version(name, version)
	if !ok || !v.HasContent() {
		return nil, false
	}
	return v.Meta, true
}

// Rollback publishes a copy of a kept version as the tool's next one and
// returns the version live after it.
func (s *Service) Rollback(c Caller, name string, version uint64) (uint64, error) {
	r, err := s.cfg.Apply(c, raftfsm.CmdRollback, raftfsm.Rollback{
		Name: name, Version: version, Publisher: PublisherName(c.Who), Owner: s.cfg.Node, Time: s.cfg.Now(),
	})
	if err != nil {
		s.cfg.Logf("versions: refused the rollback of %s to version %d by %s: %v", name, version, orNode(c.Who), err)
		if !strings.HasPrefix(err.Error(), "invalid") {
			err = fmt.Errorf("rollback of %s to version %d: %w", name, version, err)
		}
		return 0, err
	}
	live, err := strconv.ParseUint(r.Name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("rollback of %s: the cluster answered %q, not a version", name, r.Name)
	}
	s.cfg.Logf("versions: %s rolled %s back to version %d: live as version %d", orNode(c.Who), name, version, live)
	return live, nil
}

// Canary marks tool name's next publish as a canary live on nodes only.
func (s *Service) Canary(c Caller, name string, nodes []string, manual bool) error {
	_, err := s.cfg.Apply(c, raftfsm.CmdCanary, raftfsm.SetCanary{
		Name: name, Nodes: nodes, Manual: manual, Publisher: PublisherName(c.Who), Time: s.cfg.Now(),
	})
	if err != nil {
		s.cfg.Logf("versions: refused the canary of %s on %s by %s: %v", name, strings.Join(nodes, ","), orNode(c.Who), err)
		return canaryErr("canary", name, err)
	}
	how := ""
	if manual {
		how = " (manual)"
	}
	s.cfg.Logf("versions: %s made the next publish of %s a canary on %s%s", orNode(c.Who), name, strings.Join(nodes, ","), how)
	return nil
}

// Promote makes tool name's canary live everywhere and returns its version.
func (s *Service) Promote(c Caller, name string) (uint64, error) {
	r, err := s.cfg.Apply(c, raftfsm.CmdPromote, raftfsm.Promote{Name: name, Publisher: PublisherName(c.Who), Time: s.cfg.Now()})
	if err != nil {
		s.cfg.Logf("versions: refused the promote of %s by %s: %v", name, orNode(c.Who), err)
		return 0, canaryErr("promote", name, err)
	}
	v, err := strconv.ParseUint(r.Name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("promote of %s: the cluster answered %q, not a version", name, r.Name)
	}
	s.cfg.Logf("versions: %s promoted the canary of %s: live everywhere as version %d", orNode(c.Who), name, v)
	return v, nil
}

// Abort drops tool name's canary: its nodes go back to the live version.
// reason, when not empty, is recorded with it.
func (s *Service) Abort(c Caller, name, reason string) error {
	_, err := s.cfg.Apply(c, raftfsm.CmdAbort, raftfsm.Abort{Name: name, Publisher: PublisherName(c.Who), Time: s.cfg.Now(), Reason: reason})
	if err != nil {
		s.cfg.Logf("versions: refused the abort of the canary of %s by %s: %v", name, orNode(c.Who), err)
		return canaryErr("abort", name, err)
	}
	s.cfg.Logf("versions: %s aborted the canary of %s", orNode(c.Who), name)
	return nil
}

// canaryErr names the command in an error that does not already say
// what was refused.
func canaryErr(cmd, name string, err error) error {
	if strings.HasPrefix(err.Error(), "invalid") || strings.HasPrefix(err.Error(), "permission denied") {
		return err
	}
	return fmt.Errorf("%s of %s: %w", cmd, name, err)
}

// Check is the leader's check of a canary, promote or abort command
// before it appends it: the state's (raftfsm.FSM.CheckCanary), and, for
// a canary, that each node it names is a member.
func (s *Service) Check(data []byte) error {
	cmd := raftfsm.Unwrap(data)
	if err := s.cfg.FSM.CheckCanary(cmd); err != nil {
		return err
	}
	if len(cmd) == 0 || raftfsm.CommandType(cmd[0]) != raftfsm.CmdCanary {
		return nil
	}
	var c raftfsm.SetCanary
	if json.Unmarshal(cmd[1:], &c) != nil {
		return nil // Validate has refused it
	}
	for _, name := range c.Nodes {
		if !s.cfg.Known(name) {
			return fmt.Errorf("%w canary: no node %s", raftfsm.ErrInvalid, name)
		}
	}
	return nil
}

// tally holds the outcomes of the canary calls run here since the last
// report, by tool.
type tally struct {
	mu  sync.Mutex
	out map[string]outcome
}

// outcome is the count of a canary version's calls not yet reported.
type outcome struct {
	version       uint64
	calls, failed int64
}
