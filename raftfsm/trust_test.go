package raftfsm

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"golang.org/x/crypto/ssh"

	"github.com/toolnode/toolnode/signing"
)

// testKey is a publisher key pair made in Go: its public key line and a
// signer of its private key file.
type testKey struct {
	line string
	fp   string
	s    *signing.Signer
}

func newTestKey(t testing.TB) *testKey {
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
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{line: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))), fp: ssh.FingerprintSHA256(sp), s: s}
}

func (k *testKey) sign(t testing.TB, manifest []byte) []byte {
	t.Helper()
	sig, err := k.s.Sign(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func trustNames(f *FSM) string {
	var out []string
	for _, k := range f.TrustedKeys() {
		out = append(out, k.Name+"="+k.Fingerprint)
	}
	return strings.Join(out, " ")
}

// The first key is added unsigned; after it, every change to trust/ is
// refused by Apply itself unless a trusted key signed its manifest, and a
// refused change changes nothing.
func TestTrust_ChangesSignedAfterFirstKey(t *testing.T) {
	h := newHarness(t, nil)
	alice, bob, eve := newTestKey(t), newTestKey(t), newTestKey(t)
	if r := h.ok(CmdAddKey, AddKey{Name: "alice", Key: alice.line, By: "admin", Time: 1}); r.Name != alice.fp {
		t.Fatalf("add answered %q, want the fingerprint %s", r.Name, alice.fp)
	}
	// Unsigned, signed by an untrusted key, signed over other bytes, a
	// trusted key's signature for another namespace's manifest: refused.
	h.fail(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2}, ErrDenied)
	h.fail(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2, Sig: eve.sign(t, signing.Trust("add", "bob", bob.fp))}, ErrDenied)
	h.fail(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2, Sig: alice.sign(t, signing.Trust("add", "eve", eve.fp))}, ErrDenied)
	h.fail(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2, Sig: alice.sign(t, signing.Trust("remove", "bob", bob.fp))}, ErrDenied)
	h.fail(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2, Sig: []byte("not a signature")}, ErrDenied)
	if got := trustNames(h.fsm); got != "alice="+alice.fp {
		t.Fatalf("after refused adds, trust = %s", got)
	}
	h.ok(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 3, Sig: alice.sign(t, signing.Trust("add", "bob", bob.fp))})
	// The same key under another name, a name taken, a key line that is
	// not an OpenSSH public key.
	h.fail(CmdAddKey, AddKey{Name: "bob2", Key: bob.line, Time: 4, Sig: alice.sign(t, signing.Trust("add", "bob2", bob.fp))}, ErrExists)
	h.fail(CmdAddKey, AddKey{Name: "bob", Key: eve.line, Time: 4, Sig: alice.sign(t, signing.Trust("add", "bob", eve.fp))}, ErrExists)
	h.fail(CmdAddKey, AddKey{Name: "x", Key: "ssh-rsa AAAA", Time: 4}, ErrInvalid)

	h.fail(CmdRemoveKey, RemoveKey{Name: "alice", Time: 5}, ErrDenied)
	h.fail(CmdRemoveKey, RemoveKey{Name: "alice", Time: 5, Sig: eve.sign(t, signing.Trust("remove", "alice", alice.fp))}, ErrDenied)
	h.fail(CmdRemoveKey, RemoveKey{Name: "nobody", Time: 5}, ErrNotFound)
	h.ok(CmdRemoveKey, RemoveKey{Name: "alice", Time: 6, Sig: bob.sign(t, signing.Trust("remove", "alice", alice.fp))})
	// The last key stays: without it no signature would be asked for.
	h.fail(CmdRemoveKey, RemoveKey{Name: "bob", Time: 6, Sig: bob.sign(t, signing.Trust("remove", "bob", bob.fp))}, ErrInvalid)
	if got := trustNames(h.fsm); got != "bob="+bob.fp {
		t.Fatalf("after alice's removal, trust = %s", got)
	}
	// alice, removed, signs no more changes.
	h.fail(CmdAddKey, AddKey{Name: "eve", Key: eve.line, Time: 7, Sig: alice.sign(t, signing.Trust("add", "eve", eve.fp))}, ErrDenied)

	// The leader's validation refuses what no node could apply.
	for _, bad := range []AddKey{
		{Name: "k", Key: "not a key", Time: 1},
		{Name: "k", Key: "ssh-dss AAAAB3NzaC1kc3MAAACBAP", Time: 1},
		{Name: "bad name", Key: bob.line, Time: 1},
	} {
		if err := Validate(MustEncode(CmdAddKey, bad)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Validate(%+v) = %v", bad, err)
		}
	}
}

