package fwdauth

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// state is a real FSM holding tokens alice (call), pub (publish), root
// (admin) and gone (revoked), and sessions made by alice, by gone, by
// anon@10.0.0.9 and by no one.
func state(t testing.TB) (*raftfsm.FSM, map[string]string) {
	t.Helper()
	f := raftfsm.New(nil)
	secrets := map[string]string{}
	index := uint64(0)
	apply := func(ct raftfsm.CommandType, body any) {
		t.Helper()
		index++
		if r := f.Apply(&raft.Log{Index: index, Data: raftfsm.MustEncode(ct, body)}); r != nil {
			if err, ok := r.(error); ok {
				t.Fatalf("%s: %v", ct, err)
			}
		}
	}
	for name, role := range map[string]string{"alice": "call", "pub": "publish", "root": "admin", "gone": "call"} {
		secret, hash, err := acl.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = secret
		apply(raftfsm.CmdPutToken, raftfsm.PutToken{Name: name, Role: role, Hash: hash, Time: 1})
	}
	for name, owner := range map[string]string{"sa": "alice", "sg": "gone", "sx": "anon@10.0.0.9", "s0": ""} {
		apply(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: name, Owner: owner, Time: 1})
	}
	apply(raftfsm.CmdRevokeToken, raftfsm.RevokeToken{Name: "gone"})
	return f, secrets
}

