package node

import (
	"sort"
	"sync"

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

	mu      sync.RWMutex
	entries map[string]*entry
	index   []p9.ToolEntry // visible tools, sorted; rebuilt lazily
	dirty   bool
}

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

func (c *catalog) resolve(t *raftfsm.Tool) *entry {
	e := &entry{tool: t, variant: -1}
	m, _, err := registry.ParseMeta(t.Meta)
	if err != nil {
		e.err = err
		return e
	}
	e.meta = m
	e.resolved, e.variant, e.visible = m.Resolve(c.host)
	return e
}

// rebuild re-resolves every tool (after a restore, and periodically: a
// binary may have been installed since). It reports whether anything
// became visible or hidden.
func (c *catalog) rebuild(tools []*raftfsm.Tool) bool {
	entries := make(map[string]*entry, len(tools))
	for _, t := range tools {
		entries[t.Name] = c.resolve(t)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := len(entries) != len(c.entries)
	for name, e := range entries {
		if old, ok := c.entries[name]; !ok || old.visible != e.visible || old.variant != e.variant {
			changed = true
		}
	}
	c.entries = entries
	c.dirty = true
	return changed
}

// update re-resolves the named tools from the FSM.
func (c *catalog) update(names []string, lookup func(string) (*raftfsm.Tool, bool)) {
	fresh := make(map[string]*entry, len(names))
	for _, name := range names {
		if t, ok := lookup(name); ok {
			fresh[name] = c.resolve(t)
		} else {
			fresh[name] = nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, e := range fresh {
		if e == nil {
			delete(c.entries, name)
		} else {
			c.entries[name] = e
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

// count is how many tools this host can run.
func (c *catalog) count() int { return len(c.visible()) }
