package node

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// A member's credential alone mints no token: a put-token forwarded to
// the leader over the authenticated cluster port, as any member can send
// one, is refused unless it carries an admin's token, which the leader
// resolves; a call token is refused too. The control: the same write
// with the admin's token is applied, and an admin's token new through
// the follower (the real path) works.
func TestInMem_ForwardedTokenChangeNeedsAdmin(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2")
	all := c.up()
	l := c.waitLeader(all...)
	follower := c.node(others(all, l.Name())[0])
	leaderAddr, _ := follower.raftNode().LeaderWithID()
	waitAdminTokens(t, c)
	var admin string
	for _, name := range all {
		if b, err := os.ReadFile(c.node(name).adminTokenPath()); err == nil {
			admin = strings.TrimSpace(string(b))
		}
	}
	if admin == "" {
		t.Fatal("no node wrote the cluster's admin token")
	}
	callTok, err := l.NewToken(p9.Principal{Name: "test"}, "caller", p9.RoleCall, nil)
	if err != nil {
		t.Fatal(err)
	}
	putToken := func(name string) []byte {
		_, hash, _ := acl.NewSecret()
		return raftfsm.MustEncode(raftfsm.CmdPutToken, raftfsm.PutToken{Name: name, Role: "admin", Hash: hash, By: "forger", Time: 1})
	}
	for _, tc := range []struct{ what, token string }{{"no token", ""}, {"a call token", callTok}, {"an unknown token", "tn_forged"}} {
		resp, err := follower.forwardAs(string(leaderAddr), putToken("forged"), 5*time.Second, caller{token: tc.token})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Err == "" || !strings.Contains(resp.Err, "permission denied") || resp.Index != 0 {
			t.Errorf("a forwarded put-token with %s: %+v, want permission denied", tc.what, resp)
		}
	}
	if _, ok := l.fsm.Token("forged"); ok {
		t.Fatal("a forged forwarded put-token was applied")
	}
	// Controls.
	resp, err := follower.forwardAs(string(leaderAddr), putToken("granted"), 5*time.Second, caller{token: admin})
	if err != nil || resp.Err != "" || resp.Index == 0 {
		t.Fatalf("a forwarded put-token with the admin token: %+v, %v", resp, err)
	}
	by, err := follower.attach(admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := follower.NewToken(by, "through-follower", p9.RoleRead, nil); err != nil {
		t.Fatalf("token new as admin through the follower: %v", err)
	}
}
