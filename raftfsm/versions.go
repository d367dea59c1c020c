package raftfsm

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Versions (DESIGN §8). Every change to what a tool is (its metadata,
// executable or mode) made by a command is its next version, recorded in
// the tool's History beside the Tool record: 1 for the first, one more
// for each after it. A command that leaves the metadata, executable
// digest and mode as the live version has them makes none. A withdrawal
// records a version of state withdrawn, with no content; a rollback
// publishes a copy of a kept version as the next one. The newest
// KeepVersions versions of each tool are kept, plus its live and canary
// ones; older ones are dropped, and the executables only they named are
// then no longer Referenced.

// The states of a version.
const (
	StateLive      = "live"      // what t/ serves
	StateCanary    = "canary"    // live on its canary nodes only
	StateOld       = "old"       // superseded, kept for rollback
	StateAborted   = "aborted"   // a canary dropped
	StateWithdrawn = "withdrawn" // the tool was withdrawn; no content
)

// DefaultKeepVersions is how many versions of a tool the cluster keeps
// (-keep-versions) until the leader sets its own; MaxKeepVersions bounds
// it.
const (
	DefaultKeepVersions = 10
	MaxKeepVersions     = 1000
)

// Version is one kept version of a tool; immutable like Tool. Canary and
// the signature fields are carried for canaries and signed publishes.
type Version struct {
	Version uint64 `json:"version"`
	State   string `json:"state"`
	// Meta, ExecHash, ExecSize and ExecMode are the version's content as
	// published (none for a withdrawn version).
	Meta     []byte `json:"meta,omitempty"`
	ExecHash string `json:"execHash,omitempty"`
	ExecSize int64  `json:"execSize,omitempty"`
	ExecMode uint32 `json:"execMode,omitempty"`
	// Publisher is the principal that published it (a token's name,
	// anon@ADDR, node:NAME for a node's tools directory).
	Publisher string `json:"publisher"`
	// Owner is the node it was published through: the first node asked
	// for its executable.
	Owner string `json:"owner,omitempty"`
	// Time is when it was published (stamped by the proposer); Index the
	// Raft index of the command that made it.
	Time  int64  `json:"time"`
	Index uint64 `json:"index"`
	// From is the version a rollback copied (0: none).
	From uint64 `json:"from,omitempty"`
	// Signer is the trusted key that signed it, Sig its SSH signature
	// (empty: unsigned).
	Signer string `json:"signer,omitempty"`
	Sig    []byte `json:"sig,omitempty"`
	// Canary names the nodes a canary version is live on.
	Canary []string `json:"canary,omitempty"`
}

// HasContent reports whether v is a publish (not a withdrawal).
func (v *Version) HasContent() bool { return len(v.Meta) > 0 }

// History is a tool's kept versions; immutable like Tool: a change stores
// a new History.
type History struct {
	Name string `json:"name"`
	// Last is the number of the newest version ever made: the next is
	// Last+1, even after older ones were dropped.
	Last uint64 `json:"last"`
	// Versions are the kept ones, newest first.
	Versions []*Version `json:"versions"`
}

// Get returns version n of the history, if kept.
func (h *History) Get(n uint64) (*Version, bool) {
	if h == nil {
		return nil, false
	}
	for _, v := range h.Versions {
		if v.Version == n {
			return v, true
		}
	}
	return nil, false
}

// Live returns the live version, if the tool has one.
func (h *History) Live() (*Version, bool) {
	if h == nil {
		return nil, false
	}
	for _, v := range h.Versions {
		if v.State == StateLive {
			return v, true
		}
	}
	return nil, false
}

// kept lists the numbers of the kept versions, newest first.
func (h *History) kept() string {
	var b strings.Builder
	for i, v := range h.Versions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatUint(v.Version, 10))
	}
	return b.String()
}

// SetKeepVersions sets how many versions of each tool the cluster keeps
// (besides the live and canary ones): the leader proposes its own
// -keep-versions when it differs from the state's, so the leader's value
// holds. Lowering it drops the versions past the new bound at once.
type SetKeepVersions struct {
	Keep int `json:"keep"`
}

// Rollback publishes a copy of a kept version of a tool as its next
// version (v/NAME/ctl "rollback VERSION").
type Rollback struct {
	Name      string `json:"name"`
	Version   uint64 `json:"version"`
	Publisher string `json:"publisher,omitempty"`
	Owner     string `json:"owner"`
	Time      int64  `json:"time"`
}

