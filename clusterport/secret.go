package clusterport

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// SecretFile is the name, in the data directory, of the cluster secret a
// lone node makes when it is given neither a gossip key nor mTLS: it keys
// the node's gossip and its cluster port as a gossip key would (KeyTLS),
// so nothing on the host, a tool included, can speak either without it.
// A node that joins this one is given the same key with
// -encrypt "$(cat DATA/cluster.key)".
const SecretFile = "cluster.key"

// ReadSecret reads the cluster secret at path: base64 of 32 bytes, as
// toolnode keygen prints. A missing file is an error that wraps
// os.ErrNotExist.
func ReadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s holds no base64 key of 32 bytes; remove it to make a new one, or give -encrypt KEY", path)
	}
	return key, nil
}

// MakeSecret makes a new cluster secret and writes it to path (mode 0600,
// whole or not at all).
func MakeSecret(path string) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	return key, nil
}
