package clusterport

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeTestPKI makes a fresh CA and, for each name, a certificate signed by
// it that is usable both to accept and to dial (serverAuth and clientAuth),
// with the name as common name and DNS name, plus localhost, 127.0.0.1 and
// ::1. The PEM files go in a new directory under dir, so calling it twice
// with the same dir gives two independent CAs. It returns the CA file and,
// by name, the {certificate file, key file} of each node. Names must be
// usable as file names.
func writeTestPKI(t testing.TB, dir string, names ...string) (caFile string, certs map[string][2]string) {
	t.Helper()
	sub, err := os.MkdirTemp(dir, "pki-")
	if err != nil {
		t.Fatal(err)
	}
	ca := newTLSTestCA(t, "toolnode test CA")
	caFile = filepath.Join(sub, "ca.pem")
	tlsTestWrite(t, caFile, ca.certPEM)
	certs = make(map[string][2]string, len(names))
	for _, name := range names {
		if name == "" || name == "." || name == ".." || name != filepath.Base(name) {
			t.Fatalf("writeTestPKI: %q cannot be used as a file name", name)
		}
		if _, dup := certs[name]; dup {
			t.Fatalf("writeTestPKI: name %q given twice", name)
		}
		certPEM, keyPEM := ca.issue(t, tlsTestCertSpec{
			name:  name,
			dns:   []string{name, "localhost"},
			ips:   []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		})
		cf := filepath.Join(sub, name+".crt")
		kf := filepath.Join(sub, name+".key")
		tlsTestWrite(t, cf, certPEM)
		tlsTestWrite(t, kf, keyPEM)
		certs[name] = [2]string{cf, kf}
	}
	return caFile, certs
}

// tlsTestCA is a certificate authority made in a test.
type tlsTestCA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// tlsTestCertSpec describes a certificate to issue.
type tlsTestCertSpec struct {
	name      string
	dns       []string
	ips       []net.IP
	usage     []x509.ExtKeyUsage // nil: no extended key usage extension
	isCA      bool
	notBefore time.Time // zero: an hour ago
	notAfter  time.Time // zero: in a day
	sec1Key   bool      // write the key as "EC PRIVATE KEY" instead of PKCS #8
}

func newTLSTestCA(t testing.TB, name string) *tlsTestCA {
	t.Helper()
	key := tlsTestKey(t)
	tmpl := tlsTestTemplate(t, tlsTestCertSpec{name: name, isCA: true})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsTestCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate described by spec; it returns the certificate
// and its private key as PEM.
func (ca *tlsTestCA) issue(t testing.TB, spec tlsTestCertSpec) (certPEM, keyPEM []byte) {
	t.Helper()
	key := tlsTestKey(t)
	tmpl := tlsTestTemplate(t, spec)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), tlsTestKeyPEM(t, key, spec.sec1Key)
}