// keep is the state's bound on versions kept.
func (s *state) keep() int {
	if s.KeepVersions <= 0 {
		return DefaultKeepVersions
	}
	return s.KeepVersions
}

// publisherOf is the principal a command names, or the node it came
// through for a command that names none.
func publisherOf(publisher, owner string) string {
	if publisher != "" {
		return publisher
	}
	if owner == "" {
		return ""
	}
	return "node:" + owner
}

// sameContent reports whether tool t has the content of version v.
func sameContent(t *Tool, v *Version) bool {
	return bytes.Equal(t.Meta, v.Meta) && t.ExecHash == v.ExecHash && t.execMode() == v.execMode() && bytes.Equal(t.Sig, v.Sig)
}

func (t *Tool) execMode() uint32 {
	if t.ExecHash != "" && t.ExecMode == 0 {
		return 0o755
	}
	return t.ExecMode
}

func (v *Version) execMode() uint32 {
	if v.ExecHash != "" && v.ExecMode == 0 {
		return 0o755
	}
	return v.ExecMode
}

// recordVersion records what the command at index made of tool name (its
// record now in st.Tools, or none) as the tool's next version, unless it
// is the live version's content, and returns the version number the tool
// is live at (0: none). A tool that is not a tool (no metadata, or
// withdrawn) records a withdrawn version if it had a live one. from is
// the version a rollback copies.
func (s *state) recordVersion(name string, index uint64, publisher string, time int64, from uint64) uint64 {
	t := s.Tools[name]
	h := s.Versions[name]
	live, hasLive := h.Live()
	var v *Version
	switch {
	case t == nil || !t.Published():
		if !hasLive {
			return 0
		}
		v = &Version{State: StateWithdrawn}
	case hasLive && sameContent(t, live):
		return live.Version
	default:
		v = &Version{
			State: StateLive, Meta: t.Meta, ExecHash: t.ExecHash, ExecSize: t.ExecSize, ExecMode: t.ExecMode,
			Owner: t.Owner, From: from, Sig: t.Sig, Signer: t.Signer,
		}
	}
	if h == nil {
		h = &History{Name: name}
	}
	v.Publisher, v.Time, v.Index = publisher, time, index
	n := &History{Name: name, Last: h.Last + 1, Versions: make([]*Version, 0, len(h.Versions)+1)}
	v.Version = n.Last
	n.Versions = append(n.Versions, v)
	for _, old := range h.Versions {
		if old.State == StateLive {
			c := *old
			c.State = StateOld
			old = &c
		}
		n.Versions = append(n.Versions, old)
	}
	s.Versions[name] = n.trimmed(s.keep())
	if v.State == StateLive {
		return v.Version
	}
	return 0
}

// trimmed is h keeping its newest keep versions and its live and canary
// ones.
func (h *History) trimmed(keep int) *History {
	drop := false
	for i, v := range h.Versions {
		if i >= keep && v.State != StateLive && v.State != StateCanary {
			drop = true
			break
		}
	}
	if !drop {
		return h
	}
	n := &History{Name: h.Name, Last: h.Last}
	for i, v := range h.Versions {
		if i < keep || v.State == StateLive || v.State == StateCanary {
			n.Versions = append(n.Versions, v)
		}
	}
	return n
}

func applySetKeepVersions(st *state, index uint64, body []byte, ev *[]Event) any {
	var c SetKeepVersions
	if err := decode(body, &c); err != nil {
		return err
	}
	if c.Keep < 1 || c.Keep > MaxKeepVersions {
		return refuse(ErrInvalid, "invalid -keep-versions %d: between 1 and %d", c.Keep, MaxKeepVersions)
	}
	st.KeepVersions = c.Keep
	for name, h := range st.Versions {
		st.Versions[name] = h.trimmed(c.Keep)
	}
	return Result{}
}

