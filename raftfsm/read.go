package raftfsm

import "sort"

// The read side. Every method takes the read lock; returned records are
// shared and must not be modified.

// LastIndex is the index of the last applied entry.
func (f *FSM) LastIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

// Tool returns a published tool.
func (f *FSM) Tool(name string) (*Tool, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.Tools[name]
	return t, ok
}

// Tools returns every published tool, sorted by name.
func (f *FSM) Tools() []*Tool {
	f.mu.RLock()
	out := make([]*Tool, 0, len(f.st.Tools))
	for _, t := range f.st.Tools {
		out = append(out, t)
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Referenced reports whether a tool, or a kept version of one, refers
// to the executable of digest d.
func (f *FSM) Referenced(d string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, t := range f.st.Tools {
		if t.ExecHash == d {
			return true
		}
	}
	for _, h := range f.st.Versions {
		for _, v := range h.Versions {
			if v.ExecHash == d {
				return true
			}
		}
	}
	return false
}

// Profile returns a published profile.
func (f *FSM) Profile(name string) (*Profile, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	p, ok := f.st.Profiles[name]
	return p, ok
}

// Profiles returns every profile, sorted by name.
func (f *FSM) Profiles() []*Profile {
	f.mu.RLock()
	out := make([]*Profile, 0, len(f.st.Profiles))
	for _, p := range f.st.Profiles {
		out = append(out, p)
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Session returns a copy of a session, agents included: O(agents); see
// HasSession, SessionCwd and AgentNames for less.
func (f *FSM) Session(name string) (*Session, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.Sessions[name]
	if !ok {
		return nil, false
	}
	return s.copy(), true
}

// HasSession reports whether a session exists.
func (f *FSM) HasSession(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.st.Sessions[name]
	return ok
}

// SessionOwner is the principal that made a session ("" for a session
// made before sessions had owners), and whether it exists.
func (f *FSM) SessionOwner(name string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.Sessions[name]
	if !ok {
		return "", false
	}
	return s.Owner, true
}

// SessionCwd is a session's working directory ("" for none).
func (f *FSM) SessionCwd(name string) (string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.Sessions[name]
	if !ok {
		return "", false
	}
	return s.Cwd, true
}

// AgentNames lists a session's agents, sorted, and whether it exists.
func (f *FSM) AgentNames(session string) ([]string, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.Sessions[session]
	if !ok {
		return nil, false
	}
	return s.AgentNames(), true
}

// SessionNames lists sessions, sorted.
func (f *FSM) SessionNames() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedKeys(f.st.Sessions)
}

// Agent returns an agent of a session, or an error wrapping ErrNotFound
// that names what is missing.
func (f *FSM) Agent(session, agent string) (*Agent, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, a, err := lookupAgent(f.st, session, agent)
	return a, err
}
