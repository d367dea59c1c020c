package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/fwdauth"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// Principals across the cluster port (DESIGN §7): every write a node
// forwards is authorized by the leader against the principal it is for.
// Each attack below is a forwarded write a member can send with its
// credential alone; each control applies the same request on a leader
// without the authorization (servedUnchecked, the leader before it),
// where it succeeds.

// servedUnchecked is the leader's handling of a forwarded write with the
// authorization left out: validated and proposed, as every forwarded
// write but a token change was before. Test code only: the controls.
func servedUnchecked(t *testing.T, l *Node, cmd []byte) {
	t.Helper()
	if err := l.validate(cmd, "the control"); err != nil {
		t.Fatalf("control: %v", err)
	}
	if _, _, err := l.propose(cmd, 5*time.Second); err != nil {
		t.Fatalf("control: the unchecked leader did not apply %s: %v", raftfsm.TypeOf(cmd), err)
	}
}

// tokenBackend is n's backend for the token secret, as a 9P attach with
// it as the attach name binds it.
func tokenBackend(t *testing.T, n *Node, secret string) auditBackend {
	t.Helper()
	var p p9.Principal
	waitFor(t, n.Name()+" to know the token", 10*time.Second, func() bool {
		var err error
		p, err = n.attach(secret, nil)
		return err == nil
	})
	return n.bind(p).(auditBackend)
}

