package raftfsm

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/toolnode/toolnode/registry"
)

// Canaries (DESIGN §8). `canary` marks a tool's next publish as a canary:
// the version it makes is live only on the canary's nodes, and the tool's
// live version (st.Tools) stays what every other node serves. `promote`
// makes the canary the live version everywhere; `abort` marks it aborted
// and its nodes go back to the live version. A tool has one canary at
// most; a publish while one is pending replaces its version (the old one
// is aborted), and a rollback or a withdrawal aborts it first.

// Canary is a tool's pending canary; immutable like Tool.
type Canary struct {
	Name string `json:"name"`
	// Nodes are the nodes it is live on, sorted.
	Nodes []string `json:"nodes"`
	// Manual turns the cluster's automatic abort off.
	Manual bool `json:"manual,omitempty"`
	// Tool is the canary version's record (Tool.Version its number); nil
	// until the publish that makes it.
	Tool *Tool `json:"tool,omitempty"`
	// Publisher, Time and Index are the canary command's.
	Publisher string `json:"publisher,omitempty"`
	Time      int64  `json:"time"`
	Index     uint64 `json:"index"`
	// Calls and Failed count the canary version's calls its nodes have
	// reported, and those that failed (CanaryReport).
	Calls  int64 `json:"calls,omitempty"`
	Failed int64 `json:"failed,omitempty"`
}

// The automatic abort's rule: at least FailMinCalls calls, more than
// half of them failed.
const FailMinCalls = 5

// Failing reports whether the cluster aborts the canary: not manual, and
// at least FailMinCalls calls reported of which more than half failed.
func (c *Canary) Failing() bool {
	return c != nil && c.Tool != nil && !c.Manual && c.Calls >= FailMinCalls && 2*c.Failed > c.Calls
}

// On reports whether the canary is live on node.
func (c *Canary) On(node string) bool {
	return c != nil && c.Tool != nil && slices.Contains(c.Nodes, node)
}

// MaxCanaryNodes bounds the nodes one canary names.
const MaxCanaryNodes = 64

// SetCanary is `canary NODE[,NODE] [manual]` in v/NAME/ctl.
type SetCanary struct {
	Name      string   `json:"name"`
	Nodes     []string `json:"nodes"`
	Manual    bool     `json:"manual,omitempty"`
	Publisher string   `json:"publisher,omitempty"`
	Time      int64    `json:"time"`
}

// Promote makes a tool's canary its live version everywhere.
type Promote struct {
	Name      string `json:"name"`
	Publisher string `json:"publisher,omitempty"`
	Time      int64  `json:"time"`
}

// Abort drops a tool's canary. Reason says why, for the log (empty: asked
// for).
type Abort struct {
	Name      string `json:"name"`
	Publisher string `json:"publisher,omitempty"`
	Time      int64  `json:"time"`
	Reason    string `json:"reason,omitempty"`
}

// CanaryReport is a canary node's report of the outcomes of the calls of
// a canary version it ran since its last report.
type CanaryReport struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
	Node    string `json:"node"`
	Calls   int64  `json:"calls"`
	Failed  int64  `json:"failed"`
}

// maxReportCalls bounds one report's counts.
const maxReportCalls = 1 << 30

// base is the record a publish of name builds on: its canary version's
// while one is pending, else its live record.
func (s *state) base(name string) (*Tool, bool) {
	if c := s.Canaries[name]; c != nil && c.Tool != nil {
		return c.Tool, true
	}
	t, ok := s.Tools[name]
	return t, ok
}

// putTool stores t as what a publish made of tool name and records its
// version: the live one, or, while a canary is pending, the canary's.
func (s *state) putTool(name string, t *Tool, index uint64, publisher string, time int64) {
	c := s.Canaries[name]
	live, hasLive := s.Tools[name]
	if c == nil || !t.Published() || !hasLive || !live.Published() {
		if c != nil {
			s.abortCanary(name)
		}
		s.setTool(name, t)
		t.Version = s.recordVersion(name, index, publisher, time, 0)
		return
	}
	if lv, ok := s.Versions[name].Live(); ok && sameContent(t, lv) {
		// The live version's content: no canary of it.
		t.Version = lv.Version
		return
	}
	if c.Tool != nil {
		if cv, ok := s.Versions[name].Get(c.Tool.Version); ok && sameContent(t, cv) {
			t.Version = cv.Version
			return
		}
	}
	h := s.Versions[name]
	n := &History{Name: name, Last: h.Last + 1, Versions: make([]*Version, 0, len(h.Versions)+1)}
	v := &Version{
		Version: n.Last, State: StateCanary, Meta: t.Meta, ExecHash: t.ExecHash, ExecSize: t.ExecSize, ExecMode: t.ExecMode,
		Owner: t.Owner, Sig: t.Sig, Signer: t.Signer, Publisher: publisher, Time: time, Index: index, Canary: c.Nodes,
	}
	n.Versions = append(n.Versions, v)
	for _, old := range h.Versions {
		if old.State == StateCanary {
			o := *old
			o.State = StateAborted
			old = &o
		}
		n.Versions = append(n.Versions, old)
	}
	s.Versions[name] = n.trimmed(s.keep())
	t.Version = v.Version
	nc := *c
	nc.Tool = t
	s.Canaries[name] = &nc
}

