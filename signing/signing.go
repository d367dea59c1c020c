package signing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// Namespace is the SSHSIG namespace of every toolnode signature:
// ssh-keygen -Y sign -n toolnode.
const Namespace = "toolnode"

// Manifest headers, the first line of each kind of manifest.
const (
	ToolManifest  = "toolnode-tool-v1"
	MCPManifest   = "toolnode-mcp-v1"
	TrustManifest = "toolnode-trust-v1"
)

// ErrUnsigned is the refusal of a publish with no signature while keys
// are trusted; 9P clients see "permission denied: unsigned".
var ErrUnsigned = errors.New("permission denied: unsigned")

// Digest is the lowercase hex SHA-256 of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Tool is the manifest of a tool's version: its name, the SHA-256 of its
// metadata, and the SHA-256 of its executable ("" for none, written -).
// The metadata's digest is of the document without the white space
// around it, as a node stores a .meta written through t/: the manifest of
// a file on disk and of the version it became are the same.
func Tool(name string, meta []byte, execDigest string) []byte {
	return manifest(ToolManifest, name, Digest(bytes.TrimSpace(meta)), orDash(execDigest))
}

// MCP is the manifest of an MCP server definition's version.
func MCP(name string, definition []byte) []byte {
	return manifest(MCPManifest, name, Digest(definition), "-")
}

// Trust is the manifest of a change to the trusted keys: verb "add" or
// "remove", the key's name and fingerprint.
func Trust(verb, name, fingerprint string) []byte {
	return manifest(TrustManifest, verb, name, fingerprint)
}

func manifest(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Key is a publisher key the cluster may trust.
type Key struct {
	Name        string
	Public      ssh.PublicKey
	Fingerprint string // as ssh-keygen -l prints it: SHA256:...
}

// acceptedTypes are the key types a publisher key may have.
var acceptedTypes = map[string]bool{ssh.KeyAlgoED25519: true, ssh.KeyAlgoECDSA256: true}

// ParseKey reads one OpenSSH public key line (as in KEY.pub or
// authorized_keys) as the key named name. Only ssh-ed25519 and
// ecdsa-sha2-nistp256 keys are accepted: RSA keys and security-key (sk-)
// keys are refused, naming their type.
func ParseKey(name string, line []byte) (*Key, error) {
	pub, _, _, rest, err := ssh.ParseAuthorizedKey(bytes.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("invalid: not an OpenSSH public key: %v", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("invalid: more than one key; give one key a line")
	}
	if !acceptedTypes[pub.Type()] {
		return nil, fmt.Errorf("invalid: key type %s: a publisher key is ssh-ed25519 or ecdsa-sha2-nistp256", pub.Type())
	}
	return &Key{Name: name, Public: pub, Fingerprint: ssh.FingerprintSHA256(pub)}, nil
}

// Line is the key as an OpenSSH public key line, commented with its name.
func (k *Key) Line() string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k.Public))) + " " + k.Name
}

// Signer signs manifests with an OpenSSH private key.
type Signer struct {
	signer ssh.Signer
}

// LoadSigner reads an unencrypted OpenSSH private key file of an accepted
// type. A passphrase-protected key is refused: use ssh-keygen -Y sign,
// which asks for it, with the manifest toolnode manifest prints.
func LoadSigner(path string) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		var pp *ssh.PassphraseMissingError
		if errors.As(err, &pp) {
			return nil, fmt.Errorf("%s is protected by a passphrase: sign with ssh-keygen -Y sign -n %s -f %s the manifest that toolnode manifest prints", path, Namespace, path)
		}
		return nil, fmt.Errorf("%s is not an OpenSSH private key: %v", path, err)
	}
	if !acceptedTypes[s.PublicKey().Type()] {
		return nil, fmt.Errorf("%s: key type %s: a publisher key is ssh-ed25519 or ecdsa-sha2-nistp256", path, s.PublicKey().Type())
	}
	return &Signer{signer: s}, nil
}

// Fingerprint is the signer's public key's fingerprint.
func (s *Signer) Fingerprint() string { return ssh.FingerprintSHA256(s.signer.PublicKey()) }

// Sign returns the armored SSH signature of manifest, as ssh-keygen -Y
// sign writes it (sha512, namespace toolnode).
func (s *Signer) Sign(manifest []byte) ([]byte, error) {
	sig, err := sshsig.Sign(bytes.NewReader(manifest), s.signer, sshsig.HashSHA512, Namespace)
	if err != nil {
		return nil, err
	}
	return sshsig.Armor(sig), nil
}

// Verify checks an armored signature over manifest against the trusted
// keys and returns the key that made it. Each refusal says why: not an
// SSH signature, made by a key not trusted, another namespace, or not
// over these bytes.
func Verify(manifest, armored []byte, trusted []*Key) (*Key, error) {
	if len(bytes.TrimSpace(armored)) == 0 {
		return nil, ErrUnsigned
	}
	sig, err := sshsig.Unarmor(bytes.TrimSpace(armored))
	if err != nil {
		return nil, fmt.Errorf("invalid: the signature is not an SSH signature (ssh-keygen -Y sign): %v", err)
	}
	fp := ssh.FingerprintSHA256(sig.PublicKey)
	var key *Key
	for _, k := range trusted {
		if k.Fingerprint == fp {
			key = k
		}
	}
	if key == nil {
		return nil, fmt.Errorf("permission denied: signature by %s, which is not a trusted key", fp)
	}
	if sig.Namespace != Namespace {
		return nil, fmt.Errorf("permission denied: signature for namespace %q, not %q", sig.Namespace, Namespace)
	}
	if err := sshsig.Verify(bytes.NewReader(manifest), sig, key.Public, sig.HashAlgorithm, Namespace); err != nil {
		return nil, fmt.Errorf("permission denied: signature by %s does not verify over these bytes: %v", key.Name, err)
	}
	return key, nil
}

// Names lists the keys' names, sorted.
func Names(keys []*Key) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.Name)
	}
	sort.Strings(out)
	return out
}

// Parse checks that armored is an SSH signature in the toolnode
// namespace and returns the fingerprint of the key that made it; it
// verifies nothing.
func Parse(armored []byte) (string, error) {
	if len(bytes.TrimSpace(armored)) == 0 {
		return "", ErrUnsigned
	}
	sig, err := sshsig.Unarmor(bytes.TrimSpace(armored))
	if err != nil {
		return "", fmt.Errorf("invalid: the signature is not an SSH signature (ssh-keygen -Y sign): %v", err)
	}
	if sig.Namespace != Namespace {
		return "", fmt.Errorf("invalid: a signature for namespace %q, not %q (ssh-keygen -Y sign -n %s)", sig.Namespace, Namespace, Namespace)
	}
	return ssh.FingerprintSHA256(sig.PublicKey), nil
}
