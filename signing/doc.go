// Package signing owns what publisher signatures are (DESIGN §8): the
// manifests a signature covers — a tool's (toolnode-tool-v1), an MCP
// server definition's (toolnode-mcp-v1) and a change to the trusted keys
// (toolnode-trust-v1) — the publisher keys the cluster accepts (OpenSSH
// ssh-ed25519 and ecdsa-sha2-nistp256 public keys, named by the
// fingerprint ssh-keygen -l prints), and SSH signatures in the SSHSIG
// format of ssh-keygen -Y sign, namespace "toolnode": made with an
// OpenSSH private key file, verified against a set of trusted keys.
//
// It is pure: no state, no I/O but reading a key file, and it knows
// nothing of Raft, 9P or the catalog. Every node verifies with it before
// it serves or runs a version, so a forged log entry, a tampered blob or
// a compromised leader cannot make a node run what no trusted key
// signed. Parsing and verification are github.com/hiddeco/sshsig's and
// golang.org/x/crypto/ssh's.
package signing