// abortCanary drops tool name's canary, its version aborted.
func (s *state) abortCanary(name string) {
	c := s.Canaries[name]
	if c == nil {
		return
	}
	delete(s.Canaries, name)
	if c.Tool != nil {
		s.setState(name, c.Tool.Version, StateAborted)
	}
}

// setState stores tool name's history with version n in state to.
func (s *state) setState(name string, n uint64, to string) {
	h := s.Versions[name]
	if h == nil {
		return
	}
	nh := &History{Name: name, Last: h.Last, Versions: make([]*Version, len(h.Versions))}
	for i, v := range h.Versions {
		if v.Version == n || (to == StateLive && v.State == StateLive) {
			c := *v
			if v.Version == n {
				c.State = to
			} else {
				c.State = StateOld
			}
			v = &c
		}
		nh.Versions[i] = v
	}
	s.Versions[name] = nh.trimmed(s.keep())
}

// canaryErr is the state's refusal of a canary command, or nil.
func (s *state) canaryErr(t CommandType, name string) error {
	c := s.Canaries[name]
	switch t {
	case CmdCanary:
		if lt, ok := s.Tools[name]; !ok || !lt.Published() {
			return refuse(ErrInvalid, "invalid canary: tool %q has no live version: publish it first", name)
		}
		if c != nil && c.Tool != nil {
			return refuse(ErrInvalid, "invalid canary: tool %q has canary version %d pending: promote or abort it first", name, c.Tool.Version)
		}
	case CmdPromote:
		if c == nil {
			return refuse(ErrInvalid, "invalid promote: tool %q has no canary", name)
		}
		if c.Tool == nil {
			return refuse(ErrInvalid, "invalid promote: the canary of tool %q has no version yet: publish it first", name)
		}
	case CmdAbort:
		if c == nil {
			return refuse(ErrInvalid, "invalid abort: tool %q has no canary", name)
		}
	}
	return nil
}

func applyCanary(st *state, index uint64, body []byte, ev *[]Event) any {
	var c SetCanary
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	nodes, err := canaryNodes(c.Nodes)
	if err != nil {
		return refuse(ErrInvalid, "invalid canary: %v", err)
	}
	if err := st.canaryErr(CmdCanary, c.Name); err != nil {
		return err
	}
	st.Canaries[c.Name] = &Canary{
		Name: c.Name, Nodes: nodes, Manual: c.Manual, Publisher: c.Publisher, Time: c.Time, Index: index,
	}
	*ev = append(*ev, Event{index, "canary", c.Name})
	return Result{}
}

func applyPromote(st *state, index uint64, body []byte, ev *[]Event) any {
	var c Promote
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if err := st.canaryErr(CmdPromote, c.Name); err != nil {
		return err
	}
	cn := st.Canaries[c.Name]
	delete(st.Canaries, c.Name)
	st.setTool(c.Name, cn.Tool)
	st.setState(c.Name, cn.Tool.Version, StateLive)
	*ev = append(*ev, Event{index, "promote", c.Name}, Event{index, "tool+", c.Name})
	return Result{Name: strconv.FormatUint(cn.Tool.Version, 10)}
}

func applyAbort(st *state, index uint64, body []byte, ev *[]Event) any {
	var c Abort
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if err := st.canaryErr(CmdAbort, c.Name); err != nil {
		return err
	}
	had := st.Canaries[c.Name].Tool != nil
	st.abortCanary(c.Name)
	*ev = append(*ev, Event{index, "abort", c.Name})
	if had {
		*ev = append(*ev, Event{index, "tool+", c.Name})
	}
	return Result{}
}

