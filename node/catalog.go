package node

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

// catalog is this node's view of the published tools: each one's
// metadata resolved against this host's variants. It is derived from the
// FSM, never replicated.
type catalog struct {
	host registry.Host
	self string

	rebuildMu sync.Mutex // one rebuild at a time

	mu       sync.RWMutex
	entries  map[string]*entry
	nvisible int            // how many entries are visible
	index    []p9.ToolEntry // visible tools, sorted; rebuilt lazily
	dirty    bool
	// While a rebuild resolves outside the lock, updates record the names
	// they touched; the rebuild re-resolves those after its swap, so no
	// update is lost to it.
	rebuilding bool
	touched    map[string]bool
	// held: updates wait for the next rebuild (hold); hints: parsed
	// metadata of the last directory scan (offer).
	held  bool
	hints map[string]hint
}

// errNotPublished: the tool's executable was published before its
// metadata; it is not a tool yet.
var errNotPublished = errors.New("its metadata has not been published yet")

// entry is one published tool as this host sees it.
type entry struct {
	tool     *raftfsm.Tool
	meta     *registry.Meta // as published
	resolved registry.Meta  // variant merged (valid when visible)
	variant  int
	visible  bool
	err      error // the published metadata does not parse here
}

func newCatalog(h registry.Host, self string) *catalog {
	return &catalog{host: h, self: self, entries: map[string]*entry{}}
}

// resolve makes t's entry with r. parsed, when not nil, is t.Meta
// already parsed (from an earlier entry or the directory scan: the same
// bytes parse the same), so only the variants are resolved again.
func (c *catalog) resolve(t *raftfsm.Tool, r *registry.Resolver, parsed *registry.Meta) *entry {
	e := &entry{tool: t, variant: -1}
	if !t.Published() {
		e.err = errNotPublished
		return e
	}
	m := parsed
	if m == nil {
		var err error
		if m, _, err = registry.ParseMeta(t.Meta); err != nil {
			e.err = err
			return e
		}
	}
	e.meta = m
	e.resolved, e.variant, e.visible = r.Resolve(m)
	return e
}

// parallelResolveFrom is how many tools make resolveAll use workers.
const parallelResolveFrom = 64

// resolveAll makes the entries of tools (nil tools give nil entries) with
// one Resolver, so each binary and file is looked up once per pass, on
// GOMAXPROCS workers when there are many. Metadata whose bytes equal
// those of the current entry or of a hint is not parsed again.
func (c *catalog) resolveAll(tools []*raftfsm.Tool) []*entry {
	parsed := make([]*registry.Meta, len(tools))
	c.mu.RLock()
	for i, t := range tools {
		if t == nil {
			continue
		}
		if old, ok := c.entries[t.Name]; ok && old.meta != nil && bytes.Equal(old.tool.Meta, t.Meta) {
			parsed[i] = old.meta
		} else if h, ok := c.hints[t.Name]; ok && bytes.Equal(h.data, t.Meta) {
			parsed[i] = h.meta
		}
	}
	c.mu.RUnlock()
	r := registry.NewResolver(c.host)
	out := make([]*entry, len(tools))
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

// offer hands the catalog the tools of a directory scan, parsed, so that
// resolving the same bytes when they are published (or found restored)
// does not parse them again; dropHints forgets them.
func (c *catalog) offer(found map[string]registry.DirTool) {
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

func (c *catalog) dropHints() {
	c.mu.Lock()
	c.hints = nil
	c.mu.Unlock()
}

// hold makes updates and restores do nothing until the next rebuild, which
// lists every tool anyway: a node starting on a long log replays it into
// the FSM without resolving each entry's tools one entry at a time.
func (c *catalog) hold() {
	c.mu.Lock()
	c.held = true
	c.mu.Unlock()
}

func (c *catalog) isHeld() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.held
}

// rebuild re-resolves every tool (after a restore, and periodically: a
// binary may have been installed since), and ends a hold. It reports
// whether anything became visible or hidden. Updates may run meanwhile.
func (c *catalog) rebuild(list func() []*raftfsm.Tool, lookup func(string) (*raftfsm.Tool, bool)) bool {
	c.rebuildMu.Lock()
	defer c.rebuildMu.Unlock()
	c.mu.Lock()
	c.rebuilding, c.touched = true, map[string]bool{}
	c.held = false
	c.mu.Unlock()
	// Listed only now: an update before this point is in the list, one
	// after it is in touched.
	tools := list()
	entries := make(map[string]*entry, len(tools))
	nvisible := 0
	for _, e := range c.resolveAll(tools) {
		entries[e.tool.Name] = e
		if e.visible {
			nvisible++
		}
	}
	c.mu.Lock()
	changed := len(entries) != len(c.entries)
	for name, e := range entries {
		if old, ok := c.entries[name]; !ok || old.visible != e.visible || old.variant != e.variant {
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
		c.update(touched, lookup)
	}
	return changed
}

// update re-resolves the named tools from the FSM.
func (c *catalog) update(names []string, lookup func(string) (*raftfsm.Tool, bool)) {
	if c.isHeld() {
		return
	}
	tools := make([]*raftfsm.Tool, len(names))
	for i, name := range names {
		tools[i], _ = lookup(name)
	}
	fresh := make(map[string]*entry, len(names))
	for i, e := range c.resolveAll(tools) {
		fresh[names[i]] = e
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range fresh {
		if old, ok := c.entries[name]; ok && old.visible {
			c.nvisible--
		}
		if e == nil {
			delete(c.entries, name)
		} else {
			c.entries[name] = e
			if e.visible {
				c.nvisible++
			}
		}
		if c.rebuilding {
			c.touched[name] = true
		}
	}
	c.dirty = true
}

// get returns a tool's entry.
func (c *catalog) get(name string) (*entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[name]
	return e, ok
}

// visible lists the tools this host can run, sorted by name.
func (c *catalog) visible() []p9.ToolEntry {
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
			if e.visible {
				idx = append(idx, p9.ToolEntry{Name: name, Description: e.resolved.Description})
			}
		}
		sort.Slice(idx, func(i, j int) bool { return idx[i].Name < idx[j].Name })
		c.index, c.dirty = idx, false
	}
	return c.index
}

// caps is what this host can run, for gossip: each visible tool and the
// index of the variant that matched (-1 without variants).
func (c *catalog) caps() cluster.Caps {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(cluster.Caps, len(c.entries))
	for name, e := range c.entries {
		if e.visible {
			out[name] = e.variant
		}
	}
	return out
}

// count is how many tools this host can run.
func (c *catalog) count() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.nvisible
}
