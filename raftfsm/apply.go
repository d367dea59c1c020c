package raftfsm

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/upstream"
)

// Names a session or agent may not take: they are files beside them in
// the 9P tree.
var reservedNames = map[string]bool{"new": true, "idx": true}

func checkName(kind, name string) error {
	if err := registry.ValidName(name); err != nil {
		return refuse(ErrInvalid, "bad %s name: %v", kind, err)
	}
	if (kind == "session" || kind == "agent") && reservedNames[name] {
		return refuse(ErrInvalid, "%s name %q is reserved: choose another", kind, name)
	}
	return nil
}

func applyPublishTools(st *state, index uint64, body []byte, ev *[]Event) any {
	var c PublishTools
	if err := decode(body, &c); err != nil {
		return err
	}
	for _, t := range c.Tools {
		if err := checkName("tool", t.Name); err != nil {
			return err
		}
		if t.ExecHash != "" && !isHexHash(t.ExecHash) {
			return refuse(ErrInvalid, "the executable hash of tool %q is not 64 lowercase hex digits", t.Name)
		}
		if c.Origin == OriginMCP {
			// A server's tools exist while its definition does: one
			// published after the withdrawal would stay for ever.
			if srv, _, _ := strings.Cut(t.Name, upstream.Sep); st.Servers[srv] == nil {
				return refuse(ErrNotFound, "tool %q: no mcp server %q is published", t.Name, srv)
			}
		}
	}
	signers := make([]string, len(c.Tools))
	for i, t := range c.Tools {
		signer, err := st.verifyTool(t.Name, t.Meta, t.ExecHash, t.Sig)
		if err != nil {
			return err
		}
		signers[i] = signer
	}
	origin := c.Origin
	if origin == "" {
		origin = OriginDir
	}
	for i, t := range c.Tools {
		n := &Tool{
			Name: t.Name, Meta: t.Meta, ExecHash: t.ExecHash, ExecMode: t.Mode, ExecSize: t.Size,
			Owner: c.Owner, Origin: origin, Index: index, Time: c.Time, Sig: t.Sig, Signer: signers[i],
		}
		st.putTool(t.Name, n, index, publisherOf(c.Publisher, c.Owner), c.Time)
		*ev = append(*ev, Event{index, "tool+", t.Name})
	}
	return Result{}
}

func applyPutToolMeta(st *state, index uint64, body []byte, ev *[]Event) any {
	var c PutToolMeta
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if len(c.Meta) == 0 {
		return refuse(ErrInvalid, "the metadata of tool %q is empty", c.Name)
	}
	t := &Tool{Name: c.Name, Meta: c.Meta, Owner: c.Owner, Origin: c.Origin, Index: index, Time: c.Time, Sig: c.Sig}
	if old, ok := st.base(c.Name); ok {
		t.ExecHash, t.ExecMode, t.ExecSize = old.ExecHash, old.ExecMode, old.ExecSize
	}
	signer, err := st.verifyTool(c.Name, t.Meta, t.ExecHash, c.Sig)
	if err != nil {
		return err
	}
	t.Signer = signer
	st.putTool(c.Name, t, index, publisherOf(c.Publisher, c.Owner), c.Time)
	*ev = append(*ev, Event{index, "tool+", c.Name})
	return Result{}
}

func applyPutToolExec(st *state, index uint64, body []byte, ev *[]Event) any {
	var c PutToolExec
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkName("tool", c.Name); err != nil {
		return err
	}
	if !isHexHash(c.ExecHash) {
		return refuse(ErrInvalid, "the executable hash of tool %q is not 64 lowercase hex digits", c.Name)
	}
	t := &Tool{Name: c.Name, ExecHash: c.ExecHash, ExecMode: c.Mode, ExecSize: c.Size, Owner: c.Owner, Origin: c.Origin, Index: index, Time: c.Time, Sig: c.Sig}
	if old, ok := st.base(c.Name); ok {
		t.Meta = old.Meta
	}
	if t.Published() {
		// An executable with no metadata yet is not a tool: its
		// metadata's publish carries the signature over both.
		signer, err := st.verifyTool(c.Name, t.Meta, t.ExecHash, c.Sig)
		if err != nil {
			return err
		}
		t.Signer = signer
	}
	st.putTool(c.Name, t, index, publisherOf(c.Publisher, c.Owner), c.Time)
	if t.Published() {
		*ev = append(*ev, Event{index, "tool+", c.Name})
	}
	return Result{}
}

