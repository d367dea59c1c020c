package p9

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// fakeBackend is an in-memory Backend for the tests.
type fakeBackend struct {
	mu       sync.Mutex
	tools    map[string]*fakeTool
	profiles map[string][]byte
	sessions map[string]map[string]*fakeAgent
	events   []Event
	wake     chan struct{} // closed and replaced when an event is added
	node     string
	members  string
	calls    int
	maxExe   int      // MaxExecutable
	log      []string // publishes and withdrawals, in order
	ptimes   map[string]time.Time
}

// fakeTool is a published tool: meta nil means its metadata is not
// published yet, exe nil that it has no executable.
type fakeTool struct {
	time  time.Time // published
	desc  string
	meta  []byte
	exe   []byte
	mode  uint32 // of exe; 0 means 0755
	doc   string
	where string
}

type fakeAgent struct {
	loaded []string
	rev    uint64
}

var _ Backend = (*fakeBackend)(nil)

func newFake() *fakeBackend {
	f := &fakeBackend{
		tools: map[string]*fakeTool{
			"echo": {desc: "print the arguments", meta: []byte(`{"description":"print the arguments"}`),
				exe: []byte("#!/bin/sh\ncat\n"), doc: "echo: prints its arguments", where: "n1\nn2"},
			"fail":  {desc: "always fails", meta: []byte("{\"description\":\"always fails\"}\n"), doc: "fail: fails\n", where: "n1\n"},
			"block": {desc: "waits until cancelled", meta: []byte(`{}`), doc: "block", where: ""},
		},
		profiles: map[string][]byte{"coder": []byte(`{"autoLoad":["echo"]}`)},
		sessions: map[string]map[string]*fakeAgent{
			"s1": {"a1": {loaded: []string{"echo"}, rev: 7}},
		},
		wake:    make(chan struct{}),
		maxExe:  1 << 20,
		node:    "name n1\nos linux",
		members: "n1 127.0.0.1:7946 alive leader 3\n",
	}
	return f
}

func (f *fakeBackend) ToolIndex() []ToolEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ToolEntry
	for _, n := range f.sortedTools() {
		out = append(out, ToolEntry{Name: n, Description: f.tools[n].desc})
	}
	return out
}

func (f *fakeBackend) sortedTools() []string {
	var names []string
	for n := range f.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (f *fakeBackend) ToolNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sortedTools()
}

func (f *fakeBackend) ToolMeta(name string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tools[name]; t != nil && t.meta != nil {
		return t.meta, true
	}
	return nil, false
}

func (f *fakeBackend) ToolExecutable(name string) (Executable, bool) {
	exe, ok := f.exeBytes(name)
	if !ok {
		return Executable{}, false
	}
	return Executable{Size: int64(len(exe)), Open: func() (ExecReader, error) {
		return nopCloser{bytes.NewReader(exe)}, nil
	}}, true
}

// exeBytes is a tool's published executable.
func (f *fakeBackend) exeBytes(name string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tools[name]; t != nil && t.exe != nil {
		return t.exe, true
	}
	return nil, false
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// memUpload is an ExecUpload in memory.
type memUpload struct {
	mu  sync.Mutex
	buf []byte
}

func (m *memUpload) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := int(off) + len(p); end > len(m.buf) {
		m.buf = append(m.buf, make([]byte, end-len(m.buf))...)
	}
	return copy(m.buf[off:], p), nil
}

func (m *memUpload) ReadAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off >= int64(len(m.buf)) {
		return 0, io.EOF
	}
	n := copy(p, m.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memUpload) Truncate(n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < int64(len(m.buf)) {
		m.buf = m.buf[:n]
	}
	return nil
}

func (m *memUpload) Close() error { return nil }

func (f *fakeBackend) NewExecUpload() (ExecUpload, error) { return &memUpload{}, nil }

func (f *fakeBackend) ChmodToolExec(name string, mode uint32) error {
	exe, ok := f.exeBytes(name)
	if !ok {
		return ErrNotFound
	}
	return f.publishExec(name, exe, mode)
}

func (f *fakeBackend) ToolTime(name string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tools[name]; t != nil {
		return t.time
	}
	return time.Time{}
}

func (f *fakeBackend) ProfileTime(name string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ptimes[name]
}

func (f *fakeBackend) ToolDoc(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tools[name]; t != nil {
		return t.doc, nil
	}
	return "", ErrNotFound
}

func (f *fakeBackend) ProfileNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (f *fakeBackend) Profile(name string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.profiles[name]
	return p, ok
}

