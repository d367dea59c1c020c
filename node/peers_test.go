package node

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/toolnode/toolnode/cluster"
)

// With real nodes: a node remembers its first peer at once, and a member
// that joins soon after (within the window the first write opened) once it
// stops.
func TestNode_PeersSavedCoalescedAndAtStop(t *testing.T) {
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
		t.Logf("n3 joined more than %v after n1 here: written at once", cluster.PeersSaveEvery)
	}
	n2.Close()
	want := []string{n1.gossip.LocalAddr(), n3.gossip.LocalAddr()}
	slices.Sort(want)
	if got := peersOf(n2); !slices.Equal(got, want) {
		t.Fatalf("n2 stopped remembering %v, want %v", got, want)
	}
}
