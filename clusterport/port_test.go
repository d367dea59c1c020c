package clusterport

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/toolnode/toolnode/tlsutil"
)

// Tests of the gossip key's TLS, the codec's reading and Raft's message
// deadline. Each refusal is paired with a control in which the same
// client gets through when the protection is off.

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustKeyTLS(t testing.TB, key []byte, name string) *TLS {
	t.Helper()
	ct, err := KeyTLS(key, name)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// waitFor polls cond until it holds, failing t after d.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClusterPort_KeyTLS(t *testing.T) {
	server := mustKeyTLS(t, testKey(1), "alpha")
	addr, results := tlsTestEchoServer(t, server.wrapListener)
	selfCert, selfKey := tlsTestSelfSigned(t, "intruder")

	t.Run("same key", func(t *testing.T) {
		c, err := mustKeyTLS(t, testKey(1), "beta").Dial(addr, 5*time.Second)
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
		refused(t, func() (net.Conn, error) { return mustKeyTLS(t, testKey(2), "gamma").Dial(addr, 5*time.Second) })
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
		plainAddr, plainResults := tlsTestEchoServer(t, (*TLS)(nil).wrapListener)
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
func TestClusterPort_SlowSenderHoldsWhatItSent(t *testing.T) {
	const limit = 7 << 20
	const declared = limit - 1<<10
	alloc := func(body []byte) uint64 {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], declared)
		r := io.MultiReader(bytes.NewReader(hdr[:]), bytes.NewReader(body))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var v struct{ Cmd []byte }
		ReadMsg(r, &v, limit)
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

// Certificates from `toolnode tls ca` / `toolnode tls cert` serve the
// cluster port's mutual TLS as they are.
func TestClusterPort_TLSUtilCertificates(t *testing.T) {
	dir := t.TempDir()
	caFile, caKey, err := tlsutil.CreateCA(dir, 30)
	if err != nil {
		t.Fatal(err)
	}
	var sides []*TLS
	for _, name := range []string{"a", "b"} {
		cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{Node: name, Days: 30, CA: caFile, CAKey: caKey, OutDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		sides = append(sides, mustLoadTLS(t, cert, key, caFile))
	}
	addr, results := tlsTestEchoServer(t, sides[0].wrapListener)
	c, err := sides[1].Dial(addr, 5*time.Second)
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
func TestClusterPort_RaftMessageDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	rc := RequestDeadline(b, 100*time.Millisecond)
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
		if !IsTimeout(err) {
			t.Fatalf("a stalled request ended with %v, want the deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled request was waited on for 5 s")
	}
}
