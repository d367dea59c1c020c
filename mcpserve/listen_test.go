package mcpserve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

func selfSigned(t *testing.T, names ...string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: names, IPAddresses: []net.IP{net.ParseIP("192.0.2.9")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// A listener off loopback is refused without TLS (a bearer token must
// not cross a network in the clear); the control, with TLS, listens, and
// answers for the names of its certificate and no loopback name.
func TestMCP_ListenOffLoopbackNeedsTLS(t *testing.T) {
	if _, err := Listen(Config{Addr: "0.0.0.0:0", Logf: t.Logf}, tokenHost{}); err == nil || !strings.Contains(err.Error(), "leaves loopback") {
		t.Fatalf("off loopback without TLS: %v; want refused", err)
	}
	s, err := Listen(Config{Addr: "0.0.0.0:0", TLS: selfSigned(t, "mcp.example"), Anon: true, Logf: t.Logf}, tokenHost{})
	if err != nil {
		t.Fatalf("off loopback with TLS: %v", err)
	}
	go s.Serve()
	defer s.Close()
	if s.loopback || s.anon {
		t.Errorf("off loopback: loopback %v, anon %v; want false and false", s.loopback, s.anon)
	}
	for host, want := range map[string]bool{"mcp.example": true, "MCP.example:443": true, "192.0.2.9": true, "127.0.0.1": false, "localhost": false, "evil.example": false} {
		if got := s.hostAllowed(host); got != want {
			t.Errorf("host %q allowed %v; want %v", host, got, want)
		}
	}
}
