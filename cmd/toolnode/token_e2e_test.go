//go:build linux

// The end-to-end tests of 9P tokens and roles (DESIGN §7): real node
// processes, the independent 9fans client presenting tokens as attach
// names, and `toolnode token` making and revoking them.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// adminToken polls until the member has written DATA/admin.token and
// returns the secret.
func (n *cnode) adminToken(t *testing.T) string {
	t.Helper()
	path := filepath.Join(n.e.data, "admin.token")
	var secret string
	pollUntil(t, 60*time.Second, n.name+"'s admin token", func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		st, _ := os.Stat(path)
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", path, st.Mode().Perm())
		}
		secret = strings.TrimSpace(string(b))
		return true, ""
	})
	return secret
}

// tokenCLI runs `toolnode token` against member n with its data dir.
func tokenCLI(t *testing.T, n *cnode, args ...string) string {
	t.Helper()
	return runCLI(t, n.e, "", append([]string{"token", "-a", n.e.p9, "-data", n.e.data}, args...)...)
}

// tell9 writes one command to a write-only file.
func tell9(fsys *client.Fsys, path, cmd string) error {
	fid, err := fsys.Open(path, plan9.OWRITE)
	if err != nil {
		return err
	}
	defer fid.Close()
	_, err = fid.Write([]byte(cmd))
	return err
}

func create9(fsys *client.Fsys, path, text string) error {
	fid, err := fsys.Create(path, plan9.OWRITE, 0o644)
	if err != nil {
		return err
	}
	if _, err := fid.Write([]byte(text)); err != nil {
		fid.Close()
		return err
	}
	return fid.Close()
}

// e2eOps are operations of every class of DESIGN §7 with the role each
// needs; s is a name unique to the client that runs them.
var e2eOps = []struct {
	name string
	need string
	do   func(fs *client.Fsys, s string) error
}{
	{"read t/idx", "read", func(fs *client.Fsys, _ string) error { _, err := readErr(fs, "t/idx"); return err }},
	{"read t/hello.meta", "read", func(fs *client.Fsys, _ string) error { _, err := readErr(fs, "t/hello.meta"); return err }},
	{"read node", "read", func(fs *client.Fsys, _ string) error { _, err := readErr(fs, "node"); return err }},
	{"read cluster/members", "read", func(fs *client.Fsys, _ string) error { _, err := readErr(fs, "cluster/members"); return err }},
	{"ask tools", "read", func(fs *client.Fsys, _ string) error { _, err := ask(fs, "tools", "hello"); return err }},
	{"ask cluster/where", "read", func(fs *client.Fsys, _ string) error { _, err := ask(fs, "cluster/where", "hello"); return err }},
	{"session/new", "call", func(fs *client.Fsys, s string) error { _, err := ask(fs, "session/new", "name="+s); return err }},
	{"agent/new", "call", func(fs *client.Fsys, s string) error {
		_, err := ask(fs, "session/"+s+"/agent/new", "name=a")
		return err
	}},
	{"load", "call", func(fs *client.Fsys, s string) error {
		_, err := ask(fs, "session/"+s+"/agent/a/tools", "hello")
		return err
	}},
	{"call", "call", func(fs *client.Fsys, s string) error {
		out, err := ask(fs, "session/"+s+"/agent/a/call", "hello {}")
		if err == nil && out != "hello\n" {
			return fmt.Errorf("call answered %q", out)
		}
		return err
	}},
	{"session ls", "call", func(fs *client.Fsys, _ string) error { _, err := readErr(fs, "session/idx"); return err }},
	{"create t/S.meta", "publish", func(fs *client.Fsys, s string) error {
		return create9(fs, "t/"+s+".meta", `{"description":"published by a test","cmd":"echo hi"}`)
	}},
	{"rm t/S.meta", "publish", func(fs *client.Fsys, s string) error {
		err := fs.Remove("t/" + s + ".meta")
		if err != nil && !strings.Contains(err.Error(), "permission denied") {
			// A refused create left nothing to remove: remove what is
			// there, to see the refusal.
			err = fs.Remove("t/hello.meta")
		}
		return err
	}},
	{"read token/idx", "admin", func(fs *client.Fsys, _ string) error { _, err := readErr(fs, "token/idx"); return err }},
	{"token/new", "admin", func(fs *client.Fsys, s string) error {
		_, err := ask(fs, "token/new", "name=made-"+s+" role=read")
		return err
	}},
	{"token/ctl", "admin", func(fs *client.Fsys, s string) error { return tell9(fs, "token/ctl", "revoke made-"+s) }},
}

var roleOrder = map[string]int{"read": 1, "call": 2, "publish": 3, "admin": 4}

