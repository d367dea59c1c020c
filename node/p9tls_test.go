package node

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
	"github.com/toolnode/toolnode/internal/testca"
)

// startTLSNode starts a node whose 9P listener speaks TLS with a
// certificate from ca.
func startTLSNode(t testing.TB, ca *testca.CA) *testNode {
	t.Helper()
	dir := t.TempDir()
	cert, key := ca.Issue(t, dir, nil)
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
	ca := testca.New(t)
	n := startTLSNode(t, ca)
	fsys := mountTLS(t, n.P9Addr(), ca.Pool)
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
	if _, err := dialTLS9(n.P9Addr(), testca.New(t).Pool); err == nil {
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
	ca := testca.New(t)
	dir := t.TempDir()
	expired, expiredKey := ca.Issue(t, dir, func(c *x509.Certificate) { c.NotAfter = time.Now().Add(-time.Minute) })
	_, err := New(Config{Name: "n1", DataDir: filepath.Join(dir, "data"), GossipAddr: "127.0.0.1:0",
		P9Listener: listen(t), ClusterListener: listen(t), P9TLSCert: expired, P9TLSKey: expiredKey,
		LogOutput: testWriter{t}})
	if err == nil || !strings.Contains(err.Error(), "-9p-tls-cert") {
		t.Fatalf("New with an expired 9P certificate: %v", err)
	}
}