// A forged trust change, appended around the leader's check, is refused
// by every replica's own Apply: the replicas stay identical and trust
// only what a trusted key signed.
func TestTrust_ForgedChangeRefusedByEveryReplica(t *testing.T) {
	alice, mallory := newTestKey(t), newTestKey(t)
	var log []*raft.Log
	add := func(c CommandType, body any) {
		log = append(log, &raft.Log{Index: uint64(len(log) + 1), Term: 1, Type: raft.LogCommand, Data: MustEncode(c, body)})
	}
	add(CmdAddKey, AddKey{Name: "alice", Key: alice.line, Time: 1})
	add(CmdAddKey, AddKey{Name: "mallory", Key: mallory.line, Time: 2, Sig: mallory.sign(t, signing.Trust("add", "mallory", mallory.fp))})
	add(CmdRemoveKey, RemoveKey{Name: "alice", Time: 3, Sig: mallory.sign(t, signing.Trust("remove", "alice", alice.fp))})
	var snaps [][]byte
	for range 3 {
		f := New(nil)
		f.SetLogf(func(string, ...any) {})
		for i, l := range log {
			r := f.Apply(l)
			if err, _ := r.(error); (i == 0) != (err == nil) || i > 0 && !errors.Is(err, ErrDenied) {
				t.Fatalf("entry %d applied with %v", i+1, r)
			}
		}
		if got := trustNames(f); got != "alice="+alice.fp {
			t.Fatalf("a replica trusts %s", got)
		}
		snaps = append(snaps, snapshotBytes(t, f))
	}
	if !bytes.Equal(snaps[0], snaps[1]) || !bytes.Equal(snaps[1], snaps[2]) {
		t.Fatal("the replicas diverged")
	}
}

// A snapshot carries the trusted keys; a restored node checks the next
// change against them; a snapshot of the format before trust restores
// with none.
func TestTrust_Snapshot(t *testing.T) {
	h := newHarness(t, nil)
	alice, bob := newTestKey(t), newTestKey(t)
	h.ok(CmdAddKey, AddKey{Name: "alice", Key: alice.line, Time: 1})
	snap := snapshotBytes(t, h.fsm)
	r := New(nil)
	if err := r.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if got := trustNames(r); got != "alice="+alice.fp {
		t.Fatalf("restored trust = %s", got)
	}
	hr := &harness{t: t, fsm: r, index: h.index}
	hr.fail(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2}, ErrDenied)
	hr.ok(CmdAddKey, AddKey{Name: "bob", Key: bob.line, Time: 2, Sig: alice.sign(t, signing.Trust("add", "bob", bob.fp))})

	old := newHarness(t, nil)
	old.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 9, Name: "z", Meta: metaOf("z")})
	v2 := bytes.Replace(snapshotBytes(t, old.fsm), []byte(`"format":5`), []byte(`"format":2`), 1)
	up := New(nil)
	if err := up.Restore(io.NopCloser(bytes.NewReader(v2))); err != nil {
		t.Fatal(err)
	}
	if len(up.TrustedKeys()) != 0 {
		t.Fatal("a format-2 snapshot restored with trusted keys")
	}
	if tl, _ := up.Tool("z"); up.TrustError(tl) != nil {
		t.Fatal("with no key trusted, an unsigned tool is refused")
	}
}