func TestResolve(t *testing.T) {
	f, secrets := state(t)
	for _, tc := range []struct {
		what              string
		token, anon, node string
		want              Principal
		refused           string
	}{
		{"a token", secrets["alice"], "", "n2", Principal{Name: "alice", Kind: Token, Role: p9.RoleCall, Via: "n2"}, ""},
		{"a token beside a claimed anon", secrets["root"], "anon@1.2.3.4", "n2", Principal{Name: "root", Kind: Token, Role: p9.RoleAdmin, Via: "n2"}, ""},
		{"a revoked token", secrets["gone"], "", "n2", Principal{}, "unknown or revoked token"},
		{"a forged token", "tn_forged", "", "n2", Principal{}, "unknown or revoked token"},
		{"anon", "", "anon@10.0.0.9", "n2", Principal{Name: "anon@10.0.0.9", Kind: Anon, Role: p9.RoleCall, Via: "n2"}, ""},
		{"a token's name claimed without its token", "", "root", "n2", Principal{}, "not an anonymous principal"},
		{"anon with a space", "", "anon@1.2.3.4 root", "n2", Principal{}, "not an anonymous principal"},
		{"the node", "", "", "n2", Principal{Name: "node:n2", Kind: Node, Role: p9.RolePublish, Via: "n2"}, ""},
		{"no node", secrets["root"], "", "", Principal{}, "must name the node"},
		{"a node with a newline", "", "", "n2\nforged", Principal{}, "must name the node"},
	} {
		p, err := Resolve(f, tc.token, tc.anon, tc.node)
		switch {
		case tc.refused == "" && (err != nil || !reflect.DeepEqual(p, tc.want)):
			t.Errorf("%s: %+v, %v; want %+v", tc.what, p, err, tc.want)
		case tc.refused != "" && (!errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %+v, %v; want a refusal naming %q", tc.what, p, err, tc.refused)
		}
	}
}

func TestCheck(t *testing.T) {
	f, _ := state(t)
	alice := Principal{Name: "alice", Kind: Token, Role: p9.RoleCall, Via: "n2"}
	pub := Principal{Name: "pub", Kind: Token, Role: p9.RolePublish, Via: "n2"}
	root := Principal{Name: "root", Kind: Token, Role: p9.RoleAdmin, Via: "n2"}
	anon := Principal{Name: "anon@10.0.0.9", Kind: Anon, Role: p9.RoleCall, Via: "n2"}
	node := Principal{Name: "node:n2", Kind: Node, Role: p9.RolePublish, Via: "n2"}
	enc := raftfsm.MustEncode
	putToken := enc(raftfsm.CmdPutToken, raftfsm.PutToken{Name: "x", Role: "admin", Hash: strings.Repeat("a", 64), Time: 1})
	revoke := enc(raftfsm.CmdRevokeToken, raftfsm.RevokeToken{Name: "root"})
	ownTools := enc(raftfsm.CmdPublishTools, raftfsm.PublishTools{Owner: "n2", Origin: raftfsm.OriginDir, Time: 1})
	othersTools := enc(raftfsm.CmdPublishTools, raftfsm.PublishTools{Owner: "n1", Origin: raftfsm.OriginDir, Time: 1})
	withdrawAny := enc(raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{Names: []string{"t"}})
	ownProfiles := enc(raftfsm.CmdWithdrawProfiles, raftfsm.WithdrawProfiles{Owner: "n2", Origin: raftfsm.OriginDir, Names: []string{"p"}})
	meta := enc(raftfsm.CmdPutToolMeta, raftfsm.PutToolMeta{Owner: "n2", Origin: raftfsm.Origin9P, Name: "t", Time: 1})
	sessionFor := func(owner string) []byte {
		return enc(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: "new", Owner: owner, Time: 1})
	}
	kill := func(s string) []byte { return enc(raftfsm.CmdKillSession, raftfsm.KillSession{Name: s}) }
	load := func(s string) []byte {
		return enc(raftfsm.CmdLoad, raftfsm.Load{Session: s, Agent: "a", Names: []string{"t"}})
	}
	wrapped, err := raftfsm.Request("id1", putToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what    string
		p       Principal
		cmd     []byte
		refused string // "": allowed
	}{
		{"admin makes a token", root, putToken, ""},
		{"admin makes a token, as a request", root, wrapped, ""},
		{"call makes a token", alice, putToken, "needs role admin"},
		{"call makes a token, as a request", alice, wrapped, "needs role admin"},
		{"publish revokes a token", pub, revoke, "needs role admin"},
		{"anon makes a token", anon, putToken, "needs role admin"},
		{"anon publishes", anon, meta, "needs role publish"},
		{"call publishes", alice, meta, "needs role publish"},
		{"publish publishes", pub, meta, ""},
		{"call makes its own session", alice, sessionFor("alice"), ""},
		{"call makes a session for another", alice, sessionFor("root"), "must be its own"},
		{"anon makes its own session", anon, sessionFor("anon@10.0.0.9"), ""},
		{"anon makes a session for no one", anon, sessionFor(""), "must be its own"},
		{"admin makes a session for another", root, sessionFor("alice"), ""},
		{"call kills its own session", alice, kill("sa"), ""},
		{"call kills another's session", alice, kill("sx"), "made by another principal"},
		{"anon loads in alice's session", anon, load("sa"), "made by another principal"},
		{"anon loads in its own session", anon, load("sx"), ""},
		{"call loads in an ownerless session", alice, load("s0"), ""},
		{"admin loads in alice's session", root, load("sa"), ""},
		{"the node publishes its own directory", node, ownTools, ""},
		{"the node withdraws its own profiles", node, ownProfiles, ""},
		{"the node publishes as another node", node, othersTools, "only as the owner"},
		{"the node withdraws anyone's tools", node, withdrawAny, "only as the owner"},
		{"the node publishes through t/", node, meta, "not put-tool-meta"},
		{"the node makes a token", node, putToken, "not put-token"},
		{"the node revokes a token", node, revoke, "not revoke-token"},
		{"the node makes a session", node, sessionFor(""), "not create-session"},
		{"the node loads", node, load("s0"), "not load"},
		{"the node kills a revoked token's session", node, kill("sg"), ""},
		{"the node kills a live token's session", node, kill("sa"), "only the sessions of a revoked token"},
		{"the node kills an anonymous session", node, kill("sx"), "only the sessions of a revoked token"},
		{"the node kills an ownerless session", node, kill("s0"), "only the sessions of a revoked token"},
	} {
		err := Check(f, tc.p, tc.cmd)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.what, err)
		case tc.refused != "" && (!errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v; want a refusal naming %q", tc.what, err, tc.refused)
		}
	}
	if err := Check(f, root, []byte{99, '{', '}'}); !errors.Is(err, raftfsm.ErrInvalid) {
		t.Errorf("an unknown command: %v, want invalid", err)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		cmd            []byte
		action, target string
	}{
		{raftfsm.MustEncode(raftfsm.CmdLoad, raftfsm.Load{Session: "s", Agent: "a", Names: []string{"x", "y"}}), "load", "s/a/x,y"},
		{raftfsm.MustEncode(raftfsm.CmdPutToken, raftfsm.PutToken{Name: "ci", Role: "publish"}), "put-token", "ci role=publish"},
		{raftfsm.MustEncode(raftfsm.CmdPublishTools, raftfsm.PublishTools{Tools: []raftfsm.ToolSpec{{Name: "a"}, {Name: "b"}}}), "publish-tools", "a,b"},
		{raftfsm.MustEncode(raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: "s", Name: "a"}), "create-agent", "s/a"},
	} {
		if a, tg := Describe(tc.cmd); a != tc.action || tg != tc.target {
			t.Errorf("Describe: %q %q, want %q %q", a, tg, tc.action, tc.target)
		}
	}
}

