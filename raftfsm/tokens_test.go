package raftfsm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/toolnode/toolnode/acl"
)

func TestTokens(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, rec)
	_, hash, err := acl.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	h.ok(CmdPutToken, PutToken{Name: "ci", Role: "publish", Hash: hash, By: "anon@127.0.0.1:1", Time: 5})
	tok, ok := h.fsm.TokenByHash(hash)
	if !ok || tok.Name != "ci" || tok.Role != "publish" || tok.Index != 1 || tok.Created != 5 {
		t.Fatalf("TokenByHash: %+v %v", tok, ok)
	}
	// A name or secret taken, a bad role, name or hash: refused, nothing changes.
	_, hash2, _ := acl.NewSecret()
	h.fail(CmdPutToken, PutToken{Name: "ci", Role: "read", Hash: hash2}, ErrExists)
	h.fail(CmdPutToken, PutToken{Name: "other", Role: "read", Hash: hash}, ErrExists)
	h.fail(CmdPutToken, PutToken{Name: "x", Role: "root", Hash: hash2}, ErrInvalid)
	h.fail(CmdPutToken, PutToken{Name: "anon@x", Role: "read", Hash: hash2}, ErrInvalid)
	h.fail(CmdPutToken, PutToken{Name: "x", Role: "read", Hash: "secret"}, ErrInvalid)
	if len(h.fsm.Tokens()) != 1 {
		t.Fatalf("refused commands changed the tokens: %v", h.fsm.Tokens())
	}
	for _, body := range [][]byte{MustEncode(CmdPutToken, PutToken{Name: "x", Role: "read", Hash: "h"}), []byte("\x0e{"), MustEncode(CmdRevokeToken, RevokeToken{Name: ""})} {
		v := validatePutToken
		if CommandType(body[0]) == CmdRevokeToken {
			v = validateRevokeToken
		}
		if err := v(body[1:], Limits{}); err == nil {
			t.Errorf("validator accepted %q", body)
		}
	}
	if err := validatePutToken(MustEncode(CmdPutToken, PutToken{Name: "x", Role: "read", Hash: hash2})[1:], Limits{}); err != nil {
		t.Errorf("validatePutToken refused a good command: %v", err)
	}

	// The snapshot keeps tokens, and the hash index is rebuilt on restore.
	h.ok(CmdPutToken, PutToken{Name: "admin-n1", Role: "admin", Hash: hash2})
	snap := snapshotBytes(t, h.fsm)
	if bytes.Contains(snap, []byte("tn_")) {
		t.Fatal("the snapshot holds a secret")
	}
	f2 := New(nil)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if tok, ok := f2.TokenByHash(hash2); !ok || tok.Role != "admin" {
		t.Fatalf("restored TokenByHash: %+v %v", tok, ok)
	}

	h.ok(CmdRevokeToken, RevokeToken{Name: "ci"})
	h.fail(CmdRevokeToken, RevokeToken{Name: "ci"}, ErrNotFound)
	if _, ok := h.fsm.TokenByHash(hash); ok {
		t.Fatal("a revoked token's hash still finds it")
	}
	if _, ok := h.fsm.Token("ci"); ok {
		t.Fatal("a revoked token is still listed")
	}
	var kinds []string
	for _, e := range rec.events {
		kinds = append(kinds, e.Kind+" "+e.Name)
	}
	if got := strings.Join(kinds, ","); got != "token+ ci,token+ admin-n1,token- ci" {
		t.Fatalf("events: %s", got)
	}
}
