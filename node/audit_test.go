package node

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type auditEntry struct {
	Node, Who, Via, Action, Target, Result string
}

func auditEntries(t testing.TB, path string) []auditEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// A call routed to another node is recorded on both: where it entered,
// with the connection's principal; where it ran, with that principal
// carried along and via the node it came from.
func TestAudit_RoutedCall(t *testing.T) {
	root := t.TempDir()
	withAudit := func(name string) func(*Config) {
		return func(c *Config) { c.AuditFile = filepath.Join(root, name+".audit") }
	}
	n1 := startHostWith(t, "n1", root, nil, withAudit("n1"))
	n2 := startHostWith(t, "n2", root, []string{"frob"}, withAudit("n2"), n1.gossip.LocalAddr())
	waitFor(t, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	writeTool(t, n1.cfg.ToolsDir, "frobbing", `{"description":"generic","variants":[{"match":{"binary":"frob"},"cmd":"echo frobbed on $TOOLNODE_NODE"}]}`, "")
	f1 := mount(t, n1.P9Addr())
	waitFor(t, "frobbing runnable on n2", 5*time.Second, func() bool {
		out, err := ask(f1, "cluster/where", "frobbing")
		return err == nil && out == "n2\n"
	})
	mustAsk(t, f1, "session/new", "name=s")
	mustAsk(t, f1, "session/s/agent/new", "name=a")
	mustAsk(t, f1, "session/s/agent/a/tools", "frobbing")
	if out := mustAsk(t, f1, "session/s/agent/a/call", "frobbing"); out != "frobbed on n2\n" {
		t.Fatalf("the call ran: %q", out)
	}
	n2.Close()
	n1.Close()

	var who string
	for _, e := range auditEntries(t, filepath.Join(root, "n1.audit")) {
		if e.Action == "call" && e.Target == "s/a/frobbing" {
			who = e.Who
			if e.Result != "ok" || e.Via != "" || e.Node != "n1" {
				t.Fatalf("n1's record of the call: %+v", e)
			}
		}
	}
	if who != "anon@127.0.0.1" {
		t.Fatalf("n1 did not record the call with its principal (%q)", who)
	}
	found := false
	for _, e := range auditEntries(t, filepath.Join(root, "n2.audit")) {
		if e.Action == "call" {
			found = true
			if e.Target != "s/a/frobbing" || e.Who != who || e.Via != "n1" || e.Node != "n2" || e.Result != "ok" {
				t.Fatalf("n2's record of the routed call: %+v, want who %q via n1", e, who)
			}
		}
		if e.Who == who && e.Action != "call" && e.Via == "" {
			// (With via: a write n1 forwarded, were n2 the leader.)
			t.Fatalf("n2 recorded a 9P action it did not serve: %+v", e)
		}
	}
	if !found {
		t.Fatal("n2 did not record the call it ran")
	}
}
