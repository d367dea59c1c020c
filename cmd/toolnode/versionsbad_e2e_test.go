//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The bad input of DESIGN §8 against a real node, each through 9P: a
// canary naming no node, promote with no canary, a key line that is not
// an OpenSSH public key, a .sig that is not an SSH signature, and a
// signature over other bytes are each refused with a clear error
// (invalid ... / permission denied: ...), a log line naming the cause,
// and nothing changed. (A rollback to a version not kept is in
// TestE2E_Versions.)
func TestE2E_VersionsBadInput(t *testing.T) {
	t.Parallel()
	n := newCnode(t, "b1")
	n.launch(t)
	n.waitServing(t, 30*time.Second)
	e, addr := n.e, n.e.p9
	dir := t.TempDir()
	meta, exe := filepath.Join(dir, "greet.meta"), filepath.Join(dir, "greet")
	writeFile(t, meta, greetMeta, 0o644)
	writeFile(t, exe, greetScript(1), 0o755)
	cliOK(t, e, "", "publish", "-a", addr, meta, exe)
	idx := mustRead9(t, n, "v/greet/idx")
	c, err := dial9(addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	refused := func(what string, err error, wantErr, wantLog string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%s: %v, want an error saying %q", what, err, wantErr)
		}
		pollUntil(t, 5*time.Second, "the log line for "+what, func() (bool, string) {
			return strings.Contains(n.p.log.String(), wantLog), ""
		})
		if got := mustRead9(t, n, "v/greet/idx"); got != idx {
			t.Fatalf("%s changed v/greet/idx:\n%s, was\n%s", what, got, idx)
		}
	}

	refused("a canary on no node", write9(c.fsys, "v/greet/ctl", "canary nowhere"),
		"invalid canary: no node nowhere", "versions: refused the canary of greet on nowhere by ")
	refused("promote with no canary", write9(c.fsys, "v/greet/ctl", "promote"),
		`invalid promote: tool "greet" has no canary`, "versions: refused the promote of greet by ")
	refused("a key line that is no key", write9(c.fsys, "trust/new", "mallory ssh-ed25519 notbase64"),
		"invalid: not an OpenSSH public key", "trust: refused key mallory from ")
	if s := mustRead9(t, n, "trust/idx"); s != "" {
		t.Fatalf("trust/idx after a refused key: %q", s)
	}

	alice := sshKeygen(t, dir, "alice")
	runCLI(t, e, "", "trust", "-a", addr, "add", "alice", alice+".pub")
	refused("a .sig that is not an SSH signature", put9Big(n, "t/greet.sig", []byte("-----BEGIN PGP SIGNATURE-----\nxx\n-----END PGP SIGNATURE-----\n")),
		"invalid: the signature is not an SSH signature", "9p: refused the signature written to t/greet.sig")

	// A real signature by a trusted key, over another tool's manifest.
	other := filepath.Join(dir, "other.meta")
	writeFile(t, other, `{"description": "other bytes"}`+"\n", 0o644)
	mf := filepath.Join(dir, "other.manifest")
	writeFile(t, mf, runCLI(t, e, "", "manifest", other), 0o644)
	if err := put9Big(n, "t/greet.sig", sshSignFile(t, alice, mf)); err != nil {
		t.Fatal(err)
	}
	refused("a signature over other bytes", put9Big(n, "t/greet.meta", []byte(`{"description": "signed over other bytes"}`)),
		"permission denied: signature by alice does not verify over these bytes",
		"refused the publish of greet by admin-b1: permission denied: signature by alice does not verify over these bytes")
}