// intermediate issues a CA certificate signed by ca.
func (ca *tlsTestCA) intermediate(t testing.TB, name string) *tlsTestCA {
	t.Helper()
	key := tlsTestKey(t)
	tmpl := tlsTestTemplate(t, tlsTestCertSpec{name: name, isCA: true})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsTestCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// tlsTestSelfSigned makes a self-signed certificate usable both ways.
func tlsTestSelfSigned(t testing.TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := tlsTestKey(t)
	tmpl := tlsTestTemplate(t, tlsTestCertSpec{
		name:  name,
		dns:   []string{name, "localhost"},
		ips:   []net.IP{net.IPv4(127, 0, 0, 1)},
		usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), tlsTestKeyPEM(t, key, false)
}

func tlsTestKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func tlsTestKeyPEM(t testing.TB, key *ecdsa.PrivateKey, sec1 bool) []byte {
	t.Helper()
	if sec1 {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func tlsTestTemplate(t testing.TB, spec tlsTestCertSpec) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatal(err)
	}
	nb, na := spec.notBefore, spec.notAfter
	if nb.IsZero() {
		nb = time.Now().Add(-time.Hour)
	}
	if na.IsZero() {
		na = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.name},
		NotBefore:             nb,
		NotAfter:              na,
		DNSNames:              spec.dns,
		IPAddresses:           spec.ips,
		ExtKeyUsage:           spec.usage,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
	}
	if spec.isCA {
		tmpl.IsCA = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	return tmpl
}

func tlsTestWrite(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustLoadTLS(t testing.TB, cert, key, ca string) *TLS {
	t.Helper()
	ct, err := LoadTLS(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	if ct == nil {
		t.Fatal("LoadTLS returned nil for a full configuration")
	}
	return ct
}

// tlsTestResult is what the echo server saw on one connection.
type tlsTestResult struct {
	b    byte
	err  error
	conn net.Conn
}

// tlsTestEchoServer listens on loopback, wraps the listener with wrap and
// serves each connection the way the mux does: read one byte under a
// deadline (which drives the TLS handshake), then write it back. Each
// connection's outcome is sent on the returned channel.
func tlsTestEchoServer(t testing.TB, wrap func(net.Listener) net.Listener) (addr string, results <-chan tlsTestResult) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := wrap(raw)
	ch := make(chan tlsTestResult, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var b [1]byte
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err := c.Read(b[:])
				if err == nil {
					c.SetReadDeadline(time.Time{})
					_, err = c.Write(b[:])
				}
				ch <- tlsTestResult{b: b[0], err: err, conn: c}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return raw.Addr().String(), ch
}

func tlsTestNextResult(t testing.TB, results <-chan tlsTestResult) tlsTestResult {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the server saw no connection")
		return tlsTestResult{}
	}
}

// tlsTestRoundTrip writes b on c and reads one byte back.
func tlsTestRoundTrip(c net.Conn, b byte) (byte, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte{b}); err != nil {
		return 0, err
	}
	var got [1]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return 0, err
	}
	return got[0], nil
}

func TestClusterTLS_NodesFromTheCATalk(t *testing.T) {
	caFile, certs := writeTestPKI(t, t.TempDir(), "alpha", "beta")
	a := mustLoadTLS(t, certs["alpha"][0], certs["alpha"][1], caFile)
	b := mustLoadTLS(t, certs["beta"][0], certs["beta"][1], caFile)

	for _, tc := range []struct {
		name           string
		server, client *TLS
		serverName     string
		clientName     string
	}{
		{"beta dials alpha", a, b, "alpha", "beta"},
		{"alpha dials beta", b, a, "beta", "alpha"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, results := tlsTestEchoServer(t, tc.server.wrapListener)
			c, err := tc.client.Dial(addr, 5*time.Second)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			defer c.Close()
			tc2, ok := c.(*tls.Conn)
			if !ok {
				t.Fatalf("dial returned %T, want *tls.Conn", c)
			}
			// dial has already handshaken.
			cs := tc2.ConnectionState()
			if !cs.HandshakeComplete {
				t.Fatal("dial returned before the handshake completed")
			}
			if cs.Version < tls.VersionTLS12 {
				t.Fatalf("negotiated TLS version %#x, want at least 1.2", cs.Version)
			}
			if got := cs.PeerCertificates[0].Subject.CommonName; got != tc.serverName {
				t.Fatalf("server presented %q, want %q", got, tc.serverName)
			}
			got, err := tlsTestRoundTrip(c, ProtoRaft)
			if err != nil {
				t.Fatalf("round trip: %v", err)
			}
			if got != ProtoRaft {
				t.Fatalf("read back %q, want %q", got, ProtoRaft)
			}
			r := tlsTestNextResult(t, results)
			if r.err != nil {
				t.Fatalf("server: %v", r.err)
			}
			sc, ok := r.conn.(*tls.Conn)
			if !ok {
				t.Fatalf("wrapped listener accepted %T, want *tls.Conn", r.conn)
			}
			scs := sc.ConnectionState()
			if len(scs.PeerCertificates) == 0 || scs.PeerCertificates[0].Subject.CommonName != tc.clientName {
				t.Fatalf("server did not see client certificate %q", tc.clientName)
			}
		})
	}
}

