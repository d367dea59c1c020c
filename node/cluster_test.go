package node

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/internal/testport"
)

// startMember runs a node that joins the gossip addresses given (none:
// it bootstraps).
func startMember(t testing.TB, name, root string, join ...string) *Node {
	t.Helper()
	return startMemberAt(t, name, root, "127.0.0.1:0", join...)
}

// startMemberAt is startMember with a given gossip address (a node that
// restarts finds its peers again at the addresses it last knew).
func startMemberAt(t testing.TB, name, root, gossip string, join ...string) *Node {
	t.Helper()
	return startMemberWith(t, name, root, gossip, nil, join...)
}

// startMemberWith is startMemberAt with mod, when given, applied to the
// node's Config first.
func startMemberWith(t testing.TB, name, root, gossip string, mod func(*Config), join ...string) *Node {
	t.Helper()
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       name, DataDir: filepath.Join(root, name),
		GossipAddr: gossip, Join: join,
		P9Listener: listen(t), ClusterListener: listen(t),
		LogOutput: testWriter{t},
	}
	if mod != nil {
		mod(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func voters(n *Node) []string {
	r := n.raftNode()
	if r == nil {
		return nil // a client that has not opened Raft yet
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	return out
}

func leaderOf(nodes ...*Node) *Node {
	for _, n := range nodes {
		if n.leading() {
			return n
		}
	}
	return nil
}

func TestCluster_ThreeNodesForwardingFailover(t *testing.T) {
	root := t.TempDir()
	n1 := startMember(t, "n1", root)
	n2 := startMember(t, "n2", root, n1.gossip.LocalAddr())
	n3 := startMember(t, "n3", root, n1.gossip.LocalAddr())
	waitFor(t, "three voters", 10*time.Second, func() bool { return len(voters(n1)) == 3 })

	// A write through a follower is read back there at once, and on the
	// others soon after.
	f2 := mount(t, n2.P9Addr())
	if got := mustAsk(t, f2, "session/new", "name=fw"); got != "fw\n" {
		t.Fatalf("session/new via follower = %q", got)
	}
	if got := readFile(t, f2, "session/idx"); !strings.Contains(got, "fw") {
		t.Fatalf("follower does not read its own write: %q", got)
	}
	f3 := mount(t, n3.P9Addr())
	waitFor(t, "the write on n3", 5*time.Second, func() bool { return strings.Contains(readFile(t, f3, "session/idx"), "fw") })
	if _, err := ask(f2, "session/new", "name=fw"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate through a follower: %v", err)
	}
	waitFor(t, "n2 to list three live members", 5*time.Second, func() bool {
		m := readFile(t, f2, "cluster/members")
		return strings.Count(m, " alive ") == 3 && strings.Count(m, " leader ") == 1 && strings.Count(m, " voter ") == 2
	})

	// The leader leaves: a new leader takes writes, and the one that left
	// is removed from the configuration.
	old := leaderOf(n1, n2, n3)
	old.Close()
	rest := []*Node{}
	for _, n := range []*Node{n1, n2, n3} {
		if n != old {
			rest = append(rest, n)
		}
	}
	start := time.Now()
	waitFor(t, "a new leader", 10*time.Second, func() bool { return leaderOf(rest...) != nil })
	fr := mount(t, rest[0].P9Addr())
	if got := mustAsk(t, fr, "session/new", "name=after"); got != "after\n" {
		t.Fatalf("write after failover = %q", got)
	}
	t.Logf("leader left; a write was accepted %s later", time.Since(start).Round(time.Millisecond))
	waitFor(t, "the old leader removed", 10*time.Second, func() bool {
		return fmt.Sprint(voters(leaderOf(rest...))) == fmt.Sprint([]string{rest[0].Name(), rest[1].Name()}) ||
			len(voters(leaderOf(rest...))) == 2
	})
}

// Every node of the cluster stops (each leaving in turn, as on SIGTERM)
// and starts again on its data directory: nothing acknowledged is lost,
// and the nodes form one cluster again without -join.
func TestCluster_WholeClusterRestart(t *testing.T) {
	root := t.TempDir()
	gossip := map[string]string{}
	for i, addr := range testport.Pick(t, 3) { // kept across the restart
		gossip[fmt.Sprintf("n%d", i+1)] = addr
	}
	n1 := startMemberAt(t, "n1", root, gossip["n1"])
	n2 := startMemberAt(t, "n2", root, gossip["n2"], gossip["n1"])
	n3 := startMemberAt(t, "n3", root, gossip["n3"], gossip["n1"])
	waitFor(t, "three voters", 10*time.Second, func() bool { return len(voters(n1)) == 3 })
	var acked []string
	for i, n := range []*Node{n1, n2, n3, n2, n3} {
		f := mount(t, n.P9Addr())
		name := fmt.Sprintf("w%d", i)
		mustAsk(t, f, "session/new", "name="+name)
		acked = append(acked, name)
	}
	// The leader last, so the others are removed while it leads.
	order := []*Node{}
	for _, n := range []*Node{n1, n2, n3} {
		if !n.leading() {
			order = append(order, n)
		}
	}
	order = append(order, leaderOf(n1, n2, n3))
	for _, n := range order {
		n.Close()
	}

	again := []*Node{
		startMemberAt(t, "n1", root, gossip["n1"]),
		startMemberAt(t, "n2", root, gossip["n2"]),
		startMemberAt(t, "n3", root, gossip["n3"]),
	}
	waitFor(t, "one leader and three voters again", 20*time.Second, func() bool {
		l := leaderOf(again...)
		return l != nil && len(voters(l)) == 3
	})
	for _, n := range again {
		f := mount(t, n.P9Addr())
		waitFor(t, n.Name()+" to have every acknowledged write", 10*time.Second, func() bool {
			idx := readFile(t, f, "session/idx")
			for _, w := range acked {
				if !strings.Contains(idx, w+"\n") {
					return false
				}
			}
			return true
		})
	}
	// And the cluster takes writes.
	f := mount(t, again[1].P9Addr())
	mustAsk(t, f, "session/new", "name=after")
}
