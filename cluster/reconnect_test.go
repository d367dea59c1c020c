package cluster

import (
	"io"
	"log"
	"testing"
	"time"
)

// pickFailed tries only members that failed (not left, not alive, not
// itself), within the reconnect timeout, and one at a time each.
func TestReconnect_PickFailed(t *testing.T) {
	c := newCluster("me", Meta{}, log.New(io.Discard, "", 0))
	c.reconnectFor = time.Hour
	now := time.Now()
	c.members = map[string]tracked{
		"me":    {m: Member{Name: "me", Addr: "10.0.0.1:7946", State: "alive"}},
		"alive": {m: Member{Name: "alive", Addr: "10.0.0.2:7946", State: "alive"}},
		"left":  {m: Member{Name: "left", Addr: "10.0.0.3:7946", State: "left"}, gone: now},
		"old":   {m: Member{Name: "old", Addr: "10.0.0.4:7946", State: "dead"}, gone: now.Add(-2 * time.Hour)},
		"dead":  {m: Member{Name: "dead", Addr: "10.0.0.5:7946", State: "dead"}, gone: now.Add(-time.Minute)},
	}
	name, addr, ok := c.pickFailed(now)
	if !ok || name != "dead" || addr != "10.0.0.5:7946" {
		t.Fatalf("picked %q %q %v, want dead at 10.0.0.5:7946", name, addr, ok)
	}
	if _, _, ok := c.pickFailed(now); ok {
		t.Fatal("picked a member while a try to it was under way")
	}
	delete(c.trying, "dead")
	// Control: past the reconnect timeout the same member is not tried.
	if _, _, ok := c.pickFailed(now.Add(2 * time.Hour)); ok {
		t.Fatal("tried a member failed longer than the reconnect timeout")
	}
}
