package acl

import (
	"errors"
	"strings"
	"testing"
)

func TestNewSecret(t *testing.T) {
	s1, h1, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	s2, h2, _ := NewSecret()
	if s1 == s2 || h1 == h2 {
		t.Fatal("two secrets are the same")
	}
	if !strings.HasPrefix(s1, SecretPrefix) || !LooksLikeSecret(s1) {
		t.Fatalf("secret %q is not of the documented form", s1)
	}
	if Hash(s1) != h1 || CheckHash(h1) != nil {
		t.Fatalf("hash of %q: %q, CheckHash %v", s1, h1, CheckHash(h1))
	}
	if strings.Contains(h1, s1[3:]) {
		t.Fatal("the hash holds the secret")
	}
	if !SameHash(h1, Hash(s1)) || SameHash(h1, h2) {
		t.Fatal("SameHash is wrong")
	}
	for _, bad := range []string{"", "tn_", "tn_short", "xx" + s1[2:], s1 + "A", s1[:len(s1)-1] + "!"} {
		if LooksLikeSecret(bad) {
			t.Errorf("LooksLikeSecret(%q) is true", bad)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, ok := range []string{"a", "admin-n1", "ci.bot_2", strings.Repeat("x", MaxNameLen)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", ".a", "a b", "anon@1.2.3.4", "a/b", "a\n", strings.Repeat("x", MaxNameLen+1), "é"} {
		if err := CheckName(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckName(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, r := range Roles {
		if err := CheckRole(r); err != nil {
			t.Errorf("CheckRole(%q): %v", r, err)
		}
	}
	for _, bad := range []string{"", "none", "Admin", "root"} {
		if err := CheckRole(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckRole(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, bad := range []string{"", "abc", strings.Repeat("G", 64), strings.Repeat("A", 64)} {
		if err := CheckHash(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckHash(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
