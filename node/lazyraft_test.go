package node

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testport"
)

// A node that joins with no Raft state is a client without Raft: nothing
// of Raft's on disk, no Raft running, and yet it serves the replicated
// state and its own writes; the control: the nodes that bootstrapped or
// were added at once opened Raft. When a server leaves, the leader adds a
// client in its place: the client opens Raft at the leader's first
// request, becomes a server with the log on disk and keeps every write;
// a client the leader did not add still has no Raft.
func TestClient_OpensRaftOnlyWhenAdded(t *testing.T) {
	root := t.TempDir()
	start := func(name string, join ...string) *Node {
		t.Helper()
		return startMemberWith(t, name, root, "127.0.0.1:0", func(c *Config) { c.Voters = 3 }, join...)
	}
	n1 := start("n1")
	seed := n1.gossip.LocalAddr()
	n2, n3 := start("n2", seed), start("n3", seed)
	waitFor(t, "three voters", 15*time.Second, func() bool { return len(voters(n1)) == 3 })
	n4, n5 := start("n4", seed), start("n5", seed)
	for _, c := range []*Node{n4, n5} {
		waitFor(t, c.Name()+" to follow a server", 15*time.Second, func() bool { return c.Ready() == nil })
	}

	// Clients: no Raft, nothing of it on disk; a write through one is
	// read back there.
	f4 := mount(t, n4.P9Addr())
	if got := mustAsk(t, f4, "session/new", "name=before"); got != "before\n" {
		t.Fatalf("session/new through a client = %q", got)
	}
	if got := readFile(t, f4, "session/idx"); !strings.Contains(got, "before") {
		t.Fatalf("the client does not read its own write: %q", got)
	}
	for _, c := range []*Node{n4, n5} {
		if c.raftNode() != nil || raftStateOnDisk(c.raftDir()) {
			t.Fatalf("%s, a client, opened Raft (raft %v, state on disk %v)", c.Name(), c.raftNode() != nil, raftStateOnDisk(c.raftDir()))
		}
	}
	// The control: the servers did.
	for _, s := range []*Node{n1, n2, n3} {
		if s.raftNode() == nil || !raftStateOnDisk(s.raftDir()) {
			t.Fatalf("%s, a server, has no Raft (raft %v, state on disk %v)", s.Name(), s.raftNode() != nil, raftStateOnDisk(s.raftDir()))
		}
	}

	// A voter that is not the leader leaves: the leader adds a client in
	// its place (and may add the other as a non-voter on the way).
	gone := n3
	if n3.leading() {
		gone = n2
	}
	gone.Close()
	rest := n1
	if gone == n1 {
		rest = n2
	}
	inConfig := func(name string) bool {
		f := rest.raftNode().GetConfiguration()
		if f.Error() != nil {
			return false
		}
		for _, s := range f.Configuration().Servers {
			if string(s.ID) == name {
				return true
			}
		}
		return false
	}
	waitFor(t, "a client to be a voter", 20*time.Second, func() bool {
		v := strings.Join(voters(rest), ",")
		return len(voters(rest)) == 3 && (strings.Contains(v, "n4") || strings.Contains(v, "n5"))
	})
	added := 0
	for _, c := range []*Node{n4, n5} {
		if !inConfig(c.Name()) {
			if c.raftNode() != nil || raftStateOnDisk(c.raftDir()) {
				t.Fatalf("%s, still a client, opened Raft", c.Name())
			}
			continue
		}
		added++
		waitFor(t, c.Name()+" to call itself a server", 10*time.Second, c.rep.isServer.Load)
		if c.raftNode() == nil || !raftStateOnDisk(c.raftDir()) {
			t.Fatalf("%s, now a server, has no Raft (raft %v, state on disk %v)", c.Name(), c.raftNode() != nil, raftStateOnDisk(c.raftDir()))
		}
	}
	if added == 0 {
		t.Fatal("no client was added")
	}
	// Every write is kept, and new ones are taken through either.
	if got := readFile(t, f4, "session/idx"); !strings.Contains(got, "before") {
		t.Fatalf("n4 lost a write: %q", got)
	}
	if got := mustAsk(t, f4, "session/new", "name=after"); got != "after\n" {
		t.Fatalf("session/new through n4 = %q", got)
	}
	f5 := mount(t, n5.P9Addr())
	waitFor(t, "the write on n5", 5*time.Second, func() bool { return strings.Contains(readFile(t, f5, "session/idx"), "after") })
	if got := readFile(t, f5, "session/idx"); !strings.Contains(got, "before") {
		t.Fatalf("n5 lost a write: %q", got)
	}
}

// A client restarted on its data directory without -join has no Raft
// state, but it has been in a cluster (it remembers its peers): it joins
// them again as a client instead of bootstrapping a cluster of its own.
func TestClient_RestartedWithoutJoinDoesNotBootstrap(t *testing.T) {
	root := t.TempDir()
	g2 := testport.One(t) // n2's gossip, the same after the restart
	start := func(name, gossip string, join ...string) *Node {
		t.Helper()
		return startMemberWith(t, name, root, gossip, func(c *Config) { c.Voters = 1 }, join...)
	}
	n1 := start("n1", "127.0.0.1:0")
	n2 := start("n2", g2, n1.gossip.LocalAddr())
	waitFor(t, "n2 to follow n1", 15*time.Second, func() bool { return n2.Ready() == nil })
	waitFor(t, "n2 to remember its peers", 10*time.Second, func() bool {
		_, err := os.Stat(n2.peersFile())
		return err == nil
	})
	f1 := mount(t, n1.P9Addr())
	mustAsk(t, f1, "session/new", "name=kept")
	n2.Close()

	n2 = start("n2", g2) // no -join
	if n2.raftNode() != nil || raftStateOnDisk(n2.raftDir()) {
		t.Fatal("the restarted client opened Raft: it bootstrapped a cluster of its own")
	}
	waitFor(t, "n2 to follow n1 again", 15*time.Second, func() bool { return n2.Ready() == nil })
	f2 := mount(t, n2.P9Addr())
	if got := readFile(t, f2, "session/idx"); !strings.Contains(got, "kept") {
		t.Fatalf("the restarted client lacks the cluster's state: %q", got)
	}
	if got := readFile(t, f2, "node"); !strings.Contains(got, "role client\n") {
		t.Fatalf("the restarted client is not a client:\n%s", got)
	}
}
