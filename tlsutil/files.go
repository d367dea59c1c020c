package tlsutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names written by CreateCA and CreateCert.
const (
	CAFile    = "toolnode-ca.pem"
	CAKeyFile = "toolnode-ca-key.pem"
)

// Default validity, as consul's: a CA for five years, a node certificate
// for one.
const (
	DefaultCADays   = 1825
	DefaultCertDays = 365
)

// CertFiles are the names of a node's certificate and key in dir.
func CertFiles(dir, node string) (cert, key string) {
	return filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem")
}

// CreateCA writes a new CA certificate and its private key into dir as
// CAFile and CAKeyFile (the key mode 0600), valid for days days. It
// refuses to overwrite either file.
func CreateCA(dir string, days int) (certFile, keyFile string, err error) {
	if days <= 0 {
		return "", "", fmt.Errorf("-days must be positive, not %d", days)
	}
	certFile, keyFile = filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := refuseExisting(certFile, keyFile); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := randomSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "toolnode CA " + serial.Text(16)[:8], Organization: []string{"toolnode"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return "", "", err
	}
	if err := writeFiles(certFile, der, keyFile, key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// ClientRoleURI is the URI name (subject alternative name) that marks the
// certificate of a client node (toolnode tls cert -client): a node that
// follows the cluster and runs its calls but is never a server. Its
// holder still accepts connections (routed calls, 9P over TLS), so the
// certificate keeps serverAuth; what it may not do is a server's part of
// the cluster port (Raft, the change stream), which the nodes enforce by
// this name. The CA's signature covers it, so only the CA's holder can
// make or remove it.
const ClientRoleURI = "urn:toolnode:role:client"

// IsClient reports whether c is a client node's certificate: it names
// ClientRoleURI.
func IsClient(c *x509.Certificate) bool {
	if c == nil {
		return false
	}
	for _, u := range c.URIs {
		if u.String() == ClientRoleURI {
			return true
		}
	}
	return false
}

// CertRequest describes a node certificate.
type CertRequest struct {
	Node   string   // node name: the subject's common name, and a DNS name
	Hosts  []string // more names: IP addresses or DNS names
	Days   int
	CA     string // CA certificate file
	CAKey  string // CA private key file
	OutDir string
	Client bool // a client node's certificate: it names ClientRoleURI
}

// CreateCert writes a node certificate signed by the CA, usable both to
// accept and to dial (serverAuth and clientAuth), for the cluster port
// (-tls-cert/-tls-key) and for 9P over TLS (-9p-tls-cert/-9p-tls-key). Its
// names are the node name, "localhost", 127.0.0.1, ::1 and r.Hosts, and,
// with r.Client, ClientRoleURI. It refuses to overwrite existing files.
func CreateCert(r CertRequest) (certFile, keyFile string, err error) {
	if r.Node == "" {
		return "", "", errors.New("a node name is required (-node NAME)")
	}
	if strings.ContainsAny(r.Node, `/\`) || r.Node == "." || r.Node == ".." {
		return "", "", fmt.Errorf("node name %q cannot be a file name", r.Node)
	}
	if r.Days <= 0 {
		return "", "", fmt.Errorf("-days must be positive, not %d", r.Days)
	}
	certFile, keyFile = CertFiles(r.OutDir, r.Node)
	if err := refuseExisting(certFile, keyFile); err != nil {
		return "", "", err
	}
	ca, caKey, err := LoadCA(r.CA, r.CAKey)
	if err != nil {
		return "", "", err
	}
	dns := []string{r.Node, "localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range r.Hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			ips = append(ips, ip)
		default:
			dns = append(dns, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := randomSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	notAfter := now.AddDate(0, 0, r.Days)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: r.Node, Organization: []string{"toolnode"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	if r.Client {
		u, err := url.Parse(ClientRoleURI)
		if err != nil {
			return "", "", err
		}
		tmpl.URIs = []*url.URL{u}
		tmpl.Subject.OrganizationalUnit = []string{"client"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return "", "", fmt.Errorf("sign the certificate with the CA in %s: %w", r.CA, err)
	}
	if err := writeFiles(certFile, der, keyFile, key); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// LoadCA reads a CA certificate and its private key, and checks that they
// belong together and that the certificate is a CA.
func LoadCA(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA certificate: %w (make one with toolnode tls ca)", err)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA key: %w", err)
	}
	blk, _ := pem.Decode(cb)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certFile, err)
	}
	if !ca.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", certFile)
	}
	kblk, _ := pem.Decode(kb)
	if kblk == nil {
		return nil, nil, fmt.Errorf("%s holds no PEM private key", keyFile)
	}
	var k any
	switch kblk.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(kblk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(kblk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(kblk.Bytes)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: a key of kind %T cannot sign", keyFile, k)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("the key in %s is not the key of the CA in %s", keyFile, certFile)
	}
	return ca, signer, nil
}

func refuseExisting(files ...string) error {
	for _, f := range files {
		if _, err := os.Lstat(f); err == nil {
			return fmt.Errorf("%s already exists; not overwriting it", f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeFiles writes the certificate (0644) and the key (0600), each
// created exclusively; on failure neither is left behind.
func writeFiles(certFile string, der []byte, keyFile string, key crypto.Signer) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeExcl(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	if err := writeExcl(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

func writeExcl(name string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; not overwriting it", name)
		}
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
