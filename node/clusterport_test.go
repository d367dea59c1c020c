package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolnode/toolnode/tlsutil"
)

// Cluster-port tests of the gossip key's TLS and of the port's bounds.
// Each refusal is paired with a control in which the same client gets
// through when the protection is off.

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustKeyTLS(t testing.TB, key []byte, name string) *clusterTLS {
	t.Helper()
	ct, err := keyClusterTLS(key, name)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

func Test_ClusterPort_KeyTLS(t *testing.T) {
	server := mustKeyTLS(t, testKey(1), "alpha")
	addr, results := tlsTestEchoServer(t, server.wrapListener)
	selfCert, selfKey := tlsTestSelfSigned(t, "intruder")

	t.Run("same key", func(t *testing.T) {
		c, err := mustKeyTLS(t, testKey(1), "beta").dial(addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got, err := tlsTestRoundTrip(c, 'P'); err != nil || got != 'P' {
			t.Fatalf("round trip = %q, %v", got, err)
		}
		if r := tlsTestNextResult(t, results); r.err != nil {
			t.Fatalf("server: %v", r.err)
		}
		if v := c.(*tls.Conn).ConnectionState().Version; v != tls.VersionTLS13 {
			t.Errorf("TLS version %#x, want 1.3", v)
		}
	})
	refused := func(t *testing.T, dial func() (net.Conn, error)) {
		t.Helper()
		c, err := dial()
		if err == nil {
			_, err = tlsTestRoundTrip(c, 'F')
			c.Close()
		}
		if err == nil {
			t.Fatal("the client got an answer")
		}
		if r := tlsTestNextResult(t, results); r.err == nil {
			t.Fatalf("the server read protocol byte %q from it", r.b)
		}
	}
	t.Run("another key", func(t *testing.T) {
		refused(t, func() (net.Conn, error) { return mustKeyTLS(t, testKey(2), "gamma").dial(addr, 5*time.Second) })
	})
	t.Run("plain TCP", func(t *testing.T) {
		refused(t, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 5*time.Second) })
	})
	t.Run("self-signed certificate", func(t *testing.T) {
		refused(t, func() (net.Conn, error) {
			return tls.Dial("tcp", addr, tlsTestClientConfig(t, selfCert, selfKey))
		})
	})
	t.Run("control: no key, plain TCP gets through", func(t *testing.T) {
		plainAddr, plainResults := tlsTestEchoServer(t, (*clusterTLS)(nil).wrapListener)
		c, err := net.DialTimeout("tcp", plainAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got, err := tlsTestRoundTrip(c, 'F'); err != nil || got != 'F' {
			t.Fatalf("round trip = %q, %v", got, err)
		}
		tlsTestNextResult(t, plainResults)
	})
	t.Run("derivation is per key and stable", func(t *testing.T) {
		a, b := mustKeyTLS(t, testKey(1), "x"), mustKeyTLS(t, testKey(1), "y")
		if !a.server.ClientCAs.Equal(b.server.ClientCAs) {
			t.Error("one key derived two CAs")
		}
		if a.server.ClientCAs.Equal(mustKeyTLS(t, testKey(2), "x").server.ClientCAs) {
			t.Error("two keys derived one CA")
		}
	})
}

// A peer that announces a large message and trickles it holds memory for
// what it sent, not for what it announced.
func Test_ClusterPort_SlowSenderHoldsWhatItSent(t *testing.T) {
	const declared = maxForward - 1<<10
	alloc := func(body []byte) uint64 {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], declared)
		r := io.MultiReader(bytes.NewReader(hdr[:]), bytes.NewReader(body))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var v fwdRequest
		readMsg(r, &v, maxForward)
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	if got := alloc(make([]byte, 100)); got > 1<<20 {
		t.Errorf("a %d-byte message cut off after 100 bytes allocated %d bytes", declared, got)
	}
	// Control: the measure sees a message that did arrive.
	body := append([]byte(`{"cmd":"`), bytes.Repeat([]byte("QUFB"), (declared-10)/4)...)
	body = append(body, make([]byte, declared-len(body))...)
	if got := alloc(body); got < declared {
		t.Errorf("a whole %d-byte message allocated only %d bytes: the measure is broken", declared, got)
	}
}

