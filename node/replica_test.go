package node

import (
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/clusterport"
)

// The change stream carries the whole state, so it is served only through
// the cluster port's credential: a peer with the gossip key gets the
// stream; one with another key, or none, gets nothing, not even the
// first frame. The control is the same request with the key.
func TestStream_NeedsTheClusterCredential(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		P9Anon: trustedAnon,
		Name:   "n1", DataDir: filepath.Join(dir, "data"),
		GossipAddr:      "127.0.0.1:0",
		P9Listener:      listen(t),
		ClusterListener: listen(t),
		EncryptKey:      testKey(1),
		LogOutput:       testWriter{t},
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	addr := cfg.ClusterListener.Addr().String()
	waitFor(t, "n1 to be a server", 10*time.Second, n.rep.isServer.Load)

	// ask sends the protocol byte and a hello from index 0, and reads
	// the first frame's kind.
	ask := func(c net.Conn) (byte, error) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		var hello [9]byte
		hello[0] = clusterport.ProtoStream
		binary.BigEndian.PutUint64(hello[1:], 0)
		if _, err := c.Write(hello[:]); err != nil {
			return 0, err
		}
		var hdr [13]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return 0, err
		}
		return hdr[0], nil
	}
	t.Run("control: the cluster's key", func(t *testing.T) {
		c, err := mustKeyTLS(t, testKey(1), "peer").Dial(addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		kind, err := ask(c)
		if err != nil {
			t.Fatalf("no frame: %v", err)
		}
		if kind != 'E' && kind != 'S' && kind != 'H' {
			t.Fatalf("first frame kind %q", kind)
		}
	})
	t.Run("another key", func(t *testing.T) {
		c, err := mustKeyTLS(t, testKey(2), "intruder").Dial(addr, 5*time.Second)
		if err == nil {
			if kind, err := ask(c); err == nil {
				t.Fatalf("a peer with another key got a %q frame", kind)
			}
		}
	})
	t.Run("plain TCP", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if kind, err := ask(c); err == nil {
			t.Fatalf("a peer without the key got a %q frame", kind)
		}
	})
}

// A node that is not a server refuses the stream: a client's replica is
// not a source for others.
func TestStream_ClientRefuses(t *testing.T) {
	n, buf := bareNode(t, clusterport.DefaultLimits)
	c := pipeTo(n)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{clusterport.ProtoStream, 0, 0, 0, 0, 0, 0, 0, 0})
	if err := closedWithin(c, 5*time.Second); err != nil {
		t.Fatalf("a client kept the stream request open: %v", err)
	}
	waitFor(t, "the refusal in the log", 5*time.Second, func() bool {
		return len(buf.String()) > 0
	})
}

// A client follows one server's stream. That server is cut off from the
// other servers' Raft (a partition between servers that leaves the
// client reaching it): it has no leader and gets no new entries, and the
// client moves to a server that does, so it sees the writes made since.
// The control, a client that waits an hour before it moves, misses them
// for as long as the cut lasts.
func TestInMem_ClientLeavesServerCutOffFromLeader(t *testing.T) {
	t.Parallel()
	for _, protect := range []bool{true, false} {
		leaderless := time.Second
		if !protect {
			leaderless = time.Hour
		}
		c := newInmemClusterWith(t, 3, func(cfg *Config) { cfg.StreamLeaderless = leaderless }, "n1", "n2", "n3")
		client := c.addClient("n4")
		all := c.up()
		waitAdminTokens(t, c)
		waitFor(t, "n4 to follow a server", 10*time.Second, func() bool { return client.Ready() == nil })
		st, _ := client.followerState()
		followed := strings.TrimPrefix(st.Server, "raft-")
		for _, o := range others(all, followed, "n4") {
			c.cutRaft(followed, o)
		}
		var l *Node
		waitFor(t, "a leader on the other side of the cut", 10*time.Second, func() bool {
			l = c.leader()
			return l != nil && l.Name() != followed
		})
		newSession(t, l, "during")
		idx := l.fsm.LastIndex()
		if !protect {
			deadline := time.Now().Add(4 * time.Second) // twice what the client needs to move
			for time.Now().Before(deadline) {
				if client.fsm.LastIndex() >= idx {
					t.Fatalf("control: n4 applied index %d while following %s, cut off", idx, followed)
				}
				time.Sleep(20 * time.Millisecond)
			}
			c.heal()
			continue
		}
		waitFor(t, "n4 to apply the write made during the cut", 15*time.Second, func() bool { return client.fsm.LastIndex() >= idx })
		if st, _ := client.followerState(); st.Server == "raft-"+followed {
			t.Fatalf("n4 has the write but still follows %s", followed)
		}
		c.heal()
	}
}
