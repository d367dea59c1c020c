package node

import (
	"os"
	"slices"
	"testing"
	"time"
)

// A burst of joins is written once at its start and once when the window
// ends, not once per join; a node's own join (nothing to write) does not
// open the window.
func Test_PeerSaves_Coalesced(t *testing.T) {
	var writes int
	members := 0
	save := func() bool {
		if members == 0 {
			return false
		}
		writes++
		return true
	}
	var p peerSaves
	t0 := time.Now()
	p.changed(t0, save) // this node's own join: nothing to write
	if writes != 0 || p.due() != nil {
		t.Fatalf("own join: %d writes, pending %v", writes, p.due() != nil)
	}
	members = 1
	p.changed(t0.Add(time.Millisecond), save)
	if writes != 1 {
		t.Fatalf("the first peer's join was not written at once (%d writes)", writes)
	}
	for i := range 98 {
		members++
		p.changed(t0.Add(time.Duration(2+i)*time.Millisecond), save)
	}
	if writes != 1 || p.due() == nil {
		t.Fatalf("98 more joins within the window: %d writes (want 1), pending %v", writes, p.due() != nil)
	}
	p.flush(save) // the window's end (or the node's stop)
	if writes != 2 || p.due() != nil {
		t.Fatalf("at the window's end: %d writes (want 2), pending %v", writes, p.due() != nil)
	}
	p.flush(save)
	if writes != 2 {
		t.Fatal("a flush with nothing pending wrote")
	}
	p.changed(t0.Add(peersSaveEvery+time.Second), save)
	if writes != 3 {
		t.Fatal("a change after a quiet window was not written at once")
	}
}

// With real nodes: a node remembers its first peer at once, and a member
// that joins soon after (within the window the first write opened) once it
// stops.
func Test_Node_PeersSavedCoalescedAndAtStop(t *testing.T) {
	root := t.TempDir()
	peersOf := func(n *Node) []string {
		b, err := os.ReadFile(n.peersFile())
		if err != nil {
			return nil
		}
		addrs := n.loadPeers()
		if addrs == nil {
			t.Fatalf("unreadable %s: %q", n.peersFile(), b)
		}
		slices.Sort(addrs)
		return addrs
	}
	n1 := startMember(t, "n1", root)
	n2 := startMember(t, "n2", root, n1.gossip.LocalAddr())
	waitFor(t, "n2 to remember n1", 10*time.Second, func() bool { return len(peersOf(n2)) == 1 })
	n3 := startMember(t, "n3", root, n1.gossip.LocalAddr())
	waitFor(t, "n2 to see n3", 10*time.Second, func() bool { return gossipState(n2, "n3") == "alive" })
	// n3's join fell within the window n1's opened on n2 (unless this test
	// was slower than the window: then it was written at once).
	if got := peersOf(n2); len(got) == 2 {
		t.Logf("n3 joined more than %v after n1 here: written at once", peersSaveEvery)
	}
	n2.Close()
	want := []string{n1.gossip.LocalAddr(), n3.gossip.LocalAddr()}
	slices.Sort(want)
	if got := peersOf(n2); !slices.Equal(got, want) {
		t.Fatalf("n2 stopped remembering %v, want %v", got, want)
	}
}
