package node

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"golang.org/x/crypto/ssh"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/signing"
)

// pubKey is an ed25519 publisher key made in Go: its public key line,
// fingerprint and signer.
type pubKey struct {
	line, fp string
	s        *signing.Signer
}

func newPubKey(t testing.TB) *pubKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := signing.LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(pub)
	return &pubKey{line: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))), fp: ssh.FingerprintSHA256(sp), s: s}
}

func (k *pubKey) sign(t testing.TB, m []byte) []byte {
	t.Helper()
	sig, err := k.s.Sign(m)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// try9p writes a whole file through 9P and returns the error of the
// create, write or close.
func try9p(fsys *client.Fsys, path string, data []byte, perm plan9.Perm) error {
	fid, err := fsys.Create(path, plan9.OWRITE, perm)
	if err != nil {
		return err
	}
	if _, err := fid.Write(data); err != nil {
		fid.Close()
		return err
	}
	return fid.Close()
}

// publishSigned writes t/NAME.sig (when sig is not nil), t/NAME and
// t/NAME.meta, as a signed publish over 9P does.
func publishSigned(fsys *client.Fsys, name string, exe, meta, sig []byte) error {
	if sig != nil {
		if err := try9p(fsys, "t/"+name+".sig", sig, 0o644); err != nil {
			return err
		}
	}
	if err := try9p(fsys, "t/"+name, exe, 0o755); err != nil {
		return err
	}
	return try9p(fsys, "t/"+name+".meta", meta, 0o644)
}

// tell writes req to a write-only file of the tree in one write.
func tell(fsys *client.Fsys, path, req string) error {
	fid, err := fsys.Open(path, plan9.OWRITE)
	if err != nil {
		return err
	}
	defer fid.Close()
	_, err = fid.Write([]byte(req))
	return err
}

func inIdx(t testing.TB, f *client.Fsys, tool string) bool {
	return strings.Contains(readFile(t, f, "t/idx"), tool+"\t")
}

// Trusted keys and signed publishes on three real nodes over 9P: with no
// key trusted an unsigned publish passes (the control); once a key is
// trusted, unsigned and tampered publishes are refused, a signed one is
// served everywhere with its signer in v/, the unsigned tool leaves t/;
// with the leader's check turned off a forged publish is refused by
// every node's own apply; removing the key stops what it signed.
func TestTrust_SignedPublishes(t *testing.T) {
	root := t.TempDir()
	n1 := startHost(t, "n1", root, nil)
	n2 := startHost(t, "n2", root, nil, n1.gossip.LocalAddr())
	n3 := startHost(t, "n3", root, nil, n1.gossip.LocalAddr())
	nodes := []*Node{n1, n2, n3}
	waitFor(t, "three voters", 10*time.Second, func() bool { return len(voters(n1)) == 3 })
	fp := mountPublisher(t, n3, nodes...)
	var l *Node
	waitFor(t, "a leader", 10*time.Second, func() bool { l = leaderOf(nodes...); return l != nil })
	adminSecret := newTestToken(t, l, "root", p9.RoleAdmin)
	var fa *client.Fsys
	waitFor(t, "n2 to take the admin token", 10*time.Second, func() bool {
		var err error
		fa, err = mountAs(t, n2.P9Addr(), adminSecret)
		return err == nil
	})
	f1 := mount(t, n1.P9Addr())
	alice, mallory := newPubKey(t), newPubKey(t)
	script := []byte("#!/bin/sh\necho signed hello\n")
	meta := []byte(`{"description":"says hello"}`)
	manifest := signing.Tool("greet", meta, signing.Digest(script))

	// Control: no key trusted, an unsigned publish passes.
	if err := publishSigned(fp, "plain", script, meta, nil); err != nil {
		t.Fatalf("an unsigned publish with no key trusted: %v", err)
	}
	waitFor(t, "plain on n1", 5*time.Second, func() bool { return inIdx(t, f1, "plain") })

	// The first key, unsigned; a second one unsigned is refused.
	if got := mustAsk(t, fa, "trust/new", "alice "+alice.line); got != "alice "+alice.fp+"\n" {
		t.Fatalf("trust/new answered %q", got)
	}
	if _, err := ask(fa, "trust/new", "mallory "+mallory.line); err == nil || !strings.Contains(err.Error(), "permission denied: unsigned") {
		t.Fatalf("an unsigned second key: %v", err)
	}
	if _, err := ask(fp, "trust/new", "mallory "+mallory.line); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a publisher adding a key: %v", err)
	}
	waitFor(t, "alice in n1's trust/idx", 3*time.Second, func() bool { return readFile(t, f1, "trust/idx") == "alice "+alice.fp+"\n" })
	// The tool published unsigned before the key stops being served.
	waitFor(t, "plain gone from every t/idx", 3*time.Second, func() bool {
		return !inIdx(t, f1, "plain") && !inIdx(t, fa, "plain") && !inIdx(t, fp, "plain")
	})

	// Unsigned, tampered, and signed by an untrusted key: refused.
	if err := publishSigned(fp, "greet", script, meta, nil); err == nil || !strings.Contains(err.Error(), "permission denied: unsigned") {
		t.Fatalf("an unsigned publish: %v", err)
	}
	other := alice.sign(t, signing.Tool("greet", []byte(`{"description":"other"}`), signing.Digest(script)))
	if err := publishSigned(fp, "greet", script, meta, other); err == nil || !strings.Contains(err.Error(), "permission denied: signature") {
		t.Fatalf("a publish signed over other bytes: %v", err)
	}
	if err := publishSigned(fp, "greet", script, meta, mallory.sign(t, manifest)); err == nil || !strings.Contains(err.Error(), "permission denied: signature") {
		t.Fatalf("a publish signed by an untrusted key: %v", err)
	}
	if err := try9p(fp, "t/greet.sig", []byte("not a signature\n-----END SSH SIGNATURE-----\n"), 0o644); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Fatalf("a .sig that is not SSHSIG: %v", err)
	}
	for _, n := range nodes {
		if tl, ok := n.fsm.Tool("greet"); ok && tl.Published() {
			t.Fatalf("%s holds a refused publish", n.Name())
		}
	}

	// The leader's check bypassed: a forged publish, signed by a key not
	// trusted, appended straight to the leader's Raft log as a member
	// would, and every node's apply refuses it.
	forged, err := raftfsm.Encode(raftfsm.CmdPublishTools, raftfsm.PublishTools{
		Owner: l.Name(), Origin: raftfsm.Origin9P, Time: time.Now().UnixNano(), Publisher: "mallory",
		Tools: []raftfsm.ToolSpec{{Name: "evil", Meta: meta, ExecHash: signing.Digest(script), Size: int64(len(script)), Mode: 0o755,
			Sig: mallory.sign(t, signing.Tool("evil", meta, signing.Digest(script)))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if forged, err = raftfsm.Request("forgedevil", forged); err != nil {
		t.Fatal(err)
	}
	f := l.raftNode().Apply(forged, 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("appending the forged entry: %v", err)
	}
	if err, _ := f.Response().(error); err == nil || !strings.Contains(err.Error(), "permission denied: signature") {
		t.Fatalf("the leader's apply of the forged publish: %v", f.Response())
	}
	last := f.Index()
	waitFor(t, "every node to apply the forged entry", 5*time.Second, func() bool {
		return n1.fsm.LastIndex() >= last && n2.fsm.LastIndex() >= last && n3.fsm.LastIndex() >= last
	})
	for _, n := range nodes {
		if tl, ok := n.fsm.Tool("evil"); ok && tl.Published() {
			t.Fatalf("%s applied the forged publish", n.Name())
		}
	}

	// Signed: served on every node, its signer in v/NAME/idx.
	if err := publishSigned(fp, "greet", script, meta, alice.sign(t, manifest)); err != nil {
		t.Fatalf("a signed publish: %v", err)
	}
	waitFor(t, "greet on n1", 3*time.Second, func() bool { return inIdx(t, f1, "greet") })
	if idx := readFile(t, f1, "v/greet/idx"); !strings.HasPrefix(idx, "1 live ") || !strings.HasSuffix(idx, " alice\n") {
		t.Fatalf("v/greet/idx = %q", idx)
	}
	// A .meta signed as the file an editor saves (ending in a newline) and
	// written through t/ as it is, which the node stores without the
	// newline: the same manifest, accepted.
	saved := []byte("{\"description\":\"says hello, saved\"}\n")
	if err := publishSigned(fp, "greet", script, saved, alice.sign(t, signing.Tool("greet", saved, signing.Digest(script)))); err != nil {
		t.Fatalf("a signed publish of a .meta ending in a newline: %v", err)
	}
	waitFor(t, "greet's second version on n1", 3*time.Second, func() bool {
		return strings.HasPrefix(readFile(t, f1, "v/greet/idx"), "2 live ")
	})
	mustAsk(t, f1, "session/new", "name=s")
	mustAsk(t, f1, "session/s/agent/new", "name=a")
	mustAsk(t, f1, "session/s/agent/a/tools", "greet")
	if out := mustAsk(t, f1, "session/s/agent/a/call", "greet"); out != "signed hello\n" {
		t.Fatalf("the signed tool's call = %q", out)
	}

	// Removing the key, signed by it, stops what it signed; the last
	// key cannot be removed, so a second one is trusted first.
	rm := "remove alice\n" + string(alice.sign(t, signing.Trust("remove", "alice", alice.fp)))
	if err := tell(fa, "trust/ctl", rm); err == nil || !strings.Contains(err.Error(), "last trusted key") {
		t.Fatalf("the removal of the last key: %v", err)
	}
	if err := tell(fa, "trust/new", "bob "+mallory.line+"\n"+string(alice.sign(t, signing.Trust("add", "bob", mallory.fp)))); err != nil {
		t.Fatalf("a signed second key: %v", err)
	}
	if err := tell(fa, "trust/ctl", "remove alice"); err == nil || !strings.Contains(err.Error(), "permission denied: unsigned") {
		t.Fatalf("an unsigned removal: %v", err)
	}
	if err := tell(fa, "trust/ctl", rm); err != nil {
		t.Fatalf("a signed removal: %v", err)
	}
	var lastErr error
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, lastErr = ask(f1, "session/s/agent/a/call", "greet")
		if lastErr != nil && strings.Contains(lastErr.Error(), "signer alice is not trusted") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 s after alice's removal, greet's call on n1: %v (trust/idx %q)", lastErr, readFile(t, f1, "trust/idx"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if inIdx(t, f1, "greet") {
		t.Fatal("greet still in n1's t/idx after its signer's removal")
	}
}

// newKeyFile writes a new ed25519 private key file and returns its path
// and its public key line.
func newKeyFile(t *testing.T) (path, line string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "sign-key")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, _ := ssh.NewPublicKey(pub)
	return path, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
}

// -sign-key: a node signs its tools directory's tools that have no
// NAME.sig, so they are served once its key is trusted; the control, a
// node without it, whose tool leaves t/ then. A rescan makes no version.
func TestTrust_SignKey(t *testing.T) {
	root := t.TempDir()
	keyPath, keyLine := newKeyFile(t)
	n1 := startHostWith(t, "n1", root, nil, func(c *Config) { c.SignKey = keyPath })
	n2 := startHost(t, "n2", root, nil, n1.gossip.LocalAddr())
	waitFor(t, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	for _, x := range []struct {
		n    *Node
		name string
	}{{n1, "own"}, {n2, "other"}} {
		dir := filepath.Join(root, x.n.Name()+"-tools")
		if err := os.WriteFile(filepath.Join(dir, x.name+".meta"), []byte(`{"description":"d","cmd":"echo `+x.name+`"}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f1 := mount(t, n1.P9Addr())
	waitFor(t, "both tools on n1", 10*time.Second, func() bool { return inIdx(t, f1, "own") && inIdx(t, f1, "other") })
	if _, err := n1.bind(p9.Principal{Name: "root", Role: p9.RoleAdmin}).(auditBackend).AddTrustedKey("n1", keyLine, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "other gone from n1's t/idx", 3*time.Second, func() bool { return !inIdx(t, f1, "other") })
	if !inIdx(t, f1, "own") {
		t.Fatal("the tool n1 signed with -sign-key is not served")
	}
	if idx := readFile(t, f1, "v/own/idx"); strings.Count(idx, "\n") != 1 || !strings.HasSuffix(idx, " n1\n") {
		t.Fatalf("v/own/idx = %q", idx)
	}
	n1.syncTools()
	if idx := readFile(t, f1, "v/own/idx"); strings.Count(idx, "\n") != 1 {
		t.Fatalf("a rescan made a version: %q", idx)
	}
}