func TestClusterTLS_HostNameIsNotVerified(t *testing.T) {
	// Nodes are reached by IPs and host names that are not in their
	// certificates; only the chain counts.
	dir := t.TempDir()
	ca := newTLSTestCA(t, "name-free CA")
	caFile := filepath.Join(dir, "ca.pem")
	tlsTestWrite(t, caFile, ca.certPEM)
	var nodes []*TLS
	for _, n := range []string{"one", "two"} {
		certPEM, keyPEM := ca.issue(t, tlsTestCertSpec{
			name:  n,
			dns:   []string{n + ".elsewhere.invalid"},
			usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		})
		cf, kf := filepath.Join(dir, n+".crt"), filepath.Join(dir, n+".key")
		tlsTestWrite(t, cf, certPEM)
		tlsTestWrite(t, kf, keyPEM)
		nodes = append(nodes, mustLoadTLS(t, cf, kf, caFile))
	}
	addr, results := tlsTestEchoServer(t, nodes[0].wrapListener)
	_, port, _ := net.SplitHostPort(addr)
	for _, target := range []string{addr, net.JoinHostPort("localhost", port)} {
		c, err := nodes[1].Dial(target, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", target, err)
		}
		if got, err := tlsTestRoundTrip(c, 'x'); err != nil || got != 'x' {
			t.Fatalf("round trip via %s: %q, %v", target, got, err)
		}
		c.Close()
		if r := tlsTestNextResult(t, results); r.err != nil {
			t.Fatalf("server: %v", r.err)
		}
	}
}

func TestClusterTLS_IntermediateCA(t *testing.T) {
	// A node certificate issued by an intermediate, with the intermediate
	// in the certificate file and only the root in the CA file.
	dir := t.TempDir()
	root := newTLSTestCA(t, "root CA")
	inter := root.intermediate(t, "intermediate CA")
	caFile := filepath.Join(dir, "ca.pem")
	tlsTestWrite(t, caFile, root.certPEM)
	leafPEM, keyPEM := inter.issue(t, tlsTestCertSpec{
		name:  "chained",
		usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	cf, kf := filepath.Join(dir, "chained.crt"), filepath.Join(dir, "chained.key")
	tlsTestWrite(t, cf, append(leafPEM, inter.certPEM...))
	tlsTestWrite(t, kf, keyPEM)
	chained := mustLoadTLS(t, cf, kf, caFile)

	// A node signed by the root directly.
	directPEM, directKey := root.issue(t, tlsTestCertSpec{name: "direct"}) // no EKU: usable both ways
	df, dk := filepath.Join(dir, "direct.crt"), filepath.Join(dir, "direct.key")
	tlsTestWrite(t, df, directPEM)
	tlsTestWrite(t, dk, directKey)
	direct := mustLoadTLS(t, df, dk, caFile)

	for _, pair := range [][2]*TLS{{chained, direct}, {direct, chained}} {
		addr, results := tlsTestEchoServer(t, pair[0].wrapListener)
		c, err := pair[1].Dial(addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		if got, err := tlsTestRoundTrip(c, 'i'); err != nil || got != 'i' {
			t.Fatalf("round trip: %q, %v", got, err)
		}
		c.Close()
		if r := tlsTestNextResult(t, results); r.err != nil {
			t.Fatalf("server: %v", r.err)
		}
	}
}

// tlsTestClientConfig is a TLS client that trusts any server and presents
// the given certificate (or none), to see what the server does with it.
func tlsTestClientConfig(t testing.TB, certPEM, keyPEM []byte) *tls.Config {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		}
	}
	return cfg
}

func TestClusterTLS_RefusesClientsWithoutACertificateFromTheCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTLSTestCA(t, "cluster CA")
	caFile := filepath.Join(dir, "ca.pem")
	tlsTestWrite(t, caFile, ca.certPEM)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	serverCert, serverKey := ca.issue(t, tlsTestCertSpec{name: "server", usage: both})
	sf, sk := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	tlsTestWrite(t, sf, serverCert)
	tlsTestWrite(t, sk, serverKey)
	server := mustLoadTLS(t, sf, sk, caFile)

	foreign := newTLSTestCA(t, "some other CA")
	foreignCert, foreignKey := foreign.issue(t, tlsTestCertSpec{name: "intruder", usage: both})
	selfCert, selfKey := tlsTestSelfSigned(t, "loner")
	// A certificate from the right CA that may only authenticate servers.
	serverOnlyCert, serverOnlyKey := ca.issue(t, tlsTestCertSpec{
		name:  "server-only",
		usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})

	for _, tc := range []struct {
		name          string
		cfg           *tls.Config
		wantServerErr string
	}{
		{"cert from another CA", tlsTestClientConfig(t, foreignCert, foreignKey), "certificate"},
		{"self-signed cert", tlsTestClientConfig(t, selfCert, selfKey), "certificate"},
		{"no certificate", tlsTestClientConfig(t, nil, nil), "certificate"},
		{"CA cert without clientAuth", tlsTestClientConfig(t, serverOnlyCert, serverOnlyKey), "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, results := tlsTestEchoServer(t, server.wrapListener)
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: tc.cfg}
			c, err := d.Dial("tcp", addr)
			if err == nil {
				// Under TLS 1.3 the client's handshake ends before the
				// server has judged its certificate; the refusal arrives
				// on the first read.
				got, rerr := tlsTestRoundTrip(c, ProtoRaft)
				c.Close()
				if rerr == nil {
					t.Fatalf("refused client read back %q", got)
				}
			}
			r := tlsTestNextResult(t, results)
			if r.err == nil {
				t.Fatalf("server accepted the client and read %q", r.b)
			}
			t.Logf("server: %v", r.err)
			if !strings.Contains(r.err.Error(), tc.wantServerErr) {
				t.Fatalf("server error %q does not mention %q", r.err, tc.wantServerErr)
			}
		})
	}
}

