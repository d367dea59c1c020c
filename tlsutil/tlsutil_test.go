package tlsutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateCAAndCert(t *testing.T) {
	dir := t.TempDir()
	caFile, caKey, err := CreateCA(dir, 30)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(caKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key %s: %v, mode %v; want 0600", caKey, err, fi.Mode())
	}
	certFile, keyFile, err := CreateCert(CertRequest{Node: "n1", Hosts: []string{"10.1.2.3", "n1.example"}, Days: 10, CA: caFile, CAKey: caKey, OutDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := LoadCA(caFile, caKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	leaf := pair.Leaf
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, name := range []string{"n1", "localhost", "127.0.0.1", "10.1.2.3", "n1.example"} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
				t.Errorf("usage %v, name %s: %v", u, name, err)
			}
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other"}); err == nil {
		t.Error("the certificate verifies for a name it was not given")
	}
	// Nothing is overwritten.
	before, _ := os.ReadFile(caFile)
	if _, _, err := CreateCA(dir, 30); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second CreateCA: %v", err)
	}
	if after, _ := os.ReadFile(caFile); !bytes.Equal(before, after) {
		t.Error("the CA file changed")
	}
	if _, _, err := CreateCert(CertRequest{Node: "n1", Days: 1, CA: caFile, CAKey: caKey, OutDir: dir}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second CreateCert: %v", err)
	}
	// A key that is not the CA's is refused.
	other := t.TempDir()
	_, otherKey, err := CreateCA(other, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCert(CertRequest{Node: "n2", Days: 1, CA: caFile, CAKey: otherKey, OutDir: dir}); err == nil {
		t.Error("signed with a key that is not the CA's")
	}
	if _, err := os.Stat(filepath.Join(dir, "n2.pem")); err == nil {
		t.Error("a failed CreateCert left a certificate behind")
	}
	for _, bad := range []string{"", "a/b", ".."} {
		if _, _, err := CreateCert(CertRequest{Node: bad, Days: 1, CA: caFile, CAKey: caKey, OutDir: dir}); err == nil {
			t.Errorf("node name %q accepted", bad)
		}
	}
}

func TestDeriveCA(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	a, err := DeriveCA(k1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DeriveCA(k1)
	c, _ := DeriveCA(k2)
	if !bytes.Equal(a.Cert.Raw, b.Cert.Raw) {
		t.Error("one key derived two different CA certificates")
	}
	if bytes.Equal(a.Cert.RawSubjectPublicKeyInfo, c.Cert.RawSubjectPublicKeyInfo) {
		t.Error("two keys derived the same CA key")
	}
	leaf, err := b.Leaf("n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: a.Pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a leaf of one node does not verify against another node's derivation: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: c.Pool}); err == nil {
		t.Error("a leaf verifies against another key's CA")
	}
	if _, err := DeriveCA([]byte("short")); err == nil {
		t.Error("a 5-byte key accepted")
	}
}

// A client node's certificate names the client role and still allows
// both usages (its node accepts routed calls); a node certificate made
// without -client does not name it.
func TestCreateClientCert(t *testing.T) {
	dir := t.TempDir()
	caFile, caKey, err := CreateCA(dir, 30)
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string, client bool) *x509.Certificate {
		t.Helper()
		certFile, keyFile, err := CreateCert(CertRequest{Node: name, Days: 10, CA: caFile, CAKey: caKey, OutDir: dir, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return pair.Leaf
	}
	c, s := load("c1", true), load("s1", false)
	if !IsClient(c) {
		t.Errorf("the -client certificate does not name %s: URIs %v", ClientRoleURI, c.URIs)
	}
	if IsClient(s) || IsClient(nil) {
		t.Error("a server certificate (or none) counts as a client's")
	}
	ca, _, err := LoadCA(caFile, caKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "c1", KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("client certificate, usage %v: %v", u, err)
		}
	}
}