func applyDropToolExec(st *state, index uint64, body []byte, ev *[]Event) any {
	var c DropToolExec
	if err := decode(body, &c); err != nil {
		return err
	}
	old, ok := st.base(c.Name)
	if !ok || old.ExecHash == "" {
		return refuse(ErrNotFound, "tool %q has no published executable", c.Name)
	}
	if !old.Published() {
		st.setTool(c.Name, nil)
		return Result{}
	}
	signer, err := st.verifyTool(c.Name, old.Meta, "", c.Sig)
	if err != nil {
		return err
	}
	t := *old
	t.ExecHash, t.ExecMode, t.ExecSize, t.Index = "", 0, 0, index
	t.Sig, t.Signer = c.Sig, signer
	if c.Time != 0 {
		t.Time = c.Time
	}
	if c.Owner != "" {
		t.Owner = c.Owner
	}
	st.putTool(c.Name, &t, index, publisherOf(c.Publisher, t.Owner), t.Time)
	*ev = append(*ev, Event{index, "tool+", c.Name})
	return Result{}
}

// execHash is the content address of an executable.
func execHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ExecHash returns the hash a ToolSpec carries for executable b.
func ExecHash(b []byte) string { return execHash(b) }

func applyWithdrawTools(st *state, index uint64, body []byte, ev *[]Event) any {
	var c WithdrawTools
	if err := decode(body, &c); err != nil {
		return err
	}
	for _, name := range c.Names {
		t, ok := st.Tools[name]
		if !ok || (c.Owner != "" && t.Owner != c.Owner) || (c.Origin != "" && t.Origin != c.Origin) {
			continue
		}
		if st.Canaries[name] != nil {
			st.abortCanary(name)
			*ev = append(*ev, Event{index, "abort", name})
		}
		st.setTool(name, nil)
		st.recordVersion(name, index, publisherOf(c.Publisher, c.Owner), c.Time, 0)
		if t.Published() {
			*ev = append(*ev, Event{index, "tool-", name})
		}
	}
	return Result{}
}

func applyPublishProfiles(st *state, index uint64, body []byte, ev *[]Event) any {
	var c PublishProfiles
	if err := decode(body, &c); err != nil {
		return err
	}
	for _, p := range c.Profiles {
		if err := checkName("profile", p.Name); err != nil {
			return err
		}
		if err := acl.CheckTools(p.Tools); err != nil {
			return refuse(ErrInvalid, "profile %q: %v", p.Name, err)
		}
	}
	origin := c.Origin
	if origin == "" {
		origin = OriginDir
	}
	for _, p := range c.Profiles {
		st.Profiles[p.Name] = &Profile{Name: p.Name, Data: p.Data, AutoLoad: p.AutoLoad, Tools: p.Tools, Owner: c.Owner, Origin: origin, Index: index, Time: c.Time}
	}
	return Result{}
}

func applyWithdrawProfiles(st *state, index uint64, body []byte, ev *[]Event) any {
	var c WithdrawProfiles
	if err := decode(body, &c); err != nil {
		return err
	}
	for _, name := range c.Names {
		p, ok := st.Profiles[name]
		if ok && (c.Owner == "" || p.Owner == c.Owner) && (c.Origin == "" || p.Origin == c.Origin) {
			delete(st.Profiles, name)
		}
	}
	return Result{}
}

// genName makes the next generated name with prefix from counter,
// skipping taken ones.
func genName(counter *uint64, prefix string, taken func(string) bool) string {
	for {
		*counter++
		n := prefix + strconv.FormatUint(*counter, 10)
		if !taken(n) {
			return n
		}
	}
}

// newAgent makes an agent from an optional profile: its autoLoad tools
// that the cluster knows are loaded, each one a revision.
func newAgent(st *state, name, profile string, limit []string) (*Agent, error) {
	if err := acl.CheckTools(limit); err != nil {
		return nil, refuse(ErrInvalid, "%v", err)
	}
	a := &Agent{Name: name, Profile: profile, Limit: limit, Loaded: []string{}}
	if profile == "" {
		return a, nil
	}
	p, ok := st.Profiles[profile]
	if !ok {
		return nil, refuse(ErrNotFound, "no agent profile %q in the cluster", profile)
	}
	a.Tools = p.Tools
	for _, tool := range p.AutoLoad {
		if t, known := st.Tools[tool]; known && t.Published() && !a.IsLoaded(tool) && a.Allows(tool) {
			a.Loaded = append(a.Loaded, tool)
			a.Rev++
		}
	}
	return a, nil
}

func agentEvents(index uint64, session string, a *Agent, ev *[]Event) {
	id := session + "/" + a.Name
	*ev = append(*ev, Event{index, "agent+", id})
	for _, t := range a.Loaded {
		*ev = append(*ev, Event{index, "load", id + "/" + t})
	}
}

func applyCreateSession(st *state, index uint64, body []byte, ev *[]Event) any {
	var c CreateSession
	if err := decode(body, &c); err != nil {
		return err
	}
	// A generated name's counter moves only if the command succeeds.
	name, last := c.Name, st.LastSession
	if name == "" {
		name = genName(&last, "s", func(n string) bool { return st.Sessions[n] != nil })
	} else if err := checkName("session", name); err != nil {
		return err
	}
	if _, ok := st.Sessions[name]; ok {
		return refuse(ErrExists, "session %q already exists", name)
	}
	s := &Session{Name: name, Owner: c.Owner, Cwd: c.Cwd, Created: c.Time, Agents: map[string]*Agent{}}
	if c.Profile != "" {
		if err := checkName("agent", c.Profile); err != nil {
			return err
		}
		a, err := newAgent(st, c.Profile, c.Profile, c.Limit)
		if err != nil {
			return err
		}
		s.Agents[a.Name] = a
		st.Sessions[name] = s
		st.LastSession = last
		agentEvents(index, name, a, ev)
		return Result{Name: name}
	}
	st.Sessions[name] = s
	st.LastSession = last
	return Result{Name: name}
}