func TestClusterTLS_RefusesPlainTCPClients(t *testing.T) {
	caFile, certs := writeTestPKI(t, t.TempDir(), "server")
	server := mustLoadTLS(t, certs["server"][0], certs["server"][1], caFile)
	addr, results := tlsTestEchoServer(t, server.wrapListener)

	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// What a node without TLS sends: the protocol byte, then its protocol.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{ProtoRaft, 0x82, 0xa4, 'T', 'e', 'r', 'm', 0x01}); err != nil {
		t.Fatal(err)
	}
	r := tlsTestNextResult(t, results)
	if r.err == nil {
		t.Fatalf("TLS listener read %q from a plain TCP client", r.b)
	}
	back, _ := io.ReadAll(c)
	if len(back) > 0 && back[0] == ProtoRaft {
		t.Fatalf("plain client got its byte echoed: %q", back)
	}
}

func TestClusterTLS_DialerRefusesServersWithoutACertificateFromTheCA(t *testing.T) {
	dir := t.TempDir()
	ca := newTLSTestCA(t, "cluster CA")
	caFile := filepath.Join(dir, "ca.pem")
	tlsTestWrite(t, caFile, ca.certPEM)
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	clientCert, clientKey := ca.issue(t, tlsTestCertSpec{name: "client", usage: both})
	cf, kf := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	tlsTestWrite(t, cf, clientCert)
	tlsTestWrite(t, kf, clientKey)
	client := mustLoadTLS(t, cf, kf, caFile)

	foreign := newTLSTestCA(t, "some other CA")
	foreignCert, foreignKey := foreign.issue(t, tlsTestCertSpec{name: "impostor", usage: both})
	selfCert, selfKey := tlsTestSelfSigned(t, "loner")
	clientOnlyCert, clientOnlyKey := ca.issue(t, tlsTestCertSpec{
		name:  "client-only",
		usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})

	for _, tc := range []struct {
		name          string
		certPEM, key  []byte
		wantDialError string
	}{
		{"cert from another CA", foreignCert, foreignKey, "does not verify against the cluster CA"},
		{"self-signed cert", selfCert, selfKey, "does not verify against the cluster CA"},
		{"CA cert without serverAuth", clientOnlyCert, clientOnlyKey, "does not verify against the cluster CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert, err := tls.X509KeyPair(tc.certPEM, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			// The server would accept our client; only the client's
			// check of the server is under test.
			pool := x509.NewCertPool()
			pool.AddCert(ca.cert)
			srv := &tls.Config{
				Certificates: []tls.Certificate{cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    pool,
			}
			addr, results := tlsTestEchoServer(t, func(ln net.Listener) net.Listener { return tls.NewListener(ln, srv) })
			c, err := client.Dial(addr, 5*time.Second)
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded to a server without a certificate from the CA")
			}
			t.Logf("dial: %v", err)
			if !strings.Contains(err.Error(), tc.wantDialError) {
				t.Fatalf("dial error %q does not mention %q", err, tc.wantDialError)
			}
			if r := tlsTestNextResult(t, results); r.err == nil {
				t.Fatalf("server read %q from a client that refused it", r.b)
			}
		})
	}
}

