package catalog

import (
	"bytes"
	"errors"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
)

// Catalog is this node's view of the published tools: each one's
// metadata resolved against this host's variants. It is derived from the
// FSM, never replicated.
type Catalog struct {
	host registry.Host
	self string

	rebuildMu sync.Mutex // one rebuild at a time

	mu       sync.RWMutex
	entries  map[string]*Entry
	nvisible int            // how many entries are visible
	index    []p9.ToolEntry // visible tools, sorted; rebuilt lazily
	dirty    bool
	// While a rebuild resolves outside the lock, updates record the names
	// they touched; the rebuild re-resolves those after its swap, so no
	// update is lost to it.
	rebuilding bool
	touched    map[string]bool
	// held: updates wait for the next rebuild (Hold); hints: parsed
	// metadata of the last directory scan (Offer).
	held  bool
	hints map[string]hint
	// trust, when set, says why a tool's live version may not be served
	// or run here (its signature against the keys trusted now).
	trust func(*raftfsm.Tool) error
	// runs, when set, says whether an upstream MCP server running on this
	// host offers a tool of origin raftfsm.OriginMCP now; without it no
	// such tool is visible here.
	runs func(name string) bool
}

// ErrNotPublished: the tool's executable was published before its
// metadata; it is not a tool yet.
var ErrNotPublished = errors.New("its metadata has not been published yet")

// Entry is one published tool as this host sees it.
type Entry struct {
	Tool     *raftfsm.Tool
	Meta     *registry.Meta // as published
	Resolved registry.Meta  // variant merged (valid when visible)
	Variant  int
	Visible  bool
	Err      error // the published metadata does not parse here
}

// New returns an empty catalog for host h of the node named self.
func New(h registry.Host, self string) *Catalog {
	return &Catalog{host: h, self: self, entries: map[string]*Entry{}}
}

// SetTrust sets the check of each tool's signature: a tool it refuses
// is not visible, and its entry's Err says why. Call it before the first
// Rebuild.
func (c *Catalog) SetTrust(check func(*raftfsm.Tool) error) { c.trust = check }

// SetUpstream sets the check of whether this host runs the upstream MCP
// server that offers a tool of origin raftfsm.OriginMCP: such a tool has
// no variants; it is visible exactly when runs says so. Call it before
// the first Rebuild, and Update a tool's name when its answer changes.
func (c *Catalog) SetUpstream(runs func(name string) bool) { c.runs = runs }

// resolve makes t's entry with r. parsed, when not nil, is t.Meta
// already parsed (from an earlier entry or the directory scan: the same
// bytes parse the same), so only the variants are resolved again.
func (c *Catalog) resolve(t *raftfsm.Tool, r *registry.Resolver, parsed *registry.Meta) *Entry {
	e := &Entry{Tool: t, Variant: -1}
	if !t.Published() {
		e.Err = ErrNotPublished
		return e
	}
	if c.trust != nil {
		if err := c.trust(t); err != nil {
			e.Err = err
			return e
		}
	}
	m := parsed
	if m == nil {
		var err error
		if m, _, err = registry.ParseMeta(t.Meta); err != nil {
			e.Err = err
			return e
		}
	}
	e.Meta = m
	if t.Origin == raftfsm.OriginMCP {
		e.Resolved, e.Visible = *m, c.runs != nil && c.runs(t.Name)
		return e
	}
	e.Resolved, e.Variant, e.Visible = r.Resolve(m)
	return e
}

// parallelResolveFrom is how many tools make resolveAll use workers.
const parallelResolveFrom = 64