// newTestToken makes a token on n and returns its secret.
func newTestToken(t *testing.T, n *Node, name string, role p9.Role) string {
	t.Helper()
	s, err := n.NewToken(p9.Principal{Name: "test"}, name, role, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitAudit waits until path holds an entry that match accepts (the log
// flushes within 200 ms) and returns it.
func waitAudit(t *testing.T, path, what string, match func(auditEntry) bool) auditEntry {
	t.Helper()
	var got auditEntry
	waitFor(t, "the audit line of "+what, 10*time.Second, func() bool {
		if _, err := os.Stat(path); err != nil {
			return false
		}
		for _, e := range auditEntries(t, path) {
			if match(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

func TestPrincipals_ForwardedWritesAuthorized(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	c := newInmemClusterWith(t, 0, func(cfg *Config) {
		cfg.AuditFile = filepath.Join(root, cfg.Name+".audit")
		cfg.ToolsDir = filepath.Join(root, cfg.Name+"-tools")
		cfg.Debounce = 20 * time.Millisecond
		os.MkdirAll(cfg.ToolsDir, 0o755)
	}, "n1", "n2")
	all := c.up()
	l := c.waitLeader(all...)
	f := c.node(others(all, l.Name())[0])
	la, _ := f.raftNode().LeaderWithID()
	leaderAddr, leaderAudit := string(la), filepath.Join(root, l.Name()+".audit")
	waitAdminTokens(t, c)
	alice := newTestToken(t, l, "alice", p9.RoleCall)
	bob := newTestToken(t, l, "bob", p9.RoleCall)
	pub := newTestToken(t, l, "pub", p9.RolePublish)
	admin := newTestToken(t, l, "root", p9.RoleAdmin)

	// A token's writes through the follower: applied, and audited on the
	// leader under the token's name via the follower.
	if _, err := tokenBackend(t, f, alice).NewSession("name=sa"); err != nil {
		t.Fatalf("alice's session through %s: %v", f.Name(), err)
	}
	e := waitAudit(t, leaderAudit, "alice's session", func(e auditEntry) bool { return e.Action == "create-session" && e.Target == "sa" })
	if e.Who != "alice" || e.Via != f.Name() || e.Node != l.Name() || e.Result != "ok" {
		t.Fatalf("the leader's record of alice's forwarded session: %+v, want alice via %s", e, f.Name())
	}
	// The node's own directory, published as node:NAME.
	writeTool(t, f.cfg.ToolsDir, "mine", `{"description":"f's own"}`, "")
	waitFor(t, "f's own tool on the leader", 10*time.Second, func() bool {
		tool, ok := l.fsm.Tool("mine")
		return ok && tool.Published() && tool.Owner == f.Name()
	})
	e = waitAudit(t, leaderAudit, "f's publication", func(e auditEntry) bool { return e.Action == "publish-tools" && e.Target == "mine" })
	if e.Who != "node:"+f.Name() || e.Via != f.Name() || e.Result != "ok" {
		t.Fatalf("the leader's record of %s's directory: %+v, want node:%s via %s", f.Name(), e, f.Name(), f.Name())
	}
	writeTool(t, l.cfg.ToolsDir, "theirs", `{"description":"the leader's own"}`, "")
	waitFor(t, "the leader's own tool", 10*time.Second, func() bool { _, ok := l.fsm.Tool("theirs"); return ok })

	enc := raftfsm.MustEncode
	putAdmin := func(name string) []byte {
		_, hash, _ := acl.NewSecret()
		return enc(raftfsm.CmdPutToken, raftfsm.PutToken{Name: name, Role: "admin", Hash: hash, By: "forger", Time: 1})
	}
	killSA := enc(raftfsm.CmdKillSession, raftfsm.KillSession{Name: "sa"})
	agentInSA := enc(raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: "sa", Name: "spy"})
	meta := enc(raftfsm.CmdPutToolMeta, raftfsm.PutToolMeta{Owner: f.Name(), Origin: raftfsm.Origin9P, Time: 1, Name: "planted", Meta: []byte(`{"description":"planted"}`)})
	withdrawTheirs := enc(raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{Names: []string{"theirs"}})
	asLeaderDir := enc(raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{Owner: l.Name(), Origin: raftfsm.OriginDir, Names: []string{"theirs"}})
	sessionForBob := enc(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: "framed", Owner: "bob", Time: 1})
	attacks := []struct {
		what   string
		as     caller
		cmd    []byte
		who    string // the principal the leader audits
		reason string
	}{
		{"a member with no caller mints an admin token", caller{}, putAdmin("forged1"), "node:" + f.Name(), "not put-token"},
		{"a call token mints an admin token", caller{who: "bob", token: bob}, putAdmin("forged2"), "bob", "needs role admin"},
		{"a publish token mints an admin token", caller{who: "pub", token: pub}, putAdmin("forged3"), "pub", "needs role admin"},
		{"an anonymous caller mints an admin token", caller{who: "anon@10.9.9.9"}, putAdmin("forged4"), "anon@10.9.9.9", "needs role admin"},
		{"a claimed admin name without its token", caller{who: "root"}, putAdmin("forged5"), "node:" + f.Name(), "not an anonymous principal"},
		{"a forged token", caller{who: "root", token: "tn_forged"}, putAdmin("forged6"), "token", "unknown or revoked token"},
		{"bob kills alice's session", caller{who: "bob", token: bob}, killSA, "bob", "made by another principal"},
		{"an anonymous caller adds an agent to alice's session", caller{who: "anon@10.9.9.9"}, agentInSA, "anon@10.9.9.9", "made by another principal"},
		{"the node kills alice's session", caller{}, killSA, "node:" + f.Name(), "only the sessions of a revoked token"},
		{"bob makes a session in another's name", caller{who: "alice", token: alice}, sessionForBob, "alice", "must be its own"},
		{"a call token publishes", caller{who: "alice", token: alice}, meta, "alice", "needs role publish"},
		{"an anonymous caller publishes", caller{who: "anon@10.9.9.9"}, meta, "anon@10.9.9.9", "needs role publish"},
		{"the node publishes through t/", caller{}, meta, "node:" + f.Name(), "not put-tool-meta"},
		{"the node withdraws another's tool", caller{}, withdrawTheirs, "node:" + f.Name(), "only as the owner"},
		{"the node withdraws as the leader's directory", caller{}, asLeaderDir, "node:" + f.Name(), "only as the owner"},
	}
	for _, a := range attacks {
		resp, err := f.forwardAs(leaderAddr, a.cmd, 5*time.Second, a.as)
		if err != nil {
			t.Fatalf("%s: %v", a.what, err)
		}
		if resp.Index != 0 || resp.Kind != "denied" || !strings.HasPrefix(resp.Err, "permission denied") || !strings.Contains(resp.Err, a.reason) {
			t.Errorf("%s: %+v, want permission denied naming %q", a.what, resp, a.reason)
		}
		action, target := fwdauth.Describe(a.cmd)
		e := waitAudit(t, leaderAudit, a.what, func(e auditEntry) bool {
			return e.Action == action && e.Target == target && e.Who == a.who && strings.HasPrefix(e.Result, "permission denied")
		})
		if e.Via != f.Name() && !strings.HasPrefix(a.reason, "unknown") {
			t.Errorf("%s: audited %+v, want via %s", a.what, e, f.Name())
		}
	}
	for _, name := range []string{"forged1", "forged2", "forged3", "forged4", "forged5", "forged6"} {
		if _, ok := l.fsm.Token(name); ok {
			t.Errorf("forwarded put-token %s was applied", name)
		}
	}
	if !l.fsm.HasSession("sa") || l.fsm.HasSession("framed") {
		t.Error("a refused forwarded write changed the sessions")
	}
	if _, err := l.fsm.Agent("sa", "spy"); err == nil {
		t.Error("a refused forwarded create-agent was applied")
	}
	if _, ok := l.fsm.Tool("planted"); ok {
		t.Error("a refused forwarded put-tool-meta was applied")
	}
	if tool, ok := l.fsm.Tool("theirs"); !ok || !tool.Published() {
		t.Error("a refused forwarded withdraw-tools was applied")
	}

	// A revoked token's writes are refused; the node may then remove its
	// sessions (an MCP session ends with its token).
	if _, err := tokenBackend(t, f, bob).NewSession("name=sb"); err != nil {
		t.Fatal(err)
	}
	if err := l.RevokeToken(p9.Principal{Name: "test"}, "bob"); err != nil {
		t.Fatal(err)
	}
	resp, err := f.forwardAs(leaderAddr, enc(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: "late", Owner: "bob", Time: 1}), 5*time.Second, caller{who: "bob", token: bob})
	if err != nil || resp.Index != 0 || !strings.Contains(resp.Err, "unknown or revoked token") {
		t.Errorf("a revoked token's forwarded write: %+v, %v", resp, err)
	}
	if err := f.KillSession("sb"); err != nil {
		t.Errorf("%s removing the session of revoked bob: %v", f.Name(), err)
	}

	// Controls: the roles that may, may, through the same path...
	for _, ok := range []struct {
		what string
		as   caller
		cmd  []byte
	}{
		{"admin makes a token", caller{who: "root", token: admin}, putAdmin("granted")},
		{"publish publishes", caller{who: "pub", token: pub}, meta},
		{"alice adds an agent to her session", caller{who: "alice", token: alice}, agentInSA},
	} {
		if resp, err := f.forwardAs(leaderAddr, ok.cmd, 5*time.Second, ok.as); err != nil || resp.Err != "" || resp.Index == 0 {
			t.Errorf("control: %s: %+v, %v", ok.what, resp, err)
		}
	}
	// ...and the attacks succeed on a leader without the authorization.
	servedUnchecked(t, l, putAdmin("forged-unchecked"))
	if _, ok := l.fsm.Token("forged-unchecked"); !ok {
		t.Error("control: the unchecked leader did not mint the token")
	}
	servedUnchecked(t, l, withdrawTheirs)
	if tool, ok := l.fsm.Tool("theirs"); ok && tool.Published() {
		t.Error("control: the unchecked leader did not withdraw the tool")
	}
	servedUnchecked(t, l, killSA)
	if l.fsm.HasSession("sa") {
		t.Error("control: the unchecked leader did not kill alice's session")
	}
}

// A token-less caller is forwarded as anon@IP via its node and gets the
// call role at most on the leader, whatever -9p-anon says on the node it
// attached to. The control: the same anonymous writes on the leader's
// own 9P, where its -9p-anon admin holds, succeed.
func TestPrincipals_AnonForwardedAtMostCall(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	c := newInmemClusterWith(t, 0, func(cfg *Config) {
		cfg.AuditFile = filepath.Join(root, cfg.Name+".audit")
	}, "n1", "n2")
	all := c.up()
	l := c.waitLeader(all...)
	f := c.node(others(all, l.Name())[0])
	waitAdminTokens(t, c)
	if f.anon != p9.RoleAdmin {
		t.Fatalf("the follower's -9p-anon is %s, want admin for this test", f.anon)
	}
	ff := mount(t, f.P9Addr())
	if got := mustAsk(t, ff, "session/new", "name=anon-s"); strings.TrimSpace(got) != "anon-s" {
		t.Fatalf("an anonymous session through %s: %q", f.Name(), got)
	}
	e := waitAudit(t, filepath.Join(root, l.Name()+".audit"), "the anonymous session", func(e auditEntry) bool {
		return e.Action == "create-session" && e.Target == "anon-s"
	})
	if e.Who != "anon@127.0.0.1" || e.Via != f.Name() || e.Result != "ok" {
		t.Fatalf("the leader's record of the anonymous session: %+v, want anon@127.0.0.1 via %s", e, f.Name())
	}
	if _, err := ask(ff, "token/new", "name=escalated role=admin"); err == nil || !strings.Contains(err.Error(), "needs role admin") || !strings.Contains(err.Error(), "anon@127.0.0.1 has call") {
		t.Errorf("an anonymous token/new through %s: %v, want needs role admin", f.Name(), err)
	}
	if _, ok := l.fsm.Token("escalated"); ok {
		t.Fatal("an anonymous caller of the follower minted an admin token")
	}
	fid, err := ff.Create("t/anontool.meta", 1, 0o644)
	if err == nil {
		_, err = fid.Write([]byte(`{"description":"x"}`))
		if cerr := fid.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil || !strings.Contains(err.Error(), "needs role publish") {
		t.Errorf("an anonymous publish through %s: %v, want needs role publish", f.Name(), err)
	}
	// Control: on the leader's own 9P the same anonymous role is admin.
	lf := mount(t, l.P9Addr())
	if secret := mustAsk(t, lf, "token/new", "name=escalated role=admin"); !acl.LooksLikeSecret(strings.TrimSpace(secret)) {
		t.Fatalf("control: anonymous token/new on the leader: %q", secret)
	}
}

// A raw cluster-port client with a member's credential (the gossip key)
// and none of its own: its forwarded writes are refused unless they carry
// a token whose role allows them, and a routed call it sends is a call
// only. The controls: the same raw requests with the admin's token are
// applied, and on a leader without the authorization the forgery is.
func TestPrincipals_RawMemberForward(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	n := startHostWith(t, "n1", root, nil, func(c *Config) { c.AuditFile = filepath.Join(root, "n1.audit") })
	waitFor(t, "n1 to lead", 10*time.Second, n.leading)
	waitFor(t, "n1's admin token", 10*time.Second, func() bool { _, err := os.Stat(n.adminTokenPath()); return err == nil })
	adminB, _ := os.ReadFile(n.adminTokenPath())
	admin := strings.TrimSpace(string(adminB))
	call := newTestToken(t, n, "caller", p9.RoleCall)
	owner := newTestToken(t, n, "owner", p9.RoleCall)
	ob := tokenBackend(t, n, owner)
	if _, err := ob.NewSession("name=s"); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.NewAgent("s", "name=a"); err != nil {
		t.Fatal(err)
	}

	ct := mustKeyTLS(t, testClusterKey, "intruder")
	addr := n.cfg.ClusterListener.Addr().String()
	conn := func(proto byte) *rawConn {
		c, err := ct.Dial(addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial with the member credential: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte{proto}); err != nil {
			t.Fatal(err)
		}
		return &rawConn{t: t, c: c}
	}
	fc := conn(clusterport.ProtoForward)
	putAdmin := func(name string) []byte {
		_, hash, _ := acl.NewSecret()
		return raftfsm.MustEncode(raftfsm.CmdPutToken, raftfsm.PutToken{Name: name, Role: "admin", Hash: hash, By: "intruder", Time: 1})
	}
	kill := raftfsm.MustEncode(raftfsm.CmdKillSession, raftfsm.KillSession{Name: "s"})
	for _, a := range []struct {
		what string
		req  fwdRequest
	}{
		{"no token", fwdRequest{Cmd: putAdmin("raw1"), Node: "intruder"}},
		{"no token, posing as n1", fwdRequest{Cmd: putAdmin("raw2"), Node: "n1"}},
		{"no forwarding node", fwdRequest{Cmd: putAdmin("raw3"), Token: admin}},
		{"a call token", fwdRequest{Cmd: putAdmin("raw4"), Token: call, Node: "intruder"}},
		{"a forged token", fwdRequest{Cmd: putAdmin("raw5"), Token: "tn_" + strings.Repeat("A", 43), Node: "intruder"}},
		{"a foreign caller's token on owner's session", fwdRequest{Cmd: kill, Token: call, Node: "intruder"}},
		{"anonymous on owner's session", fwdRequest{Cmd: kill, Anon: "anon@10.0.0.1", Node: "intruder"}},
	} {
		var resp fwdResponse
		fc.roundTrip(a.req, &resp, maxFwdResponse)
		if resp.Index != 0 || !strings.HasPrefix(resp.Err, "permission denied") {
			t.Errorf("a raw forwarded write with %s: %+v, want permission denied", a.what, resp)
		}
	}
	for _, name := range []string{"raw1", "raw2", "raw3", "raw4", "raw5"} {
		if _, ok := n.fsm.Token(name); ok {
			t.Errorf("the raw forged put-token %s was applied", name)
		}
	}
	if !n.fsm.HasSession("s") {
		t.Fatal("a raw forwarded kill-session was applied")
	}
	waitAudit(t, filepath.Join(root, "n1.audit"), "the refusal of the call token", func(e auditEntry) bool {
		return e.Who == "caller" && e.Via == "intruder" && e.Action == "kill-session" && strings.HasPrefix(e.Result, "permission denied")
	})

	// A routed call from the raw member: a built-in (a write) is refused;
	// a malformed principal is refused.
	cc := conn(clusterport.ProtoCall)
	args, _ := json.Marshal(map[string]string{"name": "anything"})
	for _, req := range []callRequest{
		{Session: "s", Agent: "a", Tool: builtinLoad, Args: args, From: "intruder", Who: "owner"},
		{Session: "s", Agent: "a", Tool: builtinAll, Args: []byte("{}"), From: "intruder", Who: "owner\nforged"},
	} {
		var resp callResponse
		cc.roundTrip(req, &resp, maxCallResponse)
		if !strings.HasPrefix(resp.Err, "permission denied") {
			t.Errorf("a raw routed call of %s as %q: %+v, want permission denied", req.Tool, req.Who, resp)
		}
	}

	// Controls: with the admin's token the raw request is applied, and a
	// leader without the authorization applies the forgery.
	var resp fwdResponse
	fc.roundTrip(fwdRequest{Cmd: putAdmin("raw-admin"), Token: admin, Node: "intruder"}, &resp, maxFwdResponse)
	if resp.Err != "" || resp.Index == 0 {
		t.Fatalf("control: a raw put-token with the admin token: %+v", resp)
	}
	servedUnchecked(t, n, putAdmin("raw-unchecked"))
	if _, ok := n.fsm.Token("raw-unchecked"); !ok {
		t.Fatal("control: the unchecked leader did not apply the raw forgery")
	}
}

// rawConn is a cluster-port connection spoken by hand.
type rawConn struct {
	t *testing.T
	c interface {
		Write([]byte) (int, error)
		Read([]byte) (int, error)
		SetDeadline(time.Time) error
	}
}

func (r *rawConn) roundTrip(req, resp any, limit uint32) {
	r.t.Helper()
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := clusterport.WriteMsg(r.c, req); err != nil {
		r.t.Fatal(err)
	}
	if err := clusterport.ReadMsg(r.c, resp, limit); err != nil {
		r.t.Fatalf("no answer: %v", err)
	}
}

// mountPublisher mounts n's 9P with a new publish token, made on the
// leader among nodes: a publication through a follower is forwarded
// with the token (an anonymous one gets the call role at most).
func mountPublisher(t *testing.T, n *Node, nodes ...*Node) *client.Fsys {
	t.Helper()
	var l *Node
	waitFor(t, "a leader", 10*time.Second, func() bool { l = leaderOf(nodes...); return l != nil })
	secret := newTestToken(t, l, "publisher-"+n.Name(), p9.RolePublish)
	var f *client.Fsys
	waitFor(t, n.Name()+" to take the publish token", 10*time.Second, func() bool {
		var err error
		f, err = mountAs(t, n.P9Addr(), secret)
		return err == nil
	})
	return f
}
