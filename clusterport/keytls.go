package clusterport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/toolnode/toolnode/tlsutil"
)

// KeyTLS is the cluster port's TLS when the node has a gossip key
// and no -tls-* files: TLS 1.3 both ways, each node presenting a leaf
// certificate signed by the CA that tlsutil derives from the gossip key,
// each verifying the other's chain against that CA and nothing else. A
// peer without the key cannot make a certificate the CA signed, so its
// handshake fails and the connection is closed before a byte of any
// protocol is read. (docs/security.md, "The cluster port", gives the construction.)
func KeyTLS(gossipKey []byte, node string) (*TLS, error) {
	ca, err := tlsutil.DeriveCA(gossipKey)
	if err != nil {
		return nil, fmt.Errorf("cluster port key: %w", err)
	}
	cert, err := ca.Leaf(node)
	if err != nil {
		return nil, fmt.Errorf("cluster port certificate: %w", err)
	}
	server := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool,
	}
	client := &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		},
		RootCAs: ca.Pool,
		// A routed call opens a connection per call: resuming the session
		// (TLS 1.3 PSK with a fresh ECDHE) skips the certificates'
		// signatures on every connection after the first to a peer.
		ClientSessionCache: tls.NewLRUClientSessionCache(256),
		// As in LoadTLS: no host name check (peers are dialled by
		// addresses no certificate names), the chain is checked below
		// against the derived CA only.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs.PeerCertificates, ca.Pool, x509.ExtKeyUsageServerAuth)
		},
	}
	return &TLS{server: server, client: client, mode: "TLS 1.3 with certificates derived from the gossip key"}, nil
}