func TestClusterTLS_SilentPeerDoesNotBlockAccept(t *testing.T) {
	caFile, certs := writeTestPKI(t, t.TempDir(), "server", "client")
	server := mustLoadTLS(t, certs["server"][0], certs["server"][1], caFile)
	client := mustLoadTLS(t, certs["client"][0], certs["client"][1], caFile)

	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// If Accept waited for a handshake it would run into this deadline
	// instead of returning the silent peer's connection.
	raw.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	ln := server.wrapListener(raw)
	addr := raw.Addr().String()

	silent, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept with a silent peer connected: %v", err)
	}
	defer sc.Close()
	if _, ok := sc.(*tls.Conn); !ok {
		t.Fatalf("Accept returned %T, want *tls.Conn", sc)
	}

	// A good peer connects behind the silent one and is served.
	type dialed struct {
		c   net.Conn
		err error
	}
	dch := make(chan dialed, 1)
	go func() {
		c, err := client.Dial(addr, 5*time.Second)
		dch <- dialed{c, err}
	}()
	gc, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept behind a silent peer: %v", err)
	}
	defer gc.Close()
	serr := make(chan error, 1)
	go func() {
		var b [1]byte
		gc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := gc.Read(b[:])
		if err == nil {
			_, err = gc.Write(b[:])
		}
		serr <- err
	}()
	d := <-dch
	if d.err != nil {
		t.Fatalf("dial behind a silent peer: %v", d.err)
	}
	defer d.c.Close()
	if got, err := tlsTestRoundTrip(d.c, 'g'); err != nil || got != 'g' {
		t.Fatalf("round trip behind a silent peer: %q, %v", got, err)
	}
	if err := <-serr; err != nil {
		t.Fatalf("server side of the good peer: %v", err)
	}

	// The silent peer's handshake is bounded by the reader's deadline.
	sc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	_, err = sc.Read(b[:])
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read from silent peer: got %v, want a timeout", err)
	}
}

func TestClusterTLS_DialTimesOutOnAServerThatNeverHandshakes(t *testing.T) {
	caFile, certs := writeTestPKI(t, t.TempDir(), "client")
	client := mustLoadTLS(t, certs["client"][0], certs["client"][1], caFile)
	// The kernel completes TCP connections to this listener, but nobody
	// accepts them, so no TLS handshake ever answers.
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	start := time.Now()
	c, err := client.Dial(raw.Addr().String(), 200*time.Millisecond)
	if err == nil {
		c.Close()
		t.Fatal("dial succeeded without a handshake")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("dial took %v with a 200ms timeout", el)
	}
}

func TestClusterTLS_NilIsPlainTCP(t *testing.T) {
	var none *TLS
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if got := none.wrapListener(raw); got != raw {
		t.Fatalf("nil TLS wrapped the listener: %T", got)
	}
	addr, results := tlsTestEchoServer(t, none.wrapListener)
	c, err := none.Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*tls.Conn); ok {
		t.Fatal("nil TLS dialled TLS")
	}
	if got, err := tlsTestRoundTrip(c, ProtoRaft); err != nil || got != ProtoRaft {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if r := tlsTestNextResult(t, results); r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
}