// Once a key is trusted, a publish must carry a trusted key's signature
// over its manifest: Apply refuses the others and changes nothing. The
// control: the same unsigned publish passes while no key is trusted.
func TestTrust_SignedPublishes(t *testing.T) {
	h := newHarness(t, nil)
	alice, eve := newTestKey(t), newTestKey(t)
	exe := []byte("#!/bin/sh\necho hi\n")
	d := ExecHash(exe)

	// Control: no key trusted, unsigned publishes pass.
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Time: 1, Tools: []ToolSpec{{Name: "old", Meta: metaOf("old"), ExecHash: d, Size: int64(len(exe))}}})
	if tl, _ := h.fsm.Tool("old"); h.fsm.TrustError(tl) != nil {
		t.Fatal("an unsigned tool is refused while no key is trusted")
	}

	h.ok(CmdAddKey, AddKey{Name: "alice", Key: alice.line, Time: 2})
	// The tool published unsigned before the first key is not served now.
	if tl, _ := h.fsm.Tool("old"); h.fsm.TrustError(tl) == nil || !strings.Contains(h.fsm.TrustError(tl).Error(), "unsigned") {
		t.Fatalf("the unsigned tool's trust error = %v", h.fsm.TrustError(tl))
	}

	before := snapshotBytes(t, h.fsm)
	unsigned := PublishTools{Owner: "n1", Time: 3, Tools: []ToolSpec{{Name: "greet", Meta: metaOf("hi"), ExecHash: d, Size: int64(len(exe))}}}
	r := h.apply(CmdPublishTools, unsigned)
	if err, _ := r.(error); err == nil || !strings.HasPrefix(err.Error(), "permission denied: unsigned") {
		t.Fatalf("an unsigned publish: %v", r)
	}
	tampered := unsigned
	tampered.Tools = []ToolSpec{{Name: "greet", Meta: metaOf("hi"), ExecHash: d, Size: int64(len(exe)), Sig: alice.sign(t, signing.Tool("greet", metaOf("other"), d))}}
	r = h.apply(CmdPublishTools, tampered)
	if err, _ := r.(error); err == nil || !strings.HasPrefix(err.Error(), "permission denied: signature") {
		t.Fatalf("a publish signed over other bytes: %v", r)
	}
	h.fail(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 4, Name: "greet", Meta: metaOf("hi"), Sig: eve.sign(t, signing.Tool("greet", metaOf("hi"), ""))}, ErrDenied)
	h.fail(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 4, Name: "old", Meta: metaOf("new")}, ErrDenied)
	after := snapshotBytes(t, h.fsm)
	if !bytes.Equal(stripApplied(before), stripApplied(after)) {
		t.Fatalf("refused publishes changed the state:\n%s\n%s", before, after)
	}

	signed := unsigned
	signed.Tools = []ToolSpec{{Name: "greet", Meta: metaOf("hi"), ExecHash: d, Size: int64(len(exe)), Sig: alice.sign(t, signing.Tool("greet", metaOf("hi"), d))}}
	h.ok(CmdPublishTools, signed)
	tl, _ := h.fsm.Tool("greet")
	if tl.Signer != "alice" || h.fsm.TrustError(tl) != nil {
		t.Fatalf("the signed tool: signer %q, trust error %v", tl.Signer, h.fsm.TrustError(tl))
	}
	if v, _ := history(t, h.fsm, "greet").Live(); v.Signer != "alice" || len(v.Sig) == 0 {
		t.Fatalf("the signed version: %+v", v)
	}
	// A new metadata keeps the executable: its signature covers both.
	h.fail(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 5, Name: "greet", Meta: metaOf("v2"), Sig: alice.sign(t, signing.Tool("greet", metaOf("v2"), ""))}, ErrDenied)
	h.ok(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 5, Name: "greet", Meta: metaOf("v2"), Sig: alice.sign(t, signing.Tool("greet", metaOf("v2"), d))})
	// A rollback to the unsigned version 1 of old is refused; greet's
	// signed version 1 rolls back with its signature.
	h.fail(CmdRollback, Rollback{Name: "old", Version: 1, Owner: "n1", Time: 6}, ErrDenied)
	h.ok(CmdRollback, Rollback{Name: "greet", Version: 1, Owner: "n1", Time: 6})
	if tl, _ := h.fsm.Tool("greet"); h.fsm.TrustError(tl) != nil || tl.Signer != "alice" {
		t.Fatalf("the rolled-back tool: %v", h.fsm.TrustError(tl))
	}

	// Removing the key stops what it signed, naming the signer.
	h.ok(CmdAddKey, AddKey{Name: "bob", Key: eve.line, Time: 7, Sig: alice.sign(t, signing.Trust("add", "bob", eve.fp))})
	h.ok(CmdRemoveKey, RemoveKey{Name: "alice", Time: 8, Sig: eve.sign(t, signing.Trust("remove", "alice", alice.fp))})
	tl, _ = h.fsm.Tool("greet")
	if err := h.fsm.TrustError(tl); err == nil || !strings.Contains(err.Error(), "signer alice is not trusted") {
		t.Fatalf("after alice's removal, greet's trust error = %v", err)
	}
}

