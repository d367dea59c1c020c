package tlsutil

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// The cluster port of a cluster that has only a gossip key is TLS 1.3 with
// certificates that chain to a CA derived from that key:
//
//	seed    = HKDF-SHA256(secret = gossip key, salt = hkdfSalt, info = InfoClusterCA), 32 bytes
//	CA key  = Ed25519 private key from seed (RFC 8032)
//	CA cert = self-signed, fixed serial, subject and validity, so every
//	          node that holds the key derives the same CA
//
// Each node makes a fresh Ed25519 key at every start and a leaf
// certificate for it signed by the derived CA; peers accept a connection
// only when the other end's chain verifies against that CA. Holding the
// gossip key is therefore what admits a peer, as with memberlist's own
// encryption, but the key never meets memberlist's AES-GCM use of it
// directly: HKDF with a purpose-specific info string makes an independent
// key, and a new purpose gets a new info string.
const (
	hkdfSalt      = "toolnode key derivation v1"
	InfoClusterCA = "toolnode cluster-port CA"
)

// KeyCA is the CA derived from a gossip key.
type KeyCA struct {
	Cert *x509.Certificate
	Pool *x509.CertPool // holds Cert only
	key  ed25519.PrivateKey
}

// DeriveCA derives the cluster-port CA from a gossip key (16, 24 or 32
// bytes, as memberlist takes).
func DeriveCA(gossipKey []byte) (*KeyCA, error) {
	switch len(gossipKey) {
	case 16, 24, 32:
	default:
		return nil, fmt.Errorf("a gossip key is 16, 24 or 32 bytes, not %d", len(gossipKey))
	}
	seed, err := hkdf.Key(sha256.New, gossipKey, []byte(hkdfSalt), InfoClusterCA, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "toolnode cluster CA (derived from the gossip key)"},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	// Ed25519 signatures are deterministic: the same key gives the same
	// certificate on every node.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &KeyCA{Cert: cert, Pool: pool, key: key}, nil
}

// Leaf makes a certificate for a node, on a fresh Ed25519 key, signed by
// the derived CA, usable to accept and to dial.
func (ca *KeyCA) Leaf(node string) (tls.Certificate, error) {
	if ca == nil || ca.key == nil {
		return tls.Certificate{}, errors.New("no derived CA")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: node},
		// A day either side: clocks of nodes disagree.
		NotBefore:   now.Add(-24 * time.Hour),
		NotAfter:    now.AddDate(10, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}