func applyRollback(st *state, index uint64, body []byte, ev *[]Event) any {
	var c Rollback
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	h, ok := st.Versions[c.Name]
	if !ok {
		return refuse(ErrInvalid, "invalid rollback: tool %q has no versions", c.Name)
	}
	v, ok := h.Get(c.Version)
	if !ok {
		return refuse(ErrInvalid, "invalid rollback: tool %q keeps no version %d (kept: %s)", c.Name, c.Version, h.kept())
	}
	if !v.HasContent() {
		return refuse(ErrInvalid, "invalid rollback: version %d of tool %q is a withdrawal; roll back to a version with content", c.Version, c.Name)
	}
	signer, err := st.verifyTool(c.Name, v.Meta, v.ExecHash, v.Sig)
	if err != nil {
		return refuse(ErrDenied, "%v: version %d cannot be rolled back to while it is not signed by a trusted key", err, c.Version)
	}
	t := &Tool{
		Name: c.Name, Meta: v.Meta, ExecHash: v.ExecHash, ExecMode: v.ExecMode, ExecSize: v.ExecSize,
		Owner: c.Owner, Origin: Origin9P, Index: index, Time: c.Time, Sig: v.Sig, Signer: signer,
	}
	if st.Canaries[c.Name] != nil {
		// A rollback aborts a pending canary first.
		st.abortCanary(c.Name)
		*ev = append(*ev, Event{index, "abort", c.Name}, Event{index, "tool+", c.Name})
	}
	if live, ok := h.Live(); ok && sameContent(t, live) {
		// The live version already is that content: nothing more to do.
		return Result{Name: strconv.FormatUint(live.Version, 10)}
	}
	st.setTool(c.Name, t)
	t.Version = st.recordVersion(c.Name, index, publisherOf(c.Publisher, c.Owner), c.Time, c.Version)
	*ev = append(*ev, Event{index, "rollback", c.Name}, Event{index, "tool+", c.Name})
	return Result{Name: strconv.FormatUint(t.Version, 10)}
}

func validateSetKeepVersions(body []byte, lim Limits) error {
	var c SetKeepVersions
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if c.Keep < 1 || c.Keep > MaxKeepVersions {
		return fmt.Errorf("keep %d is not between 1 and %d", c.Keep, MaxKeepVersions)
	}
	return nil
}

func validateRollback(body []byte, lim Limits) error {
	var c Rollback
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if c.Version == 0 {
		return fmt.Errorf("version 0 of tool %q: versions count from 1", c.Name)
	}
	if err := checkPublisher(c.Publisher); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, true); err != nil {
		return err
	}
	return checkTime(c.Time)
}

// checkPublisher checks a command's principal: one field of a v/NAME/idx
// line, so no space, no control character, and bounded.
func checkPublisher(p string) error {
	if len(p) > maxOwner {
		return fmt.Errorf("publisher of %d bytes: at most %d", len(p), maxOwner)
	}
	if p == "-" {
		return fmt.Errorf("publisher %q is the idx's empty field", p)
	}
	for _, r := range p {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("publisher %q holds a space or control character", p)
		}
	}
	return nil
}

// ToolVersions returns a tool's kept versions, newest first.
func (f *FSM) ToolVersions(name string) (*History, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := f.st.Versions[name]
	return h, ok
}

// VersionedTools lists the tools with versions kept, sorted.
func (f *FSM) VersionedTools() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedKeys(f.st.Versions)
}

// KeepVersions is the cluster's bound on versions kept per tool.
func (f *FSM) KeepVersions() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.keep()
}

// KeptExec is an executable a kept version names.
type KeptExec struct {
	Tool, Digest, Owner string
	Size                int64
}

// KeptExecs lists the executables of every kept version, each digest
// once, sorted by digest: the blobs a node keeps besides the tools'.
func (f *FSM) KeptExecs() []KeptExec {
	f.mu.RLock()
	seen := map[string]bool{}
	var out []KeptExec
	for _, h := range f.st.Versions {
		for _, v := range h.Versions {
			if v.ExecHash != "" && !seen[v.ExecHash] {
				seen[v.ExecHash] = true
				out = append(out, KeptExec{Tool: h.Name, Digest: v.ExecHash, Owner: v.Owner, Size: v.ExecSize})
			}
		}
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out
}

// versionsFromTools gives every published tool of a state restored from
// a snapshot of the format before versions its version 1, live.
func (s *state) versionsFromTools() {
	for name, t := range s.Tools {
		if !t.Published() || s.Versions[name] != nil {
			continue
		}
		s.Versions[name] = &History{Name: name, Last: 1, Versions: []*Version{{
			Version: 1, State: StateLive, Meta: t.Meta, ExecHash: t.ExecHash, ExecSize: t.ExecSize, ExecMode: t.ExecMode,
			Publisher: publisherOf("", t.Owner), Owner: t.Owner, Time: t.Time, Index: t.Index,
		}}}
		c := *t
		c.Version = 1
		s.Tools[name] = &c
	}
}