// A forged signed-publish entry (a signature over other bytes, appended
// as a member would, around the leader's check) is refused by every
// replica's Apply: no replica records it, and they stay identical.
func TestTrust_ForgedPublishRefusedByEveryReplica(t *testing.T) {
	alice, mallory := newTestKey(t), newTestKey(t)
	exe := ExecHash([]byte("evil"))
	var log []*raft.Log
	add := func(c CommandType, body any) {
		log = append(log, &raft.Log{Index: uint64(len(log) + 1), Term: 1, Type: raft.LogCommand, Data: MustEncode(c, body)})
	}
	add(CmdAddKey, AddKey{Name: "alice", Key: alice.line, Time: 1})
	add(CmdPublishTools, PublishTools{Owner: "n1", Time: 2, Tools: []ToolSpec{{Name: "greet", Meta: metaOf("hi"), ExecHash: exe, Sig: alice.sign(t, signing.Tool("greet", metaOf("hi"), ExecHash([]byte("good"))))}}})
	add(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 3, Name: "greet", Meta: metaOf("hi"), Sig: mallory.sign(t, signing.Tool("greet", metaOf("hi"), ""))})
	var snaps [][]byte
	for range 3 {
		f := New(nil)
		f.SetLogf(func(string, ...any) {})
		for i, l := range log {
			if r := f.Apply(l); i > 0 {
				if err, _ := r.(error); !errors.Is(err, ErrDenied) {
					t.Fatalf("forged entry %d applied with %v", i+1, r)
				}
			}
		}
		if _, ok := f.Tool("greet"); ok {
			t.Fatal("a replica holds the forged tool")
		}
		snaps = append(snaps, snapshotBytes(t, f))
	}
	if !bytes.Equal(snaps[0], snaps[1]) || !bytes.Equal(snaps[1], snaps[2]) {
		t.Fatal("the replicas diverged")
	}
}

// stripApplied drops the applied index from a snapshot, which every entry
// moves, refused or not.
func stripApplied(snap []byte) []byte {
	i := bytes.Index(snap, []byte(`"applied":`))
	j := bytes.Index(snap, []byte(`,"requests"`))
	if i < 0 || j < i {
		return snap
	}
	return append(append([]byte{}, snap[:i]...), snap[j:]...)
}

// What a signature adds to a publish's apply (its verification on every
// node), against an unsigned publish with no key trusted; and what it
// adds to serving a tool: its first check on a node, then the cached one
// every call makes.
func BenchmarkTrust(b *testing.B) {
	alice := newTestKey(b)
	exe := ExecHash([]byte("#!/bin/sh\necho hi\n"))
	publish := func(b *testing.B, h *harness, sign bool) {
		for i := range b.N {
			meta := metaOf(strings.Repeat("x", 200) + string(rune('a'+i%26)) + strings.Repeat("y", i%7))
			spec := ToolSpec{Name: "greet", Meta: meta, ExecHash: exe, Size: 18}
			if sign {
				spec.Sig = alice.sign(b, signing.Tool("greet", meta, exe))
			}
			body := PublishTools{Owner: "n1", Time: int64(i + 10), Tools: []ToolSpec{spec}}
			data := MustEncode(CmdPublishTools, body)
			b.StartTimer()
			h.index++
			r := h.fsm.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data})
			b.StopTimer()
			if err, _ := r.(error); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("apply-unsigned", func(b *testing.B) {
		h := newHarness(b, nil)
		b.StopTimer()
		publish(b, h, false)
	})
	b.Run("apply-signed", func(b *testing.B) {
		h := newHarness(b, nil)
		h.ok(CmdAddKey, AddKey{Name: "alice", Key: alice.line, Time: 1})
		b.StopTimer()
		publish(b, h, true)
	})
	h := newHarness(b, nil)
	h.ok(CmdAddKey, AddKey{Name: "alice", Key: alice.line, Time: 1})
	meta := metaOf("hi")
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Time: 2, Tools: []ToolSpec{{Name: "greet", Meta: meta, ExecHash: exe, Sig: alice.sign(b, signing.Tool("greet", meta, exe))}}})
	tl, _ := h.fsm.Tool("greet")
	b.Run("first-check", func(b *testing.B) {
		for range b.N {
			if err := trustError(tl, h.fsm.st.trustedKeys()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached-check", func(b *testing.B) {
		for range b.N {
			if err := h.fsm.TrustError(tl); err != nil {
				b.Fatal(err)
			}
		}
	})
}
