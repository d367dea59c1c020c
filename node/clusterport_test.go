package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolnode/toolnode/clusterport"
)

// Cluster-port tests of this node's protocols under the port's bounds
// (the port's own tests are in package clusterport). Each refusal is
// paired with a control in which the same client gets through when the
// protection is off.

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustKeyTLS(t testing.TB, key []byte, name string) *clusterport.TLS {
	t.Helper()
	ct, err := clusterport.KeyTLS(key, name)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// bareNode serves cluster-port connections without Raft behind them:
// enough for connections that never get a message through.
func bareNode(t *testing.T, lim clusterport.Limits) (*Node, *syncBuf) {
	t.Helper()
	buf := &syncBuf{}
	n := &Node{logger: log.New(buf, "", 0), lim: lim}
	n.port = n.newPort()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	t.Cleanup(n.cancel)
	return n, buf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pipeTo connects a client end to n.ServeClusterConn.
func pipeTo(n *Node) net.Conn {
	client, server := net.Pipe()
	go n.ServeClusterConn(server)
	return client
}

func header(size uint32) []byte {
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], size)
	return h[:]
}

// closedWithin waits for c to be closed by the other end.
func closedWithin(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if err != nil && clusterport.IsTimeout(err) {
		return errors.New("still open")
	}
	return nil
}

func TestClusterPort_StalledMessagesAreClosed(t *testing.T) {
	short := clusterport.Limits{ForwardIdle: time.Minute, ForwardMsg: 200 * time.Millisecond, CallMsg: 200 * time.Millisecond, RaftMsg: time.Minute}
	for _, proto := range []byte{clusterport.ProtoForward, clusterport.ProtoCall} {
		t.Run(string(proto), func(t *testing.T) {
			n, logs := bareNode(t, short)
			c := pipeTo(n)
			defer c.Close()
			c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write(append([]byte{proto}, append(header(1000), "{\"cmd\":"...)...)); err != nil {
				t.Fatal(err)
			}
			if err := closedWithin(c, 5*time.Second); err != nil {
				t.Fatalf("a message stalled mid-way: %v", err)
			}
			if !strings.Contains(logs.String(), "deadline") {
				t.Errorf("no log line names the deadline:\n%s", logs)
			}

			// Control: with the deadline long, the same stalled sender is
			// still connected.
			n2, _ := bareNode(t, clusterport.DefaultLimits)
			c2 := pipeTo(n2)
			defer c2.Close()
			c2.SetWriteDeadline(time.Now().Add(2 * time.Second))
			c2.Write(append([]byte{proto}, append(header(1000), "{\"cmd\":"...)...))
			if err := closedWithin(c2, 500*time.Millisecond); err == nil {
				t.Fatal("control: closed although the deadline is far")
			}
		})
	}
}

func TestClusterPort_OversizeMessagesAreAnswered(t *testing.T) {
	n, logs := bareNode(t, clusterport.DefaultLimits)
	for _, tc := range []struct {
		proto byte
		limit uint32
		resp  func(*bufio.Reader) (string, error)
	}{
		{clusterport.ProtoForward, maxForward, func(r *bufio.Reader) (string, error) {
			var v fwdResponse
			err := clusterport.ReadMsg(r, &v, maxFwdResponse)
			return v.Err, err
		}},
		{clusterport.ProtoCall, maxCallRequest, func(r *bufio.Reader) (string, error) {
			var v callResponse
			err := clusterport.ReadMsg(r, &v, maxCallResponse)
			return v.Err, err
		}},
	} {
		t.Run(string(tc.proto), func(t *testing.T) {
			c := pipeTo(n)
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(append([]byte{tc.proto}, header(tc.limit+1)...)); err != nil {
				t.Fatal(err)
			}
			msg, err := tc.resp(bufio.NewReader(c))
			if err != nil || !strings.Contains(msg, "limit") {
				t.Fatalf("answer %q, %v; want an error naming the limit", msg, err)
			}
			if err := closedWithin(c, 2*time.Second); err != nil {
				t.Fatalf("after the refusal: %v", err)
			}
		})
	}
	if !strings.Contains(logs.String(), "limit") {
		t.Errorf("no log line names the limit:\n%s", logs)
	}
}

func TestClusterPort_ConnectionCap(t *testing.T) {
	root := t.TempDir()
	logs := &syncBuf{}
	n, err := New(Config{
		P9Anon:   trustedAnon,
		Insecure: true, // plain TCP: no key, and no cluster secret made
		Name:     "capped", DataDir: filepath.Join(root, "capped"), GossipAddr: "127.0.0.1:0",
		P9Listener: listen(t), ClusterListener: listen(t), MaxClusterConns: 3,
		LogOutput: io.MultiWriter(logs, testWriter{t}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	addr := string(n.transport.LocalAddr())
	ping := func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte{clusterport.ProtoPing}); err != nil {
			return err
		}
		var b [1]byte
		_, err = io.ReadFull(c, b[:])
		return err
	}
	var held []net.Conn
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{clusterport.ProtoForward}) // then idle: each holds a slot
		held = append(held, c)
	}
	// The three hold their slots before anything else dials: a ping in
	// flight beside them could take one, and a held connection be the
	// one refused.
	deadline := time.Now().Add(20 * time.Second)
	for n.port.Conns() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the three held connections hold %d slots", n.port.Conns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Poll until a fourth is refused and logged (under load a ping can
	// also fail by its own deadline, which is why the log line is what
	// counts).
	for !strings.Contains(logs.String(), "its limit") {
		if time.Now().After(deadline) {
			t.Fatalf("no connection was refused over the cap of 3 with three held; log:\n%s", logs)
		}
		ping()
		time.Sleep(20 * time.Millisecond)
	}
	if err := ping(); err == nil {
		t.Fatal("a fourth connection is served with three held and a cap of 3")
	}
	// Control: a slot given back serves the next connection.
	held[0].Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		err := ping()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with a slot free, a ping still fails: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
