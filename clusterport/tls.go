package clusterport

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"github.com/toolnode/toolnode/tlsutil"
)

// TLS is the cluster port's TLS, set up here and nowhere else: mutual TLS
// against a CA from files (LoadTLS), or TLS 1.3 with certificates derived
// from the gossip key (KeyTLS). Every node presents a certificate signed
// by the CA and accepts only peers that do. A nil *TLS is plain TCP.
//
// Verification policy:
//
//   - Both ends present a certificate, and each verifies the other's chain
//     against the CA file (-tls-ca) and nothing else: the system roots are
//     never consulted, so a certificate from any other CA, a self-signed
//     certificate or no certificate at all is refused.
//   - Host names are not verified. Nodes reach each other by IP address or
//     by container host names that need not appear in their certificates,
//     so the client side sets InsecureSkipVerify (which only turns off Go's
//     built-in verification, name check included) and puts the chain check
//     back in VerifyConnection. Membership of the cluster is proven by
//     holding a key whose certificate the CA signed, not by a name; this is
//     Consul's verify_server_hostname=false. The server side needs no such
//     trick: client certificates carry no host name to check, so it uses
//     the standard RequireAndVerifyClientCert against the CA.
//   - Extended key usage follows the ordinary TLS rules: a certificate
//     presented by a dialer must allow client authentication, one presented
//     by a listener must allow server authentication, and a certificate with
//     no extended key usage allows both. Every node both accepts and dials
//     with the same certificate, so LoadTLS checks up front that the
//     node's own certificate allows both (one certificate per node, issued
//     with serverAuth and clientAuth or with no extended key usage, is what
//     operators usually make) and that it chains to the CA, so a node that
//     every peer would refuse fails at start with a sentence saying why,
//     not later with handshake errors in other nodes' logs.
//   - TLS 1.2 is the minimum.
//   - A certificate that names tlsutil.ClientRoleURI (toolnode tls cert
//     -client) is a client node's: it passes the handshake like any
//     other, and then the port refuses its holder a server's part (see
//     PeerOf, Server.ServeConn and Dialer.Dial).
type TLS struct {
	server *tls.Config // for the listener: RequireAndVerifyClientCert against the CA
	client *tls.Config // for dialers: presents the node cert, verifies the server against the CA
	mode   string      // how the port is secured, for the log

	// clientOnly: this node's own certificate is a client node's; it
	// never opens Raft, votes or serves the change stream.
	clientOnly bool
	certFile   string // the certificate's file, for messages
}

// LoadTLS reads the node's certificate, its private key and the CA
// certificates from PEM files. With all three names empty it returns
// (nil, nil): the cluster port is plain TCP. Naming some but not all is an
// error, as is any file that cannot be read or does not hold what it should.
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	var missing []string
	if certFile == "" {
		missing = append(missing, "the certificate (-tls-cert)")
	}
	if keyFile == "" {
		missing = append(missing, "the private key (-tls-key)")
	}
	if caFile == "" {
		missing = append(missing, "the CA (-tls-ca)")
	}
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return nil, fmt.Errorf("cluster TLS needs a certificate, a private key and a CA, all three; %s %s missing",
			tlsJoinAnd(missing), verb)
	}

	certPEM, err := readTLSFile("certificate", certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readTLSFile("private key", keyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := readTLSFile("CA", caFile)
	if err != nil {
		return nil, err
	}

	chain, err := parsePEMCertificates(certPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate file %s: %v", certFile, err)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("TLS certificate file %s has no certificate in it", certFile)
	}
	leaf := chain[0]

	key, err := parsePEMPrivateKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS private key file %s: %v", keyFile, err)
	}
	if !tlsKeyMatches(leaf.PublicKey, key) {
		return nil, fmt.Errorf("TLS private key in %s does not match the certificate in %s", keyFile, certFile)
	}
	// X509KeyPair repeats the checks above; it is what builds the
	// certificate the tls package wants (and picks up anything it refuses
	// that the checks above did not think of).
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s cannot be used together: %v", certFile, keyFile, err)
	}

	caCerts, err := parsePEMCertificates(caPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS CA file %s: %v", caFile, err)
	}
	if len(caCerts) == 0 {
		return nil, fmt.Errorf("TLS CA file %s has no certificate in it", caFile)
	}
	pool := x509.NewCertPool()
	for _, c := range caCerts {
		pool.AddCert(c)
	}

	if err := checkOwnTLSCertificate(leaf, chain[1:], pool, certFile, caFile); err != nil {
		return nil, err
	}

	server := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	client := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Always present the node's certificate. With Certificates the
		// client would send nothing when the server's list of acceptable
		// CAs does not name our issuer, which hides the real problem
		// behind "no certificate".
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		},
		// RootCAs is not consulted while InsecureSkipVerify is set; it
		// is kept so the configuration says what it trusts.
		RootCAs: pool,
		// Resumed sessions skip the certificates' signatures on every
		// connection after the first to a peer (see KeyTLS).
		ClientSessionCache: tls.NewLRUClientSessionCache(256),
		// InsecureSkipVerify turns off Go's own verification of the
		// server, which would insist on the dialled host name or IP
		// being in the certificate. Nodes are addressed by IPs and
		// container host names that need not be there, so the name is
		// not checked; the chain is, in VerifyConnection below, against
		// the CA only. This is not "trust anyone": a server without a
		// certificate from the CA fails the handshake.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs.PeerCertificates, pool, x509.ExtKeyUsageServerAuth)
		},
	}
	ct := &TLS{server: server, client: client, mode: "mutual TLS with the CA in " + caFile,
		clientOnly: tlsutil.IsClient(leaf), certFile: certFile}
	if ct.clientOnly {
		ct.mode += "; this node's certificate is a client node's (" + tlsutil.ClientRoleURI + ")"
	}
	return ct, nil
}

