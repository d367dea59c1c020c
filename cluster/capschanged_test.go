package cluster

import (
	"slices"
	"sync"
	"testing"
)

// CapsChanged hears of every tool whose facts changed, here and from
// other nodes, and of nothing that repeats what is known: so a watcher
// (an MCP session) needs no polling of where tools run.
func TestCaps_Changed(t *testing.T) {
	c := bare("me")
	var mu sync.Mutex
	var got []string
	c.changed = func(tools []string) {
		mu.Lock()
		got = append(got, tools...)
		mu.Unlock()
	}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		slices.Sort(out)
		return out
	}
	alive(c, "x")
	c.notifyMsg(msg(msgDelta, "x", we("grep", 10, -1, false), we("ffmpeg", 10, 2, false)))
	if g := take(); !slices.Equal(g, []string{"ffmpeg", "grep"}) {
		t.Errorf("a new node's tools: %v", g)
	}
	c.notifyMsg(msg(msgDelta, "x", we("grep", 11, -1, false))) // newer, same facts
	c.notifyMsg(msg(msgDelta, "x", we("ffmpeg", 9, 1, false))) // older
	if g := take(); len(g) != 0 {
		t.Errorf("nothing changed, yet told %v", g)
	}
	c.notifyMsg(msg(msgDelta, "x", we("ffmpeg", 12, 0, true)))
	if g := take(); !slices.Equal(g, []string{"ffmpeg"}) {
		t.Errorf("a tombstone: %v", g)
	}
	c.SetCapabilities(Caps{"echo": -1})
	if g := take(); !slices.Equal(g, []string{"echo"}) {
		t.Errorf("this node's own change: %v", g)
	}
	c.SetCapabilities(Caps{"echo": -1})
	if g := take(); len(g) != 0 {
		t.Errorf("the same capabilities again: %v", g)
	}
}
