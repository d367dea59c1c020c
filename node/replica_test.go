package node

import (
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// The change stream carries the whole state, so it is served only through
// the cluster port's credential: a peer with the gossip key gets the
// stream; one with another key, or none, gets nothing, not even the
// first frame. The control is the same request with the key.
func Test_Stream_NeedsTheClusterCredential(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Name: "n1", DataDir: filepath.Join(dir, "data"),
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
		hello[0] = protoStream
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
		c, err := mustKeyTLS(t, testKey(1), "peer").dial(addr, 5*time.Second)
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
		c, err := mustKeyTLS(t, testKey(2), "intruder").dial(addr, 5*time.Second)
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
func Test_Stream_ClientRefuses(t *testing.T) {
	n, buf := bareNode(t, defaultPortLimits)
	c := pipeTo(n)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte{protoStream, 0, 0, 0, 0, 0, 0, 0, 0})
	if err := closedWithin(c, 5*time.Second); err != nil {
		t.Fatalf("a client kept the stream request open: %v", err)
	}
	waitFor(t, "the refusal in the log", 5*time.Second, func() bool {
		return len(buf.String()) > 0
	})
}
