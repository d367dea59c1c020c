package catalog

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
	c := New(registry.LocalHost(), "n1")
	c.Rebuild(snapshot, lookup)
	for round := 0; round < 20; round++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Rebuild(snapshot, lookup)
		}()
		name := fmt.Sprintf("new%02d", round)
		mu.Lock()
		tools[name] = &raftfsm.Tool{Name: name, Meta: []byte(`{"description":"y"}`)}
		delete(tools, fmt.Sprintf("t%04d", round))
		mu.Unlock()
		c.Update([]string{name, fmt.Sprintf("t%04d", round)}, lookup)
		<-done
		if _, ok := c.Get(name); !ok {
			t.Fatalf("round %d: the update of %s was lost to a rebuild", round, name)
		}
		if _, ok := c.Get(fmt.Sprintf("t%04d", round)); ok {
			t.Fatalf("round %d: a withdrawn tool came back after a rebuild", round)
		}
		if c.Count() != len(snapshot()) || len(c.Visible()) != c.Count() {
			t.Fatalf("round %d: count %d, visible %d, tools %d", round, c.Count(), len(c.Visible()), len(snapshot()))
		}
	}
}

// A hint is used only for the bytes it was parsed from: a tool published
// with other bytes than the scan read is parsed from what was published.
// An entry whose bytes did not change keeps its parse.
func TestCatalog_HintsOnlyForTheSameBytes(t *testing.T) {
	c := New(registry.LocalHost(), "n1")
	scanned := []byte(`{"description":"as scanned"}`)
	m, _, err := registry.ParseMeta(scanned)
	if err != nil {
		t.Fatal(err)
	}
	c.Offer(map[string]registry.DirTool{
		"a": {Name: "a", Meta: scanned, Parsed: m},
		"b": {Name: "b", Meta: scanned, Parsed: m},
	})
	tools := map[string]*raftfsm.Tool{
		"a": {Name: "a", Meta: []byte(`{"description":"as scanned"}`)},
		"b": {Name: "b", Meta: []byte(`{"description":"changed since"}`)},
	}
	lookup := func(name string) (*raftfsm.Tool, bool) { tl, ok := tools[name]; return tl, ok }
	c.Update([]string{"a", "b"}, lookup)
	c.DropHints()
	a, _ := c.Get("a")
	b, _ := c.Get("b")
	if a.Meta != m {
		t.Error("a: the scan's parse of the same bytes was not used")
	}
	if b.Meta == m || b.Resolved.Description != "changed since" {
		t.Errorf("b: resolved %q from the scan's parse of other bytes", b.Resolved.Description)
	}
	// Republished with the same bytes (a new Time): the parse is kept.
	tools["b"] = &raftfsm.Tool{Name: "b", Meta: []byte(`{"description":"changed since"}`), Time: 1}
	before := b.Meta
	c.Update([]string{"b"}, lookup)
	if b2, _ := c.Get("b"); b2.Meta != before || b2.Tool != tools["b"] {
		t.Error("b: the same bytes were parsed again, or the entry kept the old tool")
	}
}

// While held, updates wait for the next rebuild, which lists every tool
// and ends the hold; updates after it apply at once.
func TestCatalog_Hold(t *testing.T) {
	c := New(registry.LocalHost(), "n1")
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
	c.Hold()
	c.Update([]string{"t000", "t001"}, lookup)
	if c.Count() != 0 {
		t.Fatalf("held: %d tools visible", c.Count())
	}
	c.Rebuild(list, lookup)
	if c.Count() != 300 || len(c.Visible()) != 300 {
		t.Fatalf("after the rebuild: %d tools (%d listed), want 300", c.Count(), len(c.Visible()))
	}
	tools["late"] = &raftfsm.Tool{Name: "late", Meta: []byte(`{"description":"y"}`)}
	c.Update([]string{"late"}, lookup)
	if _, ok := c.Get("late"); !ok || c.Count() != 301 {
		t.Fatalf("an update after the rebuild was not applied: count %d", c.Count())
	}
}
