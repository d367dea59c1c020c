package node

import (
	"fmt"
	"sync"
	"testing"

	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
)

// An update made while a rebuild resolves is not lost to the rebuild's
// swap, and the visible count stays right.
func TestCatalog_UpdateDuringRebuild(t *testing.T) {
	var mu sync.Mutex
	tools := map[string]*raftfsm.Tool{}
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("t%04d", i)
		tools[name] = &raftfsm.Tool{Name: name, Meta: []byte(`{"description":"x"}`)}
	}
	lookup := func(name string) (*raftfsm.Tool, bool) {
		mu.Lock()
		defer mu.Unlock()
		t, ok := tools[name]
		return t, ok
	}
	snapshot := func() []*raftfsm.Tool {
		mu.Lock()
		defer mu.Unlock()
		out := make([]*raftfsm.Tool, 0, len(tools))
		for _, t := range tools {
			out = append(out, t)
		}
		return out
	}
	c := newCatalog(registry.LocalHost(), "n1")
	c.rebuild(snapshot, lookup)
	for round := 0; round < 20; round++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.rebuild(snapshot, lookup)
		}()
		name := fmt.Sprintf("new%02d", round)
		mu.Lock()
		tools[name] = &raftfsm.Tool{Name: name, Meta: []byte(`{"description":"y"}`)}
		delete(tools, fmt.Sprintf("t%04d", round))
		mu.Unlock()
		c.update([]string{name, fmt.Sprintf("t%04d", round)}, lookup)
		<-done
		if _, ok := c.get(name); !ok {
			t.Fatalf("round %d: the update of %s was lost to a rebuild", round, name)
		}
		if _, ok := c.get(fmt.Sprintf("t%04d", round)); ok {
			t.Fatalf("round %d: a withdrawn tool came back after a rebuild", round)
		}
		if c.count() != len(snapshot()) || len(c.visible()) != c.count() {
			t.Fatalf("round %d: count %d, visible %d, tools %d", round, c.count(), len(c.visible()), len(snapshot()))
		}
	}
}

// A hint is used only for the bytes it was parsed from: a tool published
// with other bytes than the scan read is parsed from what was published.
// An entry whose bytes did not change keeps its parse.
func TestCatalog_HintsOnlyForTheSameBytes(t *testing.T) {
	c := newCatalog(registry.LocalHost(), "n1")
	scanned := []byte(`{"description":"as scanned"}`)
	m, _, err := registry.ParseMeta(scanned)
	if err != nil {
		t.Fatal(err)
	}
	c.offer(map[string]registry.DirTool{
		"a": {Name: "a", Meta: scanned, Parsed: m},
		"b": {Name: "b", Meta: scanned, Parsed: m},
	})
	tools := map[string]*raftfsm.Tool{
		"a": {Name: "a", Meta: []byte(`{"description":"as scanned"}`)},
		"b": {Name: "b", Meta: []byte(`{"description":"changed since"}`)},
	}
	lookup := func(name string) (*raftfsm.Tool, bool) { tl, ok := tools[name]; return tl, ok }
	c.update([]string{"a", "b"}, lookup)
	c.dropHints()
	a, _ := c.get("a")
	b, _ := c.get("b")
	if a.meta != m {
		t.Error("a: the scan's parse of the same bytes was not used")
	}
	if b.meta == m || b.resolved.Description != "changed since" {
		t.Errorf("b: resolved %q from the scan's parse of other bytes", b.resolved.Description)
	}
	// Republished with the same bytes (a new Time): the parse is kept.
	tools["b"] = &raftfsm.Tool{Name: "b", Meta: []byte(`{"description":"changed since"}`), Time: 1}
	before := b.meta
	c.update([]string{"b"}, lookup)
	if b2, _ := c.get("b"); b2.meta != before || b2.tool != tools["b"] {
		t.Error("b: the same bytes were parsed again, or the entry kept the old tool")
	}
}

// While held, updates wait for the next rebuild, which lists every tool
// and ends the hold; updates after it apply at once.
func TestCatalog_Hold(t *testing.T) {
	c := newCatalog(registry.LocalHost(), "n1")
	tools := map[string]*raftfsm.Tool{}
	for i := range 300 {
		name := fmt.Sprintf("t%03d", i)
		tools[name] = &raftfsm.Tool{Name: name, Meta: []byte(`{"description":"x"}`)}
	}
	lookup := func(name string) (*raftfsm.Tool, bool) { tl, ok := tools[name]; return tl, ok }
	list := func() []*raftfsm.Tool {
		out := make([]*raftfsm.Tool, 0, len(tools))
		for _, tl := range tools {
			out = append(out, tl)
		}
		return out
	}
	c.hold()
	c.update([]string{"t000", "t001"}, lookup)
	if c.count() != 0 {
		t.Fatalf("held: %d tools visible", c.count())
	}
	c.rebuild(list, lookup)
	if c.count() != 300 || len(c.visible()) != 300 {
		t.Fatalf("after the rebuild: %d tools (%d listed), want 300", c.count(), len(c.visible()))
	}
	tools["late"] = &raftfsm.Tool{Name: "late", Meta: []byte(`{"description":"y"}`)}
	c.update([]string{"late"}, lookup)
	if _, ok := c.get("late"); !ok || c.count() != 301 {
		t.Fatalf("an update after the rebuild was not applied: count %d", c.count())
	}
}
