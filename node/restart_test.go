package node

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/p9"
)

// stateOf is n's replicated state as its FSM's snapshot encodes it: two
// replicas that applied the same log give the same bytes.
func stateOf(t *testing.T, n *Node) []byte {
	t.Helper()
	snap, err := n.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// bufSink is a raft.SnapshotSink in memory.
type bufSink struct{ bytes.Buffer }

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { return nil }
func (s *bufSink) Close() error  { return nil }

// waitSameState waits until every running node holds the leader's state.
func waitSameState(t *testing.T, c *inmemCluster, d time.Duration) {
	t.Helper()
	var why string
	deadline := time.Now().Add(d)
	for {
		why = ""
		l := c.leader()
		if l == nil {
			why = "no leader"
		} else {
			want := stateOf(t, l)
			for _, name := range c.up() {
				if n := c.node(name); !bytes.Equal(stateOf(t, n), want) {
					why = fmt.Sprintf("%s (index %d) differs from the leader %s (index %d)", name, n.fsm.LastIndex(), l.Name(), l.fsm.LastIndex())
					break
				}
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A node that received the state through the change stream, while a
// client, and then became a server must serve a client that follows it
// from index 0 the whole state, not only what Raft fed it after it
// joined. The case as an operator meets it: a three-voter cluster whose
// servers were clients first; the bootstrap node stops gracefully
// (leaves, and the leader removes it from Raft) and starts again: in no
// configuration, it is a client, follows one of the others from 0, and
// must end with the state it acknowledged before it stopped, then every
// other node in turn the same.
func TestInMem_RestartAfterLeaveServesEverything(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 1, "n1")
	for i := range 5 {
		newSession(t, c.node("n1"), fmt.Sprintf("alone%d", i))
	}
	// n2 and n3 join as clients of a one-voter cluster: the stream feeds
	// them the state. Then n1 keeps three voters, and Raft takes them.
	c.voters = 3
	c.addClient("n2")
	c.addClient("n3")
	for _, name := range []string{"n2", "n3"} {
		n := c.node(name)
		waitFor(t, name+" to apply n1's state from the stream", 10*time.Second, func() bool { return hasSessions(n, "alone4") })
	}
	c.mu.Lock()
	c.members["n1"].cfg.Voters = 3
	c.mu.Unlock()
	c.crash("n1")
	c.restart("n1")
	waitFor(t, "three voters", 15*time.Second, func() bool {
		l := c.leader()
		return l != nil && countVoters(suffrages(l)) == 3
	})
	newSession(t, c.node("n2"), "formed")
	waitSameState(t, c, 15*time.Second)

	for _, name := range []string{"n1", "n2", "n3"} {
		c.stop(name)
		waitFor(t, "a leader without "+name, 10*time.Second, func() bool { return c.leader() != nil })
		newSession(t, c.node(others(c.up(), name)[0]), "without-"+name)
		r := c.restart(name)
		waitSameState(t, c, 15*time.Second)
		waitFor(t, name+" back as a voter", 15*time.Second, func() bool {
			l := c.leader()
			return l != nil && countVoters(suffrages(l)) == 3
		})
		newSession(t, r, "through-"+name)
		waitSameState(t, c, 5*time.Second)
	}
}

// Restarts of every kind (a graceful stop, a crash) of random nodes,
// interleaved with writes through random running nodes; at the end every
// replica holds exactly the leader's state, and every acknowledged
// write is in it.
func TestInMem_RandomRestarts(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	c := newInmemCluster(t, 3, "n1", "n2", "n3")
	c.addClient("n4")
	var acked []string
	write := func(step int) {
		up := c.up()
		n := c.node(up[rng.IntN(len(up))])
		name := fmt.Sprintf("w%d", step)
		// A write may fail while a leader is being elected; only an
		// acknowledged one must survive.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if got, err := anonOf(n).NewSession("name=" + name); err == nil && got == name {
				acked = append(acked, name)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	names := []string{"n1", "n2", "n3", "n4"}
	for step := range 12 {
		write(step)
		name := names[rng.IntN(len(names))]
		if rng.IntN(2) == 0 {
			c.stop(name)
		} else {
			c.crash(name)
		}
		write(100 + step)
		c.restart(name)
		// A majority of voters must be back before the next node stops,
		// as in a rolling restart.
		waitFor(t, "a leader", 15*time.Second, func() bool { return c.leader() != nil })
	}
	waitSameState(t, c, 20*time.Second)
	if len(acked) < 12 {
		t.Fatalf("only %d of 24 writes were acknowledged", len(acked))
	}
	for _, name := range c.up() {
		if n := c.node(name); !hasSessions(n, acked...) {
			t.Fatalf("%s lacks an acknowledged write", name)
		}
	}
}

// A node that cannot show it is current answers an attach with a token
// it does not know "catching up", never "unknown token": here one
// restarted cut off from the others, without the token made while it was
// down. Once it reaches the leader it knows the token; a token nobody
// made is still refused as unknown.
func TestInMem_UnknownTokenWhileBehindIsCatchingUp(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2", "n3")
	waitAdminTokens(t, c)
	c.crash("n3")
	l := c.waitLeader("n1", "n2")
	secret, err := l.NewToken(p9.Principal{Name: "test", Role: p9.RoleAdmin}, "made-while-down", p9.RoleRead, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.partition([]string{"n3"}, []string{"n1", "n2"})
	r := c.restart("n3")
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	_, err = r.attach(secret, remote)
	if !errors.Is(err, errCatchingUp) {
		t.Fatalf("attach to a node cut off and behind: %v, want %v", err, errCatchingUp)
	}
	c.heal()
	waitFor(t, "n3 to know the token", 15*time.Second, func() bool {
		p, err := r.attach(secret, remote)
		return err == nil && p.Name == "made-while-down"
	})
	if _, err := r.attach("tn_nobody-made-this", remote); !errors.Is(err, errBadToken) {
		t.Fatalf("attach with a token nobody made: %v, want %v", err, errBadToken)
	}
}

// Two of three voters are gone for good: the survivor has no quorum and
// cannot elect itself. Its operator writes DATA/raft/peers.json naming it
// alone; at its next start it recovers Raft with that configuration,
// leads, keeps the state, and takes writes. A malformed file stops the
// start with an error naming the file, and changes nothing.
func TestInMem_PeersFileRecoversLostQuorum(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2", "n3")
	l := c.waitLeader("n1", "n2", "n3")
	newSession(t, l, "before")
	waitSameState(t, c, 10*time.Second)
	c.crash("n2")
	c.crash("n3")
	c.crash("n1")
	n1 := c.members["n1"]
	peers := filepath.Join(n1.cfg.DataDir, "raft", PeersFile)

	// Control: without the file, the survivor does not lead.
	alone := c.restart("n1")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if alone.leading() {
			t.Fatal("control: the survivor leads without the peers file")
		}
	}
	c.crash("n1")
	alone.Close()
	n1.node = nil

	if err := os.WriteFile(peers, []byte(`[{"id": "n1"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := n1.cfg
	cfg.P9Listener = listen(t)
	if n, err := New(cfg); err == nil {
		n.Close()
		t.Fatal("a peers file without an address was accepted")
	} else if !strings.Contains(err.Error(), PeersFile) {
		t.Fatalf("the error does not name the file: %v", err)
	}

	conf := fmt.Sprintf(`[{"id": "n1", "address": %q}]`, n1.raftTr.LocalAddr())
	if err := os.WriteFile(peers, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.start(n1)
	waitFor(t, "n1 to lead alone", 10*time.Second, func() bool { return r.leading() })
	if !hasSessions(r, "before") {
		t.Fatal("the recovered node lost the state")
	}
	newSession(t, r, "after")
	if _, err := os.Stat(peers + ".done"); err != nil {
		t.Fatalf("the peers file was not set aside: %v", err)
	}
	if _, err := os.Stat(peers); err == nil {
		t.Fatal("the peers file is still there: the recovery would run again")
	}
}

// The data directory records its format at the first start; a node
// refuses one of another format, or a FORMAT file it cannot read, naming
// the directory and both formats, and starts again once it is right.
func TestDataFormatRefusedWhenUnknown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	config := func() Config {
		return Config{Name: "n1", DataDir: dir, GossipAddr: "127.0.0.1:0",
			P9Listener: listen(t), ClusterListener: listen(t), LogOutput: testWriter{t}}
	}
	n, err := New(config())
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	b, err := os.ReadFile(filepath.Join(dir, FormatFile))
	if err != nil || string(b) != "toolnode data 1\n" {
		t.Fatalf("FORMAT: %q, %v", b, err)
	}
	for content, want := range map[string]string{
		"toolnode data 2\n": "has format 2; this build keeps format 1",
		"something else\n":  "is not a toolnode format line",
	} {
		if err := os.WriteFile(filepath.Join(dir, FormatFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if m, err := New(config()); err == nil {
			m.Close()
			t.Fatalf("FORMAT %q: the node started", content)
		} else if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("FORMAT %q: %v, want %q and the directory", content, err, want)
		}
	}
}