// ClientOnly reports whether t is mutual TLS with a client node's
// certificate; false for nil (plain TCP) and for the gossip key's TLS.
func (t *TLS) ClientOnly() bool { return t != nil && t.clientOnly }

// CertFile is the file of this node's certificate ("" for the gossip
// key's TLS and for nil), for messages.
func (t *TLS) CertFile() string {
	if t == nil {
		return ""
	}
	return t.certFile
}

// Mode says how the port is secured, for the log; "" for nil.
func (t *TLS) Mode() string {
	if t == nil {
		return ""
	}
	return t.mode
}

// wrapListener returns ln unchanged when t is nil. Otherwise Accept on the
// returned listener yields *tls.Conn without handshaking: the handshake
// runs on the connection's first Read or Write, which Server.ServeConn does
// in the connection's own goroutine under its read deadline. A peer that connects
// and never completes the handshake therefore holds up only its own
// goroutine until that deadline, never Accept for the peers behind it.
func (t *TLS) wrapListener(ln net.Listener) net.Listener {
	if t == nil {
		return ln
	}
	return tls.NewListener(ln, t.server)
}

// Dial connects to a peer's cluster port over TCP, and over TLS when t is
// non-nil, completing the handshake before it returns; connecting and
// handshaking together take at most timeout (no limit when timeout <= 0).
//
// Under TLS 1.3 the client finishes its side of the handshake before the
// server has checked the client's certificate, so a server that refuses
// this node's certificate shows up as an error on the first Read, not
// here. A server whose own certificate does not verify is always an error
// here.
func (t *TLS) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	nd := &net.Dialer{Timeout: timeout}
	if t == nil {
		return nd.Dial("tcp", addr)
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	d := &tls.Dialer{NetDialer: nd, Config: t.client}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster TLS connection to %s: %w", addr, err)
	}
	return c, nil
}

// verifyPeer checks that certs (leaf first, then any intermediates the
// peer sent) chain to a certificate in roots and that the leaf may be used
// for usage. No host name is checked; see TLS.
func verifyPeer(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return fmt.Errorf("peer certificate %q does not verify against the cluster CA: %w", certs[0].Subject.String(), err)
	}
	return nil
}

// checkOwnTLSCertificate makes sure the node's certificate would be accepted
// by its peers, both when this node dials and when it accepts.
func checkOwnTLSCertificate(leaf *x509.Certificate, inter []*x509.Certificate, roots *x509.CertPool, certFile, caFile string) error {
	if err := verifyPeer(append([]*x509.Certificate{leaf}, inter...), roots, x509.ExtKeyUsageAny); err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return fmt.Errorf("TLS certificate in %s is expired or not yet valid (valid from %s to %s)",
				certFile, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) {
			return fmt.Errorf("TLS certificate in %s is not signed by the CA in %s, so peers would refuse it",
				certFile, caFile)
		}
		return fmt.Errorf("TLS certificate in %s does not verify against the CA in %s, so peers would refuse it: %v",
			certFile, caFile, errors.Unwrap(err))
	}
	for _, u := range []struct {
		usage x509.ExtKeyUsage
		what  string
		role  string
	}{
		{x509.ExtKeyUsageServerAuth, "serverAuth", "accepting connections"},
		{x509.ExtKeyUsageClientAuth, "clientAuth", "dialling peers"},
	} {
		if err := verifyPeer(append([]*x509.Certificate{leaf}, inter...), roots, u.usage); err != nil {
			return fmt.Errorf("TLS certificate in %s cannot be used for %s: its extended key usage lacks %s "+
				"(every node both accepts and dials with the same certificate, so it needs serverAuth and clientAuth, "+
				"or no extended key usage at all)", certFile, u.role, u.what)
		}
	}
	return nil
}

// readTLSFile reads a file, saying which of the three it is when it cannot.
func readTLSFile(what, name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read TLS %s file %s: %v", what, name, err)
	}
	return b, nil
}

// parsePEMCertificates returns every CERTIFICATE block of a PEM file, in
// order; other blocks are skipped.
func parsePEMCertificates(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return certs, nil
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate number %d in it is malformed: %v", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
}

// parsePEMPrivateKey returns the first private key of a PEM file, in PKCS #8,
// PKCS #1 (RSA) or SEC 1 (EC) form.
func parsePEMPrivateKey(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("it has no private key in it")
		}
		if blk.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(blk.Headers["Proc-Type"], "ENCRYPTED") {
			return nil, errors.New("the private key in it is encrypted; give an unencrypted key")
		}
		if blk.Type != "PRIVATE KEY" && !strings.HasSuffix(blk.Type, " PRIVATE KEY") {
			continue
		}
		var (
			k   any
			err error
		)
		switch blk.Type {
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		default:
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("its private key is malformed: %v", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("its private key is of a kind TLS cannot use (%T)", k)
		}
		return s, nil
	}
}

// tlsKeyMatches reports whether key is the private half of pub.
func tlsKeyMatches(pub crypto.PublicKey, key crypto.Signer) bool {
	p, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && p.Equal(pub)
}

// tlsJoinAnd joins "a", "b", "c" as "a, b and c".
func tlsJoinAnd(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
