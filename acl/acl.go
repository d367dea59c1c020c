package acl

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every secret, so a token is recognisable in a
// config file or a leak scanner.
const SecretPrefix = "tn_"

// secretBytes is the entropy of a secret: 256 bits.
const secretBytes = 32

// Roles are the names of the roles a token may carry, weakest first;
// each includes the ones before (DESIGN §7). "none" is not a token's
// role: it is what an attach without a token may get.
var Roles = []string{"read", "call", "publish", "admin"}

// ErrInvalid marks a name, role or hash a token may not carry.
var ErrInvalid = errors.New("invalid")

// NewSecret returns a fresh secret, "tn_" and 43 characters of base64url
// (32 random bytes), and its hash.
func NewSecret() (secret, hash string, err error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("making a token secret: %w", err)
	}
	secret = SecretPrefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, Hash(secret), nil
}

// Hash is what the cluster stores for a secret: the hex SHA-256 of it.
//
// A plain hash, not a password hash (bcrypt, argon2), is right here: the
// secret is 256 random bits, not something a person chose, so there is
// no dictionary to try and a brute force of the hash is as hopeless as
// one of the secret itself. A fast hash also keeps an attach cheap, and
// makes the stored value a lookup key.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// LooksLikeSecret reports whether s has the form NewSecret makes, so an
// attach name that cannot be a token is told apart from a wrong one.
func LooksLikeSecret(s string) bool {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(secretBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// SameHash compares two hashes in constant time.
func SameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// CheckHash checks that h is a hash as Hash makes it.
func CheckHash(h string) error {
	if len(h) != 2*sha256.Size {
		return fmt.Errorf("%w token hash: want %d hex digits, got %d characters", ErrInvalid, 2*sha256.Size, len(h))
	}
	if _, err := hex.DecodeString(h); err != nil || strings.ToLower(h) != h {
		return fmt.Errorf("%w token hash: want lower-case hex digits", ErrInvalid)
	}
	return nil
}

// MaxNameLen is the longest token name.
const MaxNameLen = 64

// CheckName checks a token name: 1 to 64 of [A-Za-z0-9_.-], starting with
// a letter or digit. Names never hold "@", so no token is mistaken for an
// anonymous principal (anon@ADDR), nor white space, so token/idx and
// token/ctl lines stay one field per name.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("%w token name: it is empty", ErrInvalid)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w token name %q: longer than %d characters", ErrInvalid, name[:MaxNameLen]+"...", MaxNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			i > 0 && (r == '_' || r == '.' || r == '-')
		if !ok {
			return fmt.Errorf("%w token name %q: use letters, digits, '_', '.' and '-', starting with a letter or digit", ErrInvalid, name)
		}
	}
	return nil
}

// CheckRole checks that role is one a token may carry.
func CheckRole(role string) error {
	for _, r := range Roles {
		if r == role {
			return nil
		}
	}
	return fmt.Errorf("%w role %q: want read, call, publish or admin", ErrInvalid, role)
}
