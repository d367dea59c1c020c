package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// A node refuses to start with a 9P certificate no client would accept,
// and says which flag is wrong (package p9 checks each way a certificate
// can be wrong).
func TestP9TLSBadCertificates(t *testing.T) {
	ca := newP9CA(t)
	dir := t.TempDir()
	expired, expiredKey := ca.issue(t, dir, func(c *x509.Certificate) { c.NotAfter = time.Now().Add(-time.Minute) })
	_, err := New(Config{Name: "n1", DataDir: filepath.Join(dir, "data"), GossipAddr: "127.0.0.1:0",
		P9Listener: listen(t), ClusterListener: listen(t), P9TLSCert: expired, P9TLSKey: expiredKey,
		LogOutput: testWriter{t}})
	if err == nil || !strings.Contains(err.Error(), "-9p-tls-cert") {
		t.Fatalf("New with an expired 9P certificate: %v", err)
	}
}