// bareNode serves cluster-port connections without Raft behind them:
// enough for connections that never get a message through.
func bareNode(t *testing.T, lim portLimits) (*Node, *syncBuf) {
	t.Helper()
	buf := &syncBuf{}
	n := &Node{logger: log.New(buf, "", 0), lim: lim}
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
	if err != nil && timeoutErr(err) {
		return errors.New("still open")
	}
	return nil
}

func Test_ClusterPort_StalledMessagesAreClosed(t *testing.T) {
	short := portLimits{fwdIdle: time.Minute, fwdMsg: 200 * time.Millisecond, callMsg: 200 * time.Millisecond, raftMsg: time.Minute}
	for _, proto := range []byte{protoForward, protoCall} {
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
			n2, _ := bareNode(t, defaultPortLimits)
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

func Test_ClusterPort_OversizeMessagesAreAnswered(t *testing.T) {
	n, logs := bareNode(t, defaultPortLimits)
	for _, tc := range []struct {
		proto byte
		limit uint32
		resp  func(*bufio.Reader) (string, error)
	}{
		{protoForward, maxForward, func(r *bufio.Reader) (string, error) {
			var v fwdResponse
			err := readMsg(r, &v, maxFwdResponse)
			return v.Err, err
		}},
		{protoCall, maxCallRequest, func(r *bufio.Reader) (string, error) {
			var v callResponse
			err := readMsg(r, &v, maxCallResponse)
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

func Test_ClusterPort_ConnectionCap(t *testing.T) {
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
		if _, err := c.Write([]byte{protoPing}); err != nil {
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
		c.Write([]byte{protoForward}) // then idle: each holds a slot
		held = append(held, c)
	}
	// The three hold their slots before anything else dials: a ping in
	// flight beside them could take one, and a held connection be the
	// one refused.
	deadline := time.Now().Add(20 * time.Second)
	for len(n.mux.slots) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the three held connections hold %d slots", len(n.mux.slots))
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

// Certificates from `toolnode tls ca` / `toolnode tls cert` serve the
// cluster port's mutual TLS as they are.
func Test_ClusterPort_TLSUtilCertificates(t *testing.T) {
	dir := t.TempDir()
	caFile, caKey, err := tlsutil.CreateCA(dir, 30)
	if err != nil {
		t.Fatal(err)
	}
	var sides []*clusterTLS
	for _, name := range []string{"a", "b"} {
		cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{Node: name, Days: 30, CA: caFile, CAKey: caKey, OutDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		sides = append(sides, mustLoadClusterTLS(t, cert, key, caFile))
	}
	addr, results := tlsTestEchoServer(t, sides[0].wrapListener)
	c, err := sides[1].dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := tlsTestRoundTrip(c, 'R'); err != nil || got != 'R' {
		t.Fatalf("round trip = %q, %v", got, err)
	}
	tlsTestNextResult(t, results)
}

// Raft's server side: a request that has begun must finish within the
// deadline; between requests a connection may idle (the control: the same
// connection with no request started is still open after the deadline).
func Test_ClusterPort_RaftMessageDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	rc := &raftConn{Conn: b, timeout: 100 * time.Millisecond}
	defer rc.Close()
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := rc.Read(buf); err != nil {
				read <- err
				return
			}
		}
	}()
	// Idle: nothing sent, nothing times out.
	select {
	case err := <-read:
		t.Fatalf("an idle connection failed: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// A request begins and stalls.
	a.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := a.Write([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !timeoutErr(err) {
			t.Fatalf("a stalled request ended with %v, want the deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled request was waited on for 5 s")
	}
}