func applyCanaryReport(st *state, index uint64, body []byte, ev *[]Event) any {
	var c CanaryReport
	if err := decode(body, &c); err != nil {
		return err
	}
	cn := st.Canaries[c.Name]
	if cn == nil || cn.Tool == nil || cn.Tool.Version != c.Version {
		return refuse(ErrInvalid, "invalid canary report: tool %q has no canary version %d", c.Name, c.Version)
	}
	if !slices.Contains(cn.Nodes, c.Node) {
		return refuse(ErrInvalid, "invalid canary report: %s is not a node of the canary of tool %q", c.Node, c.Name)
	}
	if c.Calls < 1 || c.Calls > maxReportCalls || c.Failed < 0 || c.Failed > c.Calls {
		return refuse(ErrInvalid, "invalid canary report: %d calls, %d failed", c.Calls, c.Failed)
	}
	n := *cn
	n.Calls += c.Calls
	n.Failed += c.Failed
	st.Canaries[c.Name] = &n
	return Result{}
}

func validateCanaryReport(body []byte, lim Limits) error {
	var c CanaryReport
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if err := registry.ValidName(c.Node); err != nil {
		return fmt.Errorf("bad node name %q: %v", c.Node, err)
	}
	if c.Version == 0 {
		return fmt.Errorf("version 0 of tool %q: versions count from 1", c.Name)
	}
	if c.Calls < 1 || c.Calls > maxReportCalls || c.Failed < 0 || c.Failed > c.Calls {
		return fmt.Errorf("%d calls, %d failed: between 1 and %d calls, at most as many failed", c.Calls, c.Failed, maxReportCalls)
	}
	return nil
}

// canaryNodes checks a canary's node names and returns them sorted, each
// once.
func canaryNodes(nodes []string) ([]string, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no node named")
	}
	if len(nodes) > MaxCanaryNodes {
		return nil, fmt.Errorf("%d nodes: at most %d", len(nodes), MaxCanaryNodes)
	}
	for _, n := range nodes {
		if err := registry.ValidName(n); err != nil {
			return nil, fmt.Errorf("bad node name %q: %v", n, err)
		}
	}
	out := slices.Clone(nodes)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func validateCanary(body []byte, lim Limits) error {
	var c SetCanary
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if _, err := canaryNodes(c.Nodes); err != nil {
		return err
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	return checkTime(c.Time)
}

func validatePromote(body []byte, lim Limits) error {
	var c Promote
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	return checkTime(c.Time)
}

func validateAbort(body []byte, lim Limits) error {
	var c Abort
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if len(c.Reason) > maxOwner || strings.ContainsAny(c.Reason, "\n\r") {
		return fmt.Errorf("reason of %d bytes or with a line break: one line of at most %d", len(c.Reason), maxOwner)
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	return checkTime(c.Time)
}

// CheckCanary is the leader's check, before it appends it, of a canary,
// promote or abort command against the state: a promote or abort with no
// canary, or a canary for a tool with no live version or a canary version
// pending, is refused as Apply would refuse it. Other commands pass.
func (f *FSM) CheckCanary(cmd []byte) error {
	if len(cmd) == 0 {
		return nil
	}
	t := CommandType(cmd[0])
	var name struct {
		Name string `json:"name"`
	}
	switch t {
	case CmdCanary, CmdPromote, CmdAbort:
		if decode(cmd[1:], &name) != nil {
			return nil
		}
	default:
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.canaryErr(t, name.Name)
}

// Canary returns tool name's pending canary.
func (f *FSM) Canary(name string) (*Canary, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.st.Canaries[name]
	return c, ok
}

// Canaries lists the pending canaries, sorted by tool.
func (f *FSM) Canaries() []*Canary {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Canary, 0, len(f.st.Canaries))
	for _, k := range sortedKeys(f.st.Canaries) {
		out = append(out, f.st.Canaries[k])
	}
	return out
}

// ToolFor returns the record of tool name live on node: its canary
// version's when node is one of its canary's, else the live one.
func (f *FSM) ToolFor(name, node string) (*Tool, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if c := f.st.Canaries[name]; c.On(node) {
		return c.Tool, true
	}
	t, ok := f.st.Tools[name]
	return t, ok
}

// ToolsFor is Tools with each tool's record live on node (ToolFor).
func (f *FSM) ToolsFor(node string) []*Tool {
	f.mu.RLock()
	out := make([]*Tool, 0, len(f.st.Tools))
	for name, t := range f.st.Tools {
		if c := f.st.Canaries[name]; c.On(node) {
			t = c.Tool
		}
		out = append(out, t)
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
