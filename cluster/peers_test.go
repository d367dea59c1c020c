package cluster

import (
	"testing"
	"time"
)

// A burst of joins is written once at its start and once when the window
// ends, not once per join; a node's own join (nothing to write) does not
// open the window.
func TestPeerSaves_Coalesced(t *testing.T) {
	var writes int
	members := 0
	save := func() bool {
		if members == 0 {
			return false
		}
		writes++
		return true
	}
	var p PeerSaves
	t0 := time.Now()
	p.Changed(t0, save) // this node's own join: nothing to write
	if writes != 0 || p.Due() != nil {
		t.Fatalf("own join: %d writes, pending %v", writes, p.Due() != nil)
	}
	members = 1
	p.Changed(t0.Add(time.Millisecond), save)
	if writes != 1 {
		t.Fatalf("the first peer's join was not written at once (%d writes)", writes)
	}
	for i := range 98 {
		members++
		p.Changed(t0.Add(time.Duration(2+i)*time.Millisecond), save)
	}
	if writes != 1 || p.Due() == nil {
		t.Fatalf("98 more joins within the window: %d writes (want 1), pending %v", writes, p.Due() != nil)
	}
	p.Flush(save) // the window's end (or the node's stop)
	if writes != 2 || p.Due() != nil {
		t.Fatalf("at the window's end: %d writes (want 2), pending %v", writes, p.Due() != nil)
	}
	p.Flush(save)
	if writes != 2 {
		t.Fatal("a flush with nothing pending wrote")
	}
	p.Changed(t0.Add(PeersSaveEvery+time.Second), save)
	if writes != 3 {
		t.Fatal("a change after a quiet window was not written at once")
	}
}