// Every role against every class of operation, on a node that takes no
// attach without a token (-9p-anon none, on loopback).
func TestE2E_TokenRoles(t *testing.T) {
	t.Parallel()
	n := newCnode(t, "roles")
	n.addTool(t, "hello", "Say hello.")
	n.launch(t)
	admin := n.adminToken(t)

	// No token: refused, by default (-9p-anon none), saying why.
	pollUntil(t, 60*time.Second, "the node to serve its tree", func() (bool, string) {
		s, err := func() (string, error) {
			c, err := dial9as(n.e.p9, admin, 5*time.Second)
			if err != nil {
				return "", err
			}
			defer c.close()
			return c.read("t/idx", 5*time.Second)
		}()
		return err == nil && strings.Contains(s, "hello"), fmt.Sprint(s, err)
	})
	if _, err := dial9as(n.e.p9, "", 5*time.Second); err == nil || !strings.Contains(err.Error(), "permission denied: an attach without a token is refused") {
		t.Fatalf("an attach without a token by default: %v, want permission denied", err)
	}
	for _, bad := range []string{"tn_not-a-token", "garbage"} {
		if _, err := dial9as(n.e.p9, bad, 5*time.Second); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("an attach with %q: %v, want permission denied", bad, err)
		}
	}
	n.p.waitLog(t, 5*time.Second, "attach refused", "permission denied")

	secrets := map[string]string{}
	for _, role := range []string{"read", "call", "publish", "admin"} {
		out := tokenCLI(t, n, "new", "-role", role, "t-"+role)
		secrets[role] = strings.TrimSpace(out)
		if !strings.HasPrefix(secrets[role], "tn_") {
			t.Fatalf("token new printed %q", out)
		}
	}
	ls := tokenCLI(t, n, "ls")
	for _, want := range []string{"admin-roles admin", "t-read read", "t-call call", "t-publish publish", "t-admin admin"} {
		if !strings.Contains(ls, want+"\n") {
			t.Errorf("token ls does not list %q:\n%s", want, ls)
		}
	}
	if strings.Contains(ls, "tn_") {
		t.Fatalf("token ls shows a secret:\n%s", ls)
	}

	for _, role := range []string{"read", "call", "publish", "admin"} {
		c, err := dial9as(n.e.p9, secrets[role], 5*time.Second)
		if err != nil {
			t.Fatalf("attach as %s: %v", role, err)
		}
		c.nc.SetDeadline(time.Now().Add(60 * time.Second))
		for _, op := range e2eOps {
			err := op.do(c.fsys, "s"+role)
			if roleOrder[role] >= roleOrder[op.need] {
				if err != nil {
					t.Errorf("%s as %s: %v", op.name, role, err)
				}
				continue
			}
			want := "permission denied: needs role " + op.need
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s as %s: error %v, want %q", op.name, role, err, want)
			}
		}
		c.close()
	}
	// What was refused changed nothing: hello is still published.
	c, _ := dial9as(n.e.p9, admin, 5*time.Second)
	defer c.close()
	if s, err := c.read("t/idx", 5*time.Second); err != nil || !strings.Contains(s, "hello") {
		t.Fatalf("t/idx after the refusals: %q %v", s, err)
	}
}

// A token made on one node works on another; revoked on the first, it is
// refused on the second within 1 s, and the second ends the connection
// attached with it. A node that joined holds no admin token of its own.
func TestE2E_TokenRevocation(t *testing.T) {
	t.Parallel()
	a := newCnode(t, "ta")
	b := newCnode(t, "tb").joining(a)
	c := newCnode(t, "tc").joining(a)
	a.start(t)
	b.launch(t)
	c.launch(t)
	waitFormed(t, 60*time.Second, a, b, c)
	a.adminToken(t)

	// A node that joined writes no admin token, and refuses an attach
	// without one.
	if _, err := os.Stat(filepath.Join(b.e.data, "admin.token")); err == nil {
		t.Fatal("tb, which joined, wrote an admin token")
	}
	if _, err := dial9as(b.e.p9, "", 5*time.Second); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("an attach without a token on tb: %v, want permission denied", err)
	}

	secret := strings.TrimSpace(tokenCLI(t, a, "new", "-role", "call", "ci"))
	var held *conn9
	pollUntil(t, 5*time.Second, "the token made on ta to work on tb", func() (bool, string) {
		c, err := dial9as(b.e.p9, secret, 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		held = c
		return true, ""
	})
	defer held.close()
	if _, err := held.ask("session/new", "name=revokeme", 10*time.Second); err != nil {
		t.Fatalf("the call token on tb: %v", err)
	}

	tokenCLI(t, a, "revoke", "ci")
	revoked := time.Now()
	took := pollUntil(t, 5*time.Second, "tb to refuse the revoked token", func() (bool, string) {
		c, err := dial9as(b.e.p9, secret, 5*time.Second)
		if err == nil {
			c.close()
			return false, "attach still accepted"
		}
		return strings.Contains(err.Error(), "permission denied"), err.Error()
	})
	t.Logf("tb refused the revoked token %v after the revocation", took)
	if took > time.Second {
		t.Errorf("tb refused the revoked token %v after the revocation, want within 1s", took)
	}
	pollUntil(t, 5*time.Second, "tb to end the revoked token's connection", func() (bool, string) {
		_, err := held.read("node", 2*time.Second)
		return err != nil, "the connection still reads"
	})
	if d := time.Since(revoked); d > 2*time.Second {
		t.Errorf("tb ended the revoked token's connection %v after the revocation", d)
	}
	// The held connection at least; an attach of the poll above that was
	// accepted just before the revocation may not be closed yet.
	b.p.waitLog(t, 5*time.Second, "token ci revoked: ended ")
	// Every node refuses it, within a second of the revocation.
	for _, n := range []*cnode{a, c} {
		pollUntil(t, time.Until(revoked.Add(time.Second)), n.name+" to refuse the revoked token", func() (bool, string) {
			c, err := dial9as(n.e.p9, secret, 5*time.Second)
			if err == nil {
				c.close()
				return false, "attach still accepted"
			}
			return strings.Contains(err.Error(), "permission denied"), err.Error()
		})
	}
}