func applyKillSession(st *state, index uint64, body []byte, ev *[]Event) any {
	var c KillSession
	if err := decode(body, &c); err != nil {
		return err
	}
	s, ok := st.Sessions[c.Name]
	if !ok {
		return refuse(ErrNotFound, "session %q does not exist", c.Name)
	}
	for _, a := range s.AgentNames() {
		*ev = append(*ev, Event{index, "agent-", c.Name + "/" + a})
	}
	delete(st.Sessions, c.Name)
	return Result{Name: c.Name}
}

func applyCreateAgent(st *state, index uint64, body []byte, ev *[]Event) any {
	var c CreateAgent
	if err := decode(body, &c); err != nil {
		return err
	}
	s, ok := st.Sessions[c.Session]
	if !ok {
		return refuse(ErrNotFound, "session %q does not exist", c.Session)
	}
	name, last := c.Name, st.LastAgent
	if name == "" {
		name = genName(&last, "a", func(n string) bool { return s.Agents[n] != nil })
	} else if err := checkName("agent", name); err != nil {
		return err
	}
	if _, ok := s.Agents[name]; ok {
		return refuse(ErrExists, "agent %q already exists in session %q", name, c.Session)
	}
	a, err := newAgent(st, name, c.Profile, c.Limit)
	if err != nil {
		return err
	}
	s.Agents[a.Name] = a
	st.LastAgent = last
	agentEvents(index, c.Session, a, ev)
	return Result{Name: name}
}

func applyKillAgent(st *state, index uint64, body []byte, ev *[]Event) any {
	var c KillAgent
	if err := decode(body, &c); err != nil {
		return err
	}
	s, _, err := lookupAgent(st, c.Session, c.Name)
	if err != nil {
		return err
	}
	delete(s.Agents, c.Name)
	*ev = append(*ev, Event{index, "agent-", c.Session + "/" + c.Name})
	return Result{Name: c.Name}
}

func lookupAgent(st *state, session, agent string) (*Session, *Agent, error) {
	s, ok := st.Sessions[session]
	if !ok {
		return nil, nil, refuse(ErrNotFound, "session %q does not exist", session)
	}
	a, ok := s.Agents[agent]
	if !ok {
		return nil, nil, refuse(ErrNotFound, "agent %q does not exist in session %q", agent, session)
	}
	return s, a, nil
}

func applyLoad(st *state, index uint64, body []byte, ev *[]Event) any {
	var c Load
	if err := decode(body, &c); err != nil {
		return err
	}
	s, a, err := lookupAgent(st, c.Session, c.Agent)
	if err != nil {
		return err
	}
	for _, name := range c.Names {
		if t, ok := st.Tools[name]; !ok || !t.Published() {
			return refuse(ErrNotFound, "no tool %q in the cluster", name)
		}
		if !a.Allows(name) {
			return refuse(ErrDenied, "permission denied: tool %s is not allowed here", name)
		}
	}
	n := *a
	n.Loaded = append([]string(nil), a.Loaded...)
	id := c.Session + "/" + c.Agent
	for _, name := range c.Names {
		if n.IsLoaded(name) {
			continue
		}
		n.Loaded = append(n.Loaded, name)
		n.Rev++
		*ev = append(*ev, Event{index, "load", id + "/" + name})
	}
	if n.Rev != a.Rev {
		s.Agents[n.Name] = &n
	}
	return Result{}
}

func applyUnload(st *state, index uint64, body []byte, ev *[]Event) any {
	var c Unload
	if err := decode(body, &c); err != nil {
		return err
	}
	s, a, err := lookupAgent(st, c.Session, c.Agent)
	if err != nil {
		return err
	}
	for _, name := range c.Names {
		if !a.IsLoaded(name) {
			return refuse(ErrNotLoaded, "tool %q is not loaded by agent %q", name, c.Agent)
		}
	}
	drop := map[string]bool{}
	for _, name := range c.Names {
		drop[name] = true
	}
	n := *a
	n.Loaded = make([]string, 0, len(a.Loaded))
	id := c.Session + "/" + c.Agent
	for _, name := range a.Loaded {
		if drop[name] {
			n.Rev++
			*ev = append(*ev, Event{index, "unload", id + "/" + name})
			continue
		}
		n.Loaded = append(n.Loaded, name)
	}
	s.Agents[n.Name] = &n
	return Result{}
}