// BenchmarkAuthorize measures the leader's added work per forwarded
// write: the token resolved (a SHA-256 and a map look-up) and the
// command checked (its body decoded once more), for a load in the
// caller's session and for a directory batch of 100 tools of 4 KiB of
// metadata each.
func BenchmarkAuthorize(b *testing.B) {
	f, secrets := state(b)
	load := raftfsm.MustEncode(raftfsm.CmdLoad, raftfsm.Load{Session: "sa", Agent: "a", Names: []string{"t"}})
	batch := raftfsm.PublishTools{Owner: "n2", Origin: raftfsm.OriginDir, Time: 1}
	for i := range 100 {
		batch.Tools = append(batch.Tools, raftfsm.ToolSpec{Name: "tool" + string(rune('a'+i%26)), Meta: []byte(`{"description":"` + strings.Repeat("x", 4096) + `"}`)})
	}
	tools := raftfsm.MustEncode(raftfsm.CmdPublishTools, batch)
	for _, bc := range []struct {
		name        string
		token, node string
		cmd         []byte
	}{{"load", secrets["alice"], "n2", load}, {"publish-100-tools", "", "n2", tools}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.cmd)))
			for b.Loop() {
				p, err := Resolve(f, bc.token, "", bc.node)
				if err == nil {
					err = Check(f, p, bc.cmd)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A change to trust/ needs admin, and must name the principal it is
// made for; a node may make none for itself.
func TestCheck_Trust(t *testing.T) {
	f, _ := state(t)
	root := Principal{Name: "root", Kind: Token, Role: p9.RoleAdmin, Via: "n2"}
	pub := Principal{Name: "pub", Kind: Token, Role: p9.RolePublish, Via: "n2"}
	node := Principal{Name: "node:n2", Kind: Node, Role: p9.RolePublish, Via: "n2"}
	add := func(by string) []byte {
		return raftfsm.MustEncode(raftfsm.CmdAddKey, raftfsm.AddKey{Name: "k", Key: "ssh-ed25519 AAAA", By: by, Time: 1})
	}
	rm := raftfsm.MustEncode(raftfsm.CmdRemoveKey, raftfsm.RemoveKey{Name: "k", By: "root", Time: 1})
	for _, tc := range []struct {
		what    string
		p       Principal
		entry   []byte
		refused string
	}{
		{"admin adds a key", root, add("root"), ""},
		{"admin removes a key", root, rm, ""},
		{"admin naming another", root, add("pub"), "must name it"},
		{"publish adds a key", pub, add("pub"), "needs role admin"},
		{"a node adds a key", node, add(""), "permission denied"},
	} {
		err := Check(f, tc.p, tc.entry)
		if (err == nil) != (tc.refused == "") || err != nil && !strings.Contains(err.Error(), tc.refused) {
			t.Errorf("%s: %v, want %q", tc.what, err, tc.refused)
		}
	}
	if a, tg := Describe(add("root")); a != "add-key" || tg != "k" {
		t.Errorf("Describe(add-key) = %q %q", a, tg)
	}
}

// A token limited by tools loads only what its list allows and manages no
// tokens, whatever its role; the control: the same principal without the
// list may do both.
func TestCheckToolsLimit(t *testing.T) {
	f, _ := state(t)
	_, hash, _ := acl.NewSecret()
	f.Apply(&raft.Log{Index: 100, Data: raftfsm.MustEncode(raftfsm.CmdPutToken, raftfsm.PutToken{Name: "lim", Role: "admin", Hash: hash, Tools: []string{"echo", "search_*"}, Time: 1})})
	enc := raftfsm.MustEncode
	load := func(names ...string) []byte {
		return enc(raftfsm.CmdLoad, raftfsm.Load{Session: "s0", Agent: "a", Names: names})
	}
	putToken := enc(raftfsm.CmdPutToken, raftfsm.PutToken{Name: "x", Role: "read", Hash: strings.Repeat("b", 64), Time: 1})
	revoke := enc(raftfsm.CmdRevokeToken, raftfsm.RevokeToken{Name: "root"})
	tok, ok := f.Token("lim")
	if !ok || len(tok.Tools) != 2 {
		t.Fatalf("token lim: %+v", tok)
	}
	lim := Principal{Name: "lim", Kind: Token, Role: p9.RoleAdmin, Via: "n2", Tools: tok.Tools}
	open := lim
	open.Tools = nil
	for _, tc := range []struct {
		what    string
		p       Principal
		cmd     []byte
		refused string
	}{
		{"limited loads an allowed tool", lim, load("echo", "search_x"), ""},
		{"limited loads another", lim, load("echo", "file_write"), "tool file_write is not allowed here"},
		{"limited makes a token", lim, putToken, "manages no tokens"},
		{"limited revokes a token", lim, revoke, "manages no tokens"},
		{"control: unlimited loads it", open, load("file_write"), ""},
		{"limited makes a session without its list", lim, enc(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: "n", Owner: "lim", Time: 1}), "must carry its tools"},
		{"limited makes an agent with another list", lim, enc(raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: "s0", Limit: []string{"*"}}), "must carry its tools"},
		{"limited makes an agent with its list", lim, enc(raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: "s0", Limit: tok.Tools}), ""},
		{"control: unlimited makes a token", open, putToken, ""},
	} {
		err := Check(f, tc.p, tc.cmd)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: %v", tc.what, err)
		case tc.refused != "" && (!errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v; want a refusal naming %q", tc.what, err, tc.refused)
		}
	}
	// Resolve gives the token's list.
	p, err := Resolve(f, "", "", "n2")
	if err != nil || p.Tools != nil {
		t.Errorf("the node: %+v %v", p, err)
	}
}