func (f *fakeBackend) addEvent(kind, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addEventLocked(kind, name)
}

func (f *fakeBackend) addEventLocked(kind, name string) {
	f.events = append(f.events, Event{Index: uint64(len(f.events) + 1), Kind: kind, Name: name})
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *fakeBackend) Events(ctx context.Context, after uint64) ([]Event, error) {
	for {
		f.mu.Lock()
		if after < uint64(len(f.events)) {
			out := slices.Clone(f.events[after:])
			f.mu.Unlock()
			return out, nil
		}
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, nil
		}
	}
}

func (f *fakeBackend) LastEvent() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.events))
}

func (f *fakeBackend) NodeInfo() string { return f.node }
func (f *fakeBackend) Members() string  { return f.members }

func (f *fakeBackend) Where(tool string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tools[tool]; t != nil {
		return t.where, nil
	}
	return "", fmt.Errorf("no tool %q in the cluster: %w", tool, ErrNotFound)
}

func (f *fakeBackend) Sessions() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.sessions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func specName(spec string) (name string, kv map[string]string) {
	kv = map[string]string{}
	for _, f := range strings.Fields(spec) {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	return kv["name"], kv
}

func (f *fakeBackend) NewSession(spec string) (string, error) {
	name, kv := specName(spec)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sessions[name]; ok {
		return "", fmt.Errorf("session %q %w", name, ErrExists)
	}
	f.sessions[name] = map[string]*fakeAgent{}
	if p := kv["agent"]; p != "" {
		if _, ok := f.profiles[p]; !ok {
			delete(f.sessions, name)
			return "", fmt.Errorf("no agent profile %q in the cluster", p)
		}
		f.sessions[name][p] = &fakeAgent{loaded: []string{"echo"}, rev: 1}
	}
	f.addEventLocked("agent+", name)
	return name, nil
}

func (f *fakeBackend) KillSession(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sessions[s]; !ok {
		return ErrNotFound
	}
	delete(f.sessions, s)
	return nil
}

func (f *fakeBackend) Agents(s string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ss, ok := f.sessions[s]
	if !ok {
		return nil, ErrNotFound
	}
	var names []string
	for n := range ss {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (f *fakeBackend) NewAgent(s, spec string) (string, error) {
	name, _ := specName(spec)
	f.mu.Lock()
	defer f.mu.Unlock()
	ss, ok := f.sessions[s]
	if !ok {
		return "", ErrNotFound
	}
	if _, ok := ss[name]; ok {
		return "", fmt.Errorf("agent %q already exists in session %q", name, s)
	}
	ss[name] = &fakeAgent{}
	return name, nil
}

func (f *fakeBackend) agent(s, a string) (*fakeAgent, error) {
	ss, ok := f.sessions[s]
	if !ok {
		return nil, fmt.Errorf("session %q does not exist", s)
	}
	ag, ok := ss[a]
	if !ok {
		return nil, ErrNotFound
	}
	return ag, nil
}

func (f *fakeBackend) KillAgent(s, a string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.agent(s, a); err != nil {
		return err
	}
	delete(f.sessions[s], a)
	return nil
}

func (f *fakeBackend) Loaded(s, a string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ag, err := f.agent(s, a)
	if err != nil {
		return nil, err
	}
	return slices.Clone(ag.loaded), nil
}

func (f *fakeBackend) Rev(s, a string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ag, err := f.agent(s, a)
	if err != nil {
		return 0, err
	}
	return ag.rev, nil
}

func (f *fakeBackend) setRev(s, a string, rev uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[s][a].rev = rev
}

func (f *fakeBackend) Load(s, a string, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ag, err := f.agent(s, a)
	if err != nil {
		return err
	}
	for _, n := range names {
		if f.tools[n] == nil {
			return fmt.Errorf("cannot load %q: no tool %q in the cluster", n, n)
		}
	}
	for _, n := range names {
		if !slices.Contains(ag.loaded, n) {
			ag.loaded = append(ag.loaded, n)
			ag.rev++
		}
	}
	return nil
}

func (f *fakeBackend) Unload(s, a string, names []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ag, err := f.agent(s, a)
	if err != nil {
		return err
	}
	for _, n := range names {
		if i := slices.Index(ag.loaded, n); i >= 0 {
			ag.loaded = slices.Delete(ag.loaded, i, i+1)
			ag.rev++
		} else {
			return fmt.Errorf("tool %q is not loaded", n)
		}
	}
	return nil
}

func (f *fakeBackend) ToolsAll(session, agent string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, n := range f.sortedTools() {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", n, f.tools[n].desc, strings.ReplaceAll(f.tools[n].where, "\n", ","))
	}
	return b.String()
}

func (f *fakeBackend) Preamble(s, a string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ag, err := f.agent(s, a)
	if err != nil {
		return "", err
	}
	return "tools: " + strings.Join(ag.loaded, ","), nil
}

// Call: echo returns the arguments, fail fails, block waits for its
// context, big returns 100000 bytes without a final newline.
func (f *fakeBackend) Call(ctx context.Context, s, a, tool string, args []byte) ([]byte, error) {
	f.mu.Lock()
	f.calls++
	_, err := f.agent(s, a)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	switch tool {
	case "echo":
		return slices.Clone(args), nil
	case "fail":
		return nil, fmt.Errorf("tool fail exited with status 1: boom")
	case "block":
		<-ctx.Done()
		return nil, fmt.Errorf("tool block stopped: %w", ctx.Err())
	case "big":
		return []byte(strings.Repeat("0123456789", 10000)), nil
	}
	return nil, fmt.Errorf("no tool %q in the cluster", tool)
}

func (f *fakeBackend) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeBackend) ToolExecMode(name string) (uint32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tools[name]
	if t == nil || t.exe == nil {
		return 0, false
	}
	if t.mode == 0 {
		return 0o755, true
	}
	return t.mode, true
}

// PublishToolMeta takes a JSON object whose description, if any, is a
// string.
func (f *fakeBackend) PublishToolMeta(name string, data []byte) error {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("the metadata of %s must be a JSON object: %v", name, err)
	}
	desc, ok := m["description"].(string)
	if _, has := m["description"]; has && !ok {
		return fmt.Errorf("the metadata of %s is invalid: description must be a string", name)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tools[name]
	if t == nil {
		t = &fakeTool{}
		f.tools[name] = t
	}
	t.meta, t.desc, t.time = slices.Clone(data), desc, time.Now()
	f.log = append(f.log, "meta "+name+" "+string(data))
	f.addEventLocked("tool+", name)
	return nil
}

func (f *fakeBackend) PublishToolExec(name string, up ExecUpload, size int64, mode uint32) error {
	data := make([]byte, size)
	if _, err := up.ReadAt(data, 0); err != nil && err != io.EOF {
		return err
	}
	return f.publishExec(name, data, mode)
}

func (f *fakeBackend) publishExec(name string, data []byte, mode uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(data) > f.maxExe {
		return fmt.Errorf("executables are limited to %d bytes", f.maxExe)
	}
	t := f.tools[name]
	if t == nil {
		t = &fakeTool{}
		f.tools[name] = t
	}
	t.exe, t.mode, t.time = slices.Clone(data), mode, time.Now()
	f.log = append(f.log, fmt.Sprintf("exec %s %#o %q", name, mode, data))
	return nil
}

func (f *fakeBackend) WithdrawTool(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tools[name] == nil {
		return fmt.Errorf("no tool %q in the cluster: %w", name, ErrNotFound)
	}
	delete(f.tools, name)
	f.log = append(f.log, "withdraw "+name)
	f.addEventLocked("tool-", name)
	return nil
}

func (f *fakeBackend) RemoveToolExec(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tools[name]
	if t == nil || t.exe == nil {
		return ErrNotFound
	}
	t.exe, t.mode = nil, 0
	if t.meta == nil {
		delete(f.tools, name)
	}
	f.log = append(f.log, "rmexec "+name)
	return nil
}

// PublishProfile takes a JSON object whose autoLoad, if any, is a list.
func (f *fakeBackend) PublishProfile(name string, data []byte) error {
	var p struct {
		AutoLoad []string `json:"autoLoad"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("profile %s is invalid: %v", name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.profiles[name] = slices.Clone(data)
	if f.ptimes == nil {
		f.ptimes = map[string]time.Time{}
	}
	f.ptimes[name] = time.Now()
	f.log = append(f.log, "profile "+name+" "+string(data))
	return nil
}

func (f *fakeBackend) WithdrawProfile(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.profiles[name]; !ok {
		return ErrNotFound
	}
	delete(f.profiles, name)
	f.log = append(f.log, "withdraw profile "+name)
	return nil
}

func (f *fakeBackend) MaxExecutable() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(f.maxExe)
}

// published returns the log of publishes and withdrawals.
func (f *fakeBackend) published() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}