// resolveAll makes the entries of tools (nil tools give nil entries) with
// one Resolver, so each binary and file is looked up once per pass, on
// GOMAXPROCS workers when there are many. Metadata whose bytes equal
// those of the current entry or of a hint is not parsed again.
func (c *Catalog) resolveAll(tools []*raftfsm.Tool) []*Entry {
	parsed := make([]*registry.Meta, len(tools))
	c.mu.RLock()
	for i, t := range tools {
		if t == nil {
			continue
		}
		if old, ok := c.entries[t.Name]; ok && old.Meta != nil && bytes.Equal(old.Tool.Meta, t.Meta) {
			parsed[i] = old.Meta
		} else if h, ok := c.hints[t.Name]; ok && bytes.Equal(h.data, t.Meta) {
			parsed[i] = h.meta
		}
	}
	c.mu.RUnlock()
	r := registry.NewResolver(c.host)
	out := make([]*Entry, len(tools))
	work := func(i int) {
		if tools[i] != nil {
			out[i] = c.resolve(tools[i], r, parsed[i])
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if len(tools) < parallelResolveFrom || workers < 2 {
		for i := range tools {
			work(i)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(tools); i = int(next.Add(1)) - 1 {
				work(i)
			}
		})
	}
	wg.Wait()
	return out
}

// hint is a .meta document already parsed (by the directory scan).
type hint struct {
	data []byte
	meta *registry.Meta
}

// Offer hands the catalog the tools of a directory scan, parsed, so that
// resolving the same bytes when they are published (or found restored)
// does not parse them again; dropHints forgets them.
func (c *Catalog) Offer(found map[string]registry.DirTool) {
	hints := make(map[string]hint, len(found))
	for name, dt := range found {
		if dt.Parsed != nil {
			hints[name] = hint{data: dt.Meta, meta: dt.Parsed}
		}
	}
	c.mu.Lock()
	c.hints = hints
	c.mu.Unlock()
}

func (c *Catalog) DropHints() {
	c.mu.Lock()
	c.hints = nil
	c.mu.Unlock()
}

// Hold makes updates and restores do nothing until the next rebuild, which
// lists every tool anyway: a node starting on a long log replays it into
// the FSM without resolving each entry's tools one entry at a time.
func (c *Catalog) Hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

func (c *Catalog) IsHeld() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.held
}

// Rebuild re-resolves every tool (after a restore, and periodically: a
// binary may have been installed since), and ends a hold. It reports
// whether anything became visible or hidden. Updates may run meanwhile.
func (c *Catalog) Rebuild(list func() []*raftfsm.Tool, lookup func(string) (*raftfsm.Tool, bool)) bool {
	c.rebuildMu.Lock()
	defer c.rebuildMu.Unlock()
	c.mu.Lock()
	c.rebuilding, c.touched = true, map[string]bool{}
	c.held = false
	c.mu.Unlock()
	// Listed only now: an update before this point is in the list, one
	// after it is in touched.
	tools := list()
	entries := make(map[string]*Entry, len(tools))
	nvisible := 0
	for _, e := range c.resolveAll(tools) {
		entries[e.Tool.Name] = e
		if e.Visible {
			nvisible++
		}
	}
	c.mu.Lock()
	changed := len(entries) != len(c.entries)
	for name, e := range entries {
		if old, ok := c.entries[name]; !ok || old.Visible != e.Visible || old.Variant != e.Variant {
			changed = true
		}
	}
	c.entries, c.nvisible = entries, nvisible
	c.dirty = true
	touched := make([]string, 0, len(c.touched))
	for name := range c.touched {
		touched = append(touched, name)
	}
	c.rebuilding, c.touched = false, nil
	c.mu.Unlock()
	if len(touched) > 0 {
		c.Update(touched, lookup)
	}
	return changed
}

// Update re-resolves the named tools from the FSM.
func (c *Catalog) Update(names []string, lookup func(string) (*raftfsm.Tool, bool)) {
	if c.IsHeld() {
		return
	}
	tools := make([]*raftfsm.Tool, len(names))
	for i, name := range names {
		tools[i], _ = lookup(name)
	}
	fresh := make(map[string]*Entry, len(names))
	for i, e := range c.resolveAll(tools) {
		fresh[names[i]] = e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range fresh {
		if old, ok := c.entries[name]; ok && old.Visible {
			c.nvisible--
		}
		if e == nil {
			delete(c.entries, name)
		} else {
			c.entries[name] = e
			if e.Visible {
				c.nvisible++
			}
		}
		if c.rebuilding {
			c.touched[name] = true
		}
	}
	c.dirty = true
}

// Get returns a tool's entry.
func (c *Catalog) Get(name string) (*Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[name]
	return e, ok
}

// Visible lists the tools this host can run, sorted by name.
func (c *Catalog) Visible() []p9.ToolEntry {
	c.mu.RLock()
	if !c.dirty {
		idx := c.index
		c.mu.RUnlock()
		return idx
	}
	c.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty {
		idx := make([]p9.ToolEntry, 0, len(c.entries))
		for name, e := range c.entries {
			if e.Visible {
				idx = append(idx, p9.ToolEntry{Name: name, Description: e.Resolved.Description})
			}
		}
		sort.Slice(idx, func(i, j int) bool { return idx[i].Name < idx[j].Name })
		c.index, c.dirty = idx, false
	}
	return c.index
}

// Caps is what this host can run, for gossip: each visible tool and the
// index of the variant that matched (-1 without variants).
func (c *Catalog) Caps() cluster.Caps {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(cluster.Caps, len(c.entries))
	for name, e := range c.entries {
		if e.Visible {
			out[name] = e.Variant
		}
	}
	return out
}

// Count is how many tools this host can run.
func (c *Catalog) Count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nvisible
}
