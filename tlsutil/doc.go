// Package tlsutil makes the certificates of a toolnode cluster: a CA and
// node certificates written as PEM files (`toolnode tls ca`, `toolnode tls
// cert`, in the manner of `consul tls ca create` and `consul tls cert
// create`), and the CA a cluster derives from its gossip key, which
// authenticates the cluster port when no -tls-* files are given.
//
// It knows nothing of nodes, Raft or 9P: it turns keys into certificates
// and certificates into files. Nothing here invents cryptography: keys are
// ECDSA P-256 (files) or Ed25519 (derived), derivation is HKDF-SHA256
// (crypto/hkdf), and everything else is crypto/x509.
package tlsutil