func TestClusterTLS_LoadErrors(t *testing.T) {
	dir := t.TempDir()
	caFile, certs := writeTestPKI(t, dir, "a", "b")
	certA, keyA := certs["a"][0], certs["a"][1]
	keyB := certs["b"][1]

	if ct, err := LoadTLS("", "", ""); ct != nil || err != nil {
		t.Fatalf("no files: got %v, %v; want nil, nil", ct, err)
	}

	garbage := filepath.Join(dir, "garbage.pem")
	tlsTestWrite(t, garbage, []byte("this is not PEM at all\n"))
	badCert := filepath.Join(dir, "bad-cert.pem")
	tlsTestWrite(t, badCert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")}))
	badKey := filepath.Join(dir, "bad-key.pem")
	tlsTestWrite(t, badKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not DER")}))
	encKey := filepath.Join(dir, "enc-key.pem")
	tlsTestWrite(t, encKey, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("x")}))
	missing := filepath.Join(dir, "no-such-file.pem")

	ca := newTLSTestCA(t, "load CA")
	ownCA := filepath.Join(dir, "own-ca.pem")
	tlsTestWrite(t, ownCA, ca.certPEM)
	issue := func(name string, spec tlsTestCertSpec) (string, string) {
		spec.name = name
		c, k := ca.issue(t, spec)
		cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		tlsTestWrite(t, cf, c)
		tlsTestWrite(t, kf, k)
		return cf, kf
	}
	serverOnly, serverOnlyKey := issue("server-only", tlsTestCertSpec{usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	clientOnly, clientOnlyKey := issue("client-only", tlsTestCertSpec{usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	expired, expiredKey := issue("expired", tlsTestCertSpec{
		usage:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		notBefore: time.Now().Add(-48 * time.Hour),
		notAfter:  time.Now().Add(-24 * time.Hour),
	})

	for _, tc := range []struct {
		name          string
		cert, key, ca string
		want          []string // substrings of the error
	}{
		{"cert missing", "", keyA, caFile, []string{"certificate (-tls-cert) is missing"}},
		{"key missing", certA, "", caFile, []string{"private key (-tls-key) is missing"}},
		{"ca missing", certA, keyA, "", []string{"CA (-tls-ca) is missing"}},
		{"two missing", "", "", caFile, []string{"-tls-cert", "-tls-key", "are missing"}},
		{"cert unreadable", missing, keyA, caFile, []string{"cannot read TLS certificate file " + missing, "no such file"}},
		{"key unreadable", certA, missing, caFile, []string{"cannot read TLS private key file " + missing}},
		{"ca unreadable", certA, keyA, dir, []string{"cannot read TLS CA file " + dir}},
		{"cert garbage", garbage, keyA, caFile, []string{"TLS certificate file " + garbage + " has no certificate in it"}},
		{"cert malformed", badCert, keyA, caFile, []string{badCert, "malformed"}},
		{"key garbage", certA, garbage, caFile, []string{"TLS private key file " + garbage, "no private key"}},
		{"key is a cert", certA, certA, caFile, []string{"TLS private key file " + certA, "no private key"}},
		{"key malformed", certA, badKey, caFile, []string{badKey, "malformed"}},
		{"key encrypted", certA, encKey, caFile, []string{encKey, "encrypted"}},
		{"key does not match", certA, keyB, caFile, []string{"private key in " + keyB + " does not match the certificate in " + certA}},
		{"ca garbage", certA, keyA, garbage, []string{"TLS CA file " + garbage + " has no certificate in it"}},
		{"ca malformed", certA, keyA, badCert, []string{badCert, "malformed"}},
		{"cert from another CA", certA, keyA, ownCA, []string{certA, "not signed by the CA in " + ownCA}},
		{"cert lacks clientAuth", serverOnly, serverOnlyKey, ownCA, []string{serverOnly, "clientAuth"}},
		{"cert lacks serverAuth", clientOnly, clientOnlyKey, ownCA, []string{clientOnly, "serverAuth"}},
		{"cert expired", expired, expiredKey, ownCA, []string{expired, "expired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := LoadTLS(tc.cert, tc.key, tc.ca)
			if err == nil {
				t.Fatalf("loaded (%v); want an error", ct)
			}
			if ct != nil {
				t.Fatalf("returned a configuration with error %v", err)
			}
			t.Logf("%v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	// Accepted variants: no extended key usage at all, and a SEC 1 key.
	noEKU, noEKUKey := issue("no-eku", tlsTestCertSpec{})
	mustLoadTLS(t, noEKU, noEKUKey, ownCA)
	sec1, sec1Key := issue("sec1", tlsTestCertSpec{sec1Key: true, usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	mustLoadTLS(t, sec1, sec1Key, ownCA)
	// A self-signed certificate may be its own CA (a cluster of one key).
	selfCert, selfKey := tlsTestSelfSigned(t, "self")
	sf, sk := filepath.Join(dir, "self.crt"), filepath.Join(dir, "self.key")
	tlsTestWrite(t, sf, selfCert)
	tlsTestWrite(t, sk, selfKey)
	mustLoadTLS(t, sf, sk, sf)
}

func TestClusterTLS_WriteTestPKI(t *testing.T) {
	dir := t.TempDir()
	ca1, certs1 := writeTestPKI(t, dir, "n1", "n2", "n3")
	ca2, certs2 := writeTestPKI(t, dir, "n1")
	if ca1 == ca2 || certs1["n1"] == certs2["n1"] {
		t.Fatal("two calls with the same dir share files")
	}
	if len(certs1) != 3 {
		t.Fatalf("got %d certificates, want 3", len(certs1))
	}
	for name, p := range certs1 {
		mustLoadTLS(t, p[0], p[1], ca1)
		if _, err := LoadTLS(p[0], p[1], ca2); err == nil {
			t.Fatalf("%s's certificate verified against the other call's CA", name)
		}
	}
}
