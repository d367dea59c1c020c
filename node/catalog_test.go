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
