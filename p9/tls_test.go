package p9

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testca"
)

func listenTCP(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// A client that connects and never finishes its handshake is closed at
// the deadline, with a log line, and holds up no other client meanwhile.
func TestTLSHandshakeDeadline(t *testing.T) {
	ca := testca.New(t)
	cert, key := ca.Issue(t, t.TempDir(), nil)
	cfg, err := LoadTLS(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs []string
	logf := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
	ln := newTLSListener(listenTCP(t), cfg, 300*time.Millisecond, 2, logf)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello"))
			c.Close()
		}
	}()

	// Two stalled clients take both handshake slots; a third is closed
	// at once.
	var stalled []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stalled = append(stalled, c)
	}
	waitFor(t, "both handshakes to start", func() bool { return len(ln.slots) == 2 })
	third, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection beyond the handshake limit was served")
	}
	third.Close()

	// The stalled ones are closed at the deadline.
	for _, c := range stalled {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("a stalled handshake was not closed at its deadline: %v", err)
		}
	}
	// Then a real client is served.
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("a good client after stalled ones read %q, %v", buf, err)
	}
	c.Close()

	mu.Lock()
	all := strings.Join(logs, "\n")
	mu.Unlock()
	for _, want := range []string{"TLS handshake with", "not completed within 300ms", "TLS handshakes are under way"} {
		if !strings.Contains(all, want) {
			t.Errorf("log does not say %q:\n%s", want, all)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A 9P certificate no client would accept is refused with an error that
// says which flag is wrong.
func TestTLSBadCertificates(t *testing.T) {
	ca := testca.New(t)
	dir := t.TempDir()
	good, goodKey := ca.Issue(t, filepath.Join(dir), nil)
	mk := func(name string, edit func(*x509.Certificate)) (string, string) {
		d := filepath.Join(dir, name)
		os.Mkdir(d, 0o700)
		return ca.Issue(t, d, edit)
	}
	expired, expiredKey := mk("expired", func(c *x509.Certificate) { c.NotAfter = time.Now().Add(-time.Minute) })
	clientOnly, clientKey := mk("client", func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	_, otherKey := mk("other", nil)
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for _, tc := range []struct {
		name, cert, key string
		want            string
	}{
		{"cert without key", good, "", "-9p-tls-cert needs -9p-tls-key"},
		{"key without cert", "", goodKey, "-9p-tls-key needs -9p-tls-cert"},
		{"missing file", filepath.Join(dir, "nope.crt"), goodKey, "cannot read"},
		{"junk", junk, goodKey, "cannot be used together"},
		{"wrong key", good, otherKey, "cannot be used together"},
		{"expired", expired, expiredKey, "expired or not yet valid"},
		{"client only", clientOnly, clientKey, "lacks serverAuth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadTLS(tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	// The control: the good pair loads.
	if cfg, err := LoadTLS(good, goodKey); err != nil || cfg == nil || cfg.MinVersion != tls.VersionTLS13 {
		t.Fatalf("good certificate: %v", err)
	}
}
