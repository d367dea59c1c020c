package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
)

// p9CA is a CA made for one test, and the pool a client trusts it with.
type p9CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newP9CA(t testing.TB) *p9CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "p9 test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &p9CA{cert: cert, key: key, pool: pool}
}

// issue writes a certificate for 127.0.0.1 and its key into dir; edit
// may change the template (validity, key usage) first.
func (ca *p9CA) issue(t testing.TB, dir string, edit func(*x509.Certificate)) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "n1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if edit != nil {
		edit(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "p9.crt"), filepath.Join(dir, "p9.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// startTLSNode starts a node whose 9P listener speaks TLS with a
// certificate from ca.
func startTLSNode(t testing.TB, ca *p9CA) *testNode {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.issue(t, dir, nil)
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       "n1", DataDir: filepath.Join(dir, "data"),
		GossipAddr:      "127.0.0.1:0",
		P9Listener:      listen(t),
		ClusterListener: listen(t),
		P9TLSCert:       cert, P9TLSKey: key,
		LogOutput: testWriter{t},
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testNode{Node: n, cfg: cfg}
}

func mountTLS(t testing.TB, addr string, pool *x509.CertPool) *client.Fsys {
	t.Helper()
	fsys, err := dialTLS9(addr, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func dialTLS9(addr string, pool *x509.CertPool) (*client.Fsys, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13})
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	conn, err := client.NewConn(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	fsys, err := conn.Attach(nil, "test", "")
	if err != nil {
		conn.Close()
		return nil, err
	}
	return fsys, nil
}

// The 9P tree over TLS; a plain 9P client gets nothing from it (the
// control: the same client reads the node file of a plain node, in every
// other test of this package).
func TestP9TLS(t *testing.T) {
	ca := newP9CA(t)
	n := startTLSNode(t, ca)
	fsys := mountTLS(t, n.P9Addr(), ca.pool)
	info := readFile(t, fsys, "node")
	if !strings.Contains(info, "9p-tls on\n") {
		t.Errorf("node file of a TLS node says:\n%s", info)
	}

	// A plain 9P client: the version exchange fails, nothing is served.
	done := make(chan error, 1)
	go func() {
		c, err := net.DialTimeout("tcp", n.P9Addr(), 5*time.Second)
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = client.NewConn(c)
		done <- err
	}()
	if err := <-done; err == nil {
		t.Fatal("a plain 9P client completed Tversion with a TLS listener")
	}

	// Another CA's client refuses the node's certificate.
	if _, err := dialTLS9(n.P9Addr(), newP9CA(t).pool); err == nil {
		t.Fatal("a client trusting another CA connected")
	}

	// The TLS client still works after both.
	if got := readFile(t, fsys, "node"); got == "" {
		t.Fatal("empty node file")
	}
}

func TestP9TLSPlainNodeFile(t *testing.T) {
	n := startNode(t, filepath.Join(t.TempDir(), "data"), "", "")
	info := readFile(t, mount(t, n.P9Addr()), "node")
	if !strings.Contains(info, "9p-tls off\n") {
		t.Errorf("node file of a plain node says:\n%s", info)
	}
}

// A client that connects and never finishes its handshake is closed at
// the deadline, with a log line, and holds up no other client meanwhile.
func TestP9TLSHandshakeDeadline(t *testing.T) {
	ca := newP9CA(t)
	cert, key := ca.issue(t, t.TempDir(), nil)
	cfg, err := loadP9TLS(cert, key)
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
	ln := newTLSListener(listen(t), cfg, 300*time.Millisecond, 2, logf)
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
	waitFor(t, "both handshakes to start", 5*time.Second, func() bool { return len(ln.slots) == 2 })
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
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.pool})
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

// A node refuses to start with a 9P certificate no client would accept,
// and says which flag is wrong.
func TestP9TLSBadCertificates(t *testing.T) {
	ca := newP9CA(t)
	dir := t.TempDir()
	good, goodKey := ca.issue(t, filepath.Join(dir), nil)
	mk := func(name string, edit func(*x509.Certificate)) (string, string) {
		d := filepath.Join(dir, name)
		os.Mkdir(d, 0o700)
		return ca.issue(t, d, edit)
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
			_, err := loadP9TLS(tc.cert, tc.key)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
	// The control: the good pair loads.
	if cfg, err := loadP9TLS(good, goodKey); err != nil || cfg == nil || cfg.MinVersion != tls.VersionTLS13 {
		t.Fatalf("good certificate: %v", err)
	}
	// And New refuses a bad one before anything starts.
	_, err := New(Config{Name: "n1", DataDir: filepath.Join(dir, "data"), GossipAddr: "127.0.0.1:0",
		P9Listener: listen(t), ClusterListener: listen(t), P9TLSCert: expired, P9TLSKey: expiredKey,
		LogOutput: testWriter{t}})
	if err == nil || !strings.Contains(err.Error(), "-9p-tls-cert") {
		t.Fatalf("New with an expired 9P certificate: %v", err)
	}
}
