//go:build linux

// The end-to-end test of virtual servers (DESIGN §9): tokens and
// profiles limited by tools, on two real nodes, the limited call routed
// from one to the other; each refusal beside its control (the same load
// or call with an unlimited token or profile).

package main

import (
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
)

// tlMount attaches to the node at addr with secret.
func tlMount(t *testing.T, addr, secret string) *client.Fsys {
	t.Helper()
	c, err := client.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	fsys, err := c.Attach(nil, "e2e", secret)
	if err != nil {
		c.Close()
		t.Fatalf("attach %s: %v", addr, err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func TestE2E_ToolsAllowList(t *testing.T) {
	t.Parallel()
	tools := rtRouteTools(t)
	nodes := rtCluster(t,
		rtSpec{name: "alpha", tools: map[string]rtFile{"only_b.meta": tools["only_b.meta"], "everywhere.meta": tools["everywhere.meta"]}},
		rtSpec{name: "bravo", env: []string{"SITE_B=1"}},
	)
	a, b := nodes[0], nodes[1]
	fa := attach9(t, a.e.p9)
	rtWaitWhere(t, fa, "only_b", "bravo")
	rtWaitWhere(t, fa, "everywhere", "alpha", "bravo")

	// A token limited by tools, made with the CLI; its control, without.
	limSecret := strings.TrimSpace(runCLI(t, a.e, "", "token", "-a", a.e.p9, "-data", a.e.data, "new", "-role", "call", "-tools", "only_*", "lim"))
	openSecret := strings.TrimSpace(mustAsk(t, fa, "token/new", "name=open role=call"))
	if idx := cat(t, fa, "token/idx"); !strings.Contains(idx, "lim call only_*\n") || !strings.Contains(idx, "open call\n") {
		t.Fatalf("token/idx:\n%s", idx)
	}
	askFails(t, fa, "token/new", "name=bad role=call tools=[", "invalid")

	lim, open := tlMount(t, a.e.p9, limSecret), tlMount(t, a.e.p9, openSecret)
	cwd := rtShared(a)
	t.Run("token", func(t *testing.T) {
		agent := rtAgent(t, lim, cwd, "lim1", "only_b")
		askFails(t, lim, agent+"tools", "everywhere", "permission denied: tool everywhere is not allowed here")
		askFails(t, lim, agent+"ctl", "tool_load everywhere", "permission denied: tool everywhere is not allowed here")
		askFails(t, lim, agent+"call", `tool_load {"name":"everywhere"}`, "permission denied: tool everywhere is not allowed here")
		rtMustCall(t, lim, agent, "only_b", "ran on bravo\n", "alpha, routed")
		all := mustAsk(t, lim, agent+"ctl", "tools_all")
		if !strings.HasPrefix(all, "only_b\t") || strings.Contains(all, "everywhere") {
			t.Errorf("tools_all with the limited token:\n%s", all)
		}
		askFails(t, lim, "token/new", "name=x role=read", "permission denied")
		// Control: the unlimited token loads and calls it.
		agentO := rtAgent(t, open, cwd, "open1", "only_b", "everywhere")
		rtMustCall(t, open, agentO, "everywhere", "alpha\n", "alpha")
		if all := mustAsk(t, open, agentO+"ctl", "tools_all"); !strings.Contains(all, "everywhere\t") {
			t.Errorf("tools_all with the open token:\n%s", all)
		}
		// A call is checked too: an admin token limited by tools may use
		// any session, but calls there only what its list allows; the
		// control: the cluster's admin token calls it.
		limAdm := tlMount(t, a.e.p9, strings.TrimSpace(mustAsk(t, fa, "token/new", "name=limadm role=admin tools=only_b")))
		askFails(t, limAdm, agentO+"call", "everywhere", "permission denied: tool everywhere is not allowed here")
		rtMustCall(t, limAdm, agentO, "only_b", "ran on bravo\n", "alpha, routed")
		rtMustCall(t, fa, agentO, "everywhere", "alpha\n", "alpha")
	})

	t.Run("profile", func(t *testing.T) {
		profile := rtJSON(t, map[string]any{"autoLoad": []string{"only_b", "everywhere"}, "tools": []string{"only_b"}})
		if err := rtPut(fa, "a/narrow.json", 0o644, profile); err != nil {
			t.Fatal(err)
		}
		if err := rtPut(fa, "a/wide.json", 0o644, rtJSON(t, map[string]any{"autoLoad": []string{"only_b", "everywhere"}})); err != nil {
			t.Fatal(err)
		}
		mustAsk(t, open, "session/new", "name=prof cwd="+cwd)
		if got := mustAsk(t, open, "session/prof/agent/new", "name=n profile=narrow"); got != "n\n" {
			t.Fatalf("agent/new = %q", got)
		}
		if got := cat(t, open, "session/prof/agent/n/tools"); got != "only_b\n" {
			t.Errorf("narrow autoloaded %q, want only_b", got)
		}
		askFails(t, open, "session/prof/agent/n/tools", "everywhere", "permission denied: tool everywhere is not allowed here")
		rtMustCall(t, open, "session/prof/agent/n/", "only_b", "ran on bravo\n", "alpha, routed")
		if all := mustAsk(t, open, "session/prof/agent/n/ctl", "tools_all"); strings.Contains(all, "everywhere") {
			t.Errorf("tools_all of the narrow agent:\n%s", all)
		}
		// Control: the wide profile loads both.
		mustAsk(t, open, "session/prof/agent/new", "name=w profile=wide")
		if got := cat(t, open, "session/prof/agent/w/tools"); got != "only_b\neverywhere\n" {
			t.Errorf("wide autoloaded %q", got)
		}
		rtMustCall(t, open, "session/prof/agent/w/", "everywhere", "alpha\n", "alpha")
		// The limited token's agent from the wide profile autoloads only
		// what the token allows.
		mustAsk(t, lim, "session/new", "name=limprof cwd="+cwd)
		mustAsk(t, lim, "session/limprof/agent/new", "name=w profile=wide")
		if got := cat(t, lim, "session/limprof/agent/w/tools"); got != "only_b\n" {
			t.Errorf("the limited token's agent from wide autoloaded %q, want only_b", got)
		}
	})

	// The token's list is replicated and outlives a restart of the node
	// that holds it as a replica.
	t.Run("restart", func(t *testing.T) {
		rtKill(t, b)
		rtLaunch(t, b, a.e.gossip)
		rtWaitUp(t, b)
		fb := attach9(t, b.e.p9)
		rtPoll(t, 30*time.Second, "bravo's token/idx names lim's tools", func() (bool, string) {
			idx, err := readErr(fb, "token/idx")
			return err == nil && strings.Contains(idx, "lim call only_*\n"), idx
		})
		limB := tlMount(t, b.e.p9, limSecret)
		agent := rtAgent(t, limB, rtShared(b), "lim2", "only_b")
		askFails(t, limB, agent+"tools", "everywhere", "permission denied: tool everywhere is not allowed here")
		rtMustCall(t, limB, agent, "only_b", "ran on bravo\n", "bravo")
	})
}
