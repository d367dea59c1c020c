//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// session/idx and a listing of session/ name only the sessions the
// caller may use (DESIGN §7, sessions belong to their maker), read with
// the independent 9P client as two call-role tokens; the control is the
// admin, to whom every session is open, listing both.
func TestE2E_SessionIdx_ListsOnlyTheCallersSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(t)
	admin := waitToken(t, e.p9)
	token := func(name string) string {
		return strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", name))
	}
	as := func(name, secret string) *conn9 {
		c, err := dial9as(e.p9, secret, 5*time.Second)
		if err != nil {
			t.Fatalf("attach as %s: %v", name, err)
		}
		t.Cleanup(c.close)
		return c
	}
	alice, bob, root := as("alice", token("alice")), as("bob", token("bob")), as("admin", admin)
	for _, s := range []struct {
		c    *conn9
		name string
	}{{alice, "s-alice"}, {alice, "s-alice2"}, {bob, "s-bob"}} {
		if got, err := s.c.ask("session/new", "name="+s.name, 10*time.Second); err != nil || got != s.name+"\n" {
			t.Fatalf("session/new %s = %q, %v", s.name, got, err)
		}
	}
	sessions := func(c *conn9) (idx, ls []string) {
		t.Helper()
		text, err := c.read("session/idx", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		names, err := c.list("session", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if n != "idx" && n != "new" {
				ls = append(ls, n)
			}
		}
		idx = lines(text)
		slices.Sort(idx)
		slices.Sort(ls)
		return idx, ls
	}
	for _, tc := range []struct {
		who  string
		c    *conn9
		want []string
	}{
		{"alice", alice, []string{"s-alice", "s-alice2"}},
		{"bob", bob, []string{"s-bob"}},
		{"admin (control)", root, []string{"s-alice", "s-alice2", "s-bob"}},
	} {
		idx, ls := sessions(tc.c)
		if !slices.Equal(idx, tc.want) {
			t.Errorf("%s: session/idx = %q, want %q", tc.who, idx, tc.want)
		}
		if !slices.Equal(ls, tc.want) {
			t.Errorf("%s: ls session/ = %q, want %q", tc.who, ls, tc.want)
		}
	}
}
