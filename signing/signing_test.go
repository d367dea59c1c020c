package signing

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// keygen makes an OpenSSH key pair of type typ with ssh-keygen and
// returns the private key's path and the public key's line.
func keygen(t *testing.T, typ string, extra ...string) (string, []byte) {
	t.Helper()
	bin, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen (openssh-client) is not installed")
	}
	priv := filepath.Join(t.TempDir(), "key")
	args := append([]string{"-q", "-t", typ, "-N", "", "-C", "test", "-f", priv}, extra...)
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %v: %v\n%s", args, err, out)
	}
	pub, err := os.ReadFile(priv + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// sshSign signs data with OpenSSH's own ssh-keygen -Y sign.
func sshSign(t *testing.T, priv, namespace string, data []byte) []byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", namespace, "-f", priv, f).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(f + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func TestManifests(t *testing.T) {
	meta := []byte(`{"description":"x"}`)
	got := string(Tool("greet", meta, ""))
	want := "toolnode-tool-v1\ngreet\n" + Digest(meta) + "\n-\n"
	if got != want {
		t.Fatalf("tool manifest %q, want %q", got, want)
	}
	if m := string(Tool("greet", meta, strings.Repeat("a", 64))); !strings.HasSuffix(m, "\n"+strings.Repeat("a", 64)+"\n") {
		t.Fatalf("tool manifest with an executable: %q", m)
	}
	if m := string(MCP("fs", []byte("{}"))); !strings.HasPrefix(m, "toolnode-mcp-v1\nfs\n") || !strings.HasSuffix(m, "\n-\n") {
		t.Fatalf("mcp manifest: %q", m)
	}
	if m := string(Trust("add", "alice", "SHA256:x")); m != "toolnode-trust-v1\nadd\nalice\nSHA256:x\n" {
		t.Fatalf("trust manifest: %q", m)
	}
}

// A signature made by OpenSSH's ssh-keygen verifies; so does one made
// here, and ssh-keygen -Y verify accepts it.
func TestOpenSSHSignatures(t *testing.T) {
	for _, typ := range []string{"ed25519", "ecdsa"} {
		t.Run(typ, func(t *testing.T) {
			priv, pub := keygen(t, typ, map[string][]string{"ecdsa": {"-b", "256"}}[typ]...)
			key, err := ParseKey("alice", pub)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("ssh-keygen", "-l", "-f", priv+".pub").Output()
			if err != nil || !strings.Contains(string(out), key.Fingerprint) {
				t.Fatalf("fingerprint %s, ssh-keygen -l: %s %v", key.Fingerprint, out, err)
			}
			m := Tool("greet", []byte("{}"), "")
			sig := sshSign(t, priv, Namespace, m)
			if k, err := Verify(m, sig, []*Key{key}); err != nil || k.Name != "alice" {
				t.Fatalf("an ssh-keygen signature: %v", err)
			}

			s, err := LoadSigner(priv)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := s.Sign(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(m, ours, []*Key{key}); err != nil {
				t.Fatalf("our signature: %v", err)
			}
			dir := t.TempDir()
			signers := filepath.Join(dir, "allowed")
			os.WriteFile(signers, []byte("alice "+strings.TrimSpace(string(pub))+"\n"), 0o600)
			os.WriteFile(filepath.Join(dir, "sig"), ours, 0o600)
			cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", signers, "-I", "alice", "-n", Namespace, "-s", filepath.Join(dir, "sig"))
			cmd.Stdin = bytes.NewReader(m)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("ssh-keygen -Y verify refuses our signature: %v\n%s", err, out)
			}
		})
	}
}

// Each refusal says why: no signature, not an SSH signature, a key not
// trusted, another namespace, other bytes.
func TestVerifyRefusals(t *testing.T) {
	priv, pub := keygen(t, "ed25519")
	key, _ := ParseKey("alice", pub)
	otherPriv, _ := keygen(t, "ed25519")
	m := Tool("greet", []byte("{}"), "")
	good := sshSign(t, priv, Namespace, m)
	cases := map[string]struct {
		manifest, sig []byte
		want          string
	}{
		"none":          {m, nil, "permission denied: unsigned"},
		"not sshsig":    {m, []byte("-----BEGIN PGP SIGNATURE-----\nxx\n-----END PGP SIGNATURE-----\n"), "invalid: the signature is not an SSH signature"},
		"untrusted key": {m, sshSign(t, otherPriv, Namespace, m), "which is not a trusted key"},
		"namespace":     {m, sshSign(t, priv, "git", m), `namespace "git"`},
		"other bytes":   {Tool("greet", []byte(`{"x":1}`), ""), good, "does not verify over these bytes"},
	}
	for what, c := range cases {
		_, err := Verify(c.manifest, c.sig, []*Key{key})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", what, err, c.want)
		}
	}
	if _, err := Verify(m, nil, nil); !errors.Is(err, ErrUnsigned) {
		t.Errorf("no signature: %v", err)
	}
}

func TestParseKeyRefusals(t *testing.T) {
	_, rsa := keygen(t, "rsa", "-b", "2048")
	if _, err := ParseKey("r", rsa); err == nil || !strings.Contains(err.Error(), "key type ssh-rsa") {
		t.Errorf("an RSA key: %v", err)
	}
	if _, err := ParseKey("x", []byte("not a key")); err == nil || !strings.Contains(err.Error(), "not an OpenSSH public key") {
		t.Errorf("garbage: %v", err)
	}
	_, a := keygen(t, "ed25519")
	_, b := keygen(t, "ed25519")
	if _, err := ParseKey("two", append(a, b...)); err == nil || !strings.Contains(err.Error(), "more than one key") {
		t.Errorf("two keys: %v", err)
	}
	priv, _ := keygen(t, "ed25519", "-N", "secret")
	if _, err := LoadSigner(priv); err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Errorf("a passphrase-protected key: %v", err)
	}
}

// A .meta signed as a file (ending in a newline) and the same document as
// a node stores it from t/ (its surrounding white space removed) have one
// manifest.
func TestToolManifestIgnoresSurroundingSpace(t *testing.T) {
	doc := []byte(`{"description":"x"}`)
	a := Tool("x", append(append([]byte("\n "), doc...), '\n'), "")
	if b := Tool("x", doc, ""); string(a) != string(b) {
		t.Fatalf("manifests differ:\n%s\n%s", a, b)
	}
	if c := Tool("x", []byte(`{"description":"y"}`), ""); string(c) == string(a) {
		t.Fatal("a changed document has the same manifest")
	}
}
