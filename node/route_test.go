package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/registry"
)

// startHost runs a node whose host "has" the binaries named (for variant
// matching), with its own tools directory.
func startHost(t testing.TB, name, root string, binaries []string, join ...string) *Node {
	t.Helper()
	return startHostWith(t, name, root, binaries, nil, join...)
}

// startHostWith is startHost with a change to the node's Config.
func startHostWith(t testing.TB, name, root string, binaries []string, mod func(*Config), join ...string) *Node {
	t.Helper()
	host := registry.LocalHost()
	has := map[string]bool{}
	for _, b := range binaries {
		has[b] = true
	}
	host.LookPath = func(b string) (string, error) {
		if has[b] {
			return "/usr/bin/" + b, nil
		}
		return "", errors.New("not found")
	}
	tools := filepath.Join(root, name+"-tools")
	os.MkdirAll(tools, 0o755)
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       name, DataDir: filepath.Join(root, name), ToolsDir: tools,
		GossipAddr: "127.0.0.1:0", Join: join, Host: &host,
		P9Listener: listen(t), ClusterListener: listen(t),
		Debounce: 20 * time.Millisecond, LogOutput: testWriter{t},
	}
	if mod != nil {
		mod(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func write9p(t testing.TB, fsys *client.Fsys, path string, data []byte, perm plan9.Perm) {
	t.Helper()
	fid, err := fsys.Create(path, plan9.OWRITE, perm)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	for off := 0; off < len(data); {
		k, err := fid.WriteAt(data[off:], int64(off))
		if err != nil {
			fid.Close()
			t.Fatalf("write %s: %v", path, err)
		}
		off += k
	}
	if err := fid.Close(); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
}

func TestRoute_CallsRunWhereTheyCan(t *testing.T) {
	root := t.TempDir()
	n1 := startHost(t, "n1", root, nil)
	n2 := startHost(t, "n2", root, []string{"frob"}, n1.gossip.LocalAddr())
	n3 := startHost(t, "n3", root, []string{"frob"}, n1.gossip.LocalAddr())
	waitFor(t, "three voters", 10*time.Second, func() bool { return len(voters(n1)) == 3 })

	// Published from n1's directory: "where" runs everywhere, "frobbing"
	// only where frob is installed (n2 and n3), with the variant's text.
	writeTool(t, n1.cfg.ToolsDir, "where", `{"description":"who runs me","cmd":"echo $TOOLNODE_NODE"}`, "")
	writeTool(t, n1.cfg.ToolsDir, "frobbing", `{"description":"generic","variants":[{"match":{"binary":"frob"},"description":"with frob","prompt":"Frobs on a host with frob.","cmd":"echo frobbed on $TOOLNODE_NODE"}]}`, "")
	f1 := mount(t, n1.P9Addr())
	waitFor(t, "frobbing known on n1 to be runnable on n2 and n3", 5*time.Second, func() bool {
		out, err := ask(f1, "cluster/where", "frobbing")
		return err == nil && out == "n2\nn3\n"
	})
	if idx := readFile(t, f1, "t/idx"); strings.Contains(idx, "frobbing") {
		t.Fatalf("n1 lists frobbing, which it cannot run:\n%s", idx)
	}
	mustAsk(t, f1, "session/new", "name=s")
	mustAsk(t, f1, "session/s/agent/new", "name=a")
	mustAsk(t, f1, "session/s/agent/a/tools", "where\nfrobbing")
	if pre := readFile(t, f1, "session/s/agent/a/preamble"); !strings.Contains(pre, "Frobs on a host with frob.") {
		t.Fatalf("the preamble does not use the runner's variant:\n%s", pre)
	}
	if out := mustAsk(t, f1, "session/s/agent/a/call", "where"); out != "n1\n" {
		t.Fatalf("a tool every host can run ran on %q, not here", out)
	}
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		out := mustAsk(t, f1, "session/s/agent/a/call", "frobbing {}")
		seen[out] = true
	}
	if !seen["frobbed on n2\n"] || !seen["frobbed on n3\n"] || len(seen) != 2 {
		t.Fatalf("routed calls ran on %v; want both n2 and n3", seen)
	}
	if all := mustAsk(t, f1, "session/s/agent/a/ctl", "tools_all"); !strings.Contains(all, "frobbing\twith frob\tn2,n3\n") {
		t.Fatalf("tools_all:\n%s", all)
	}

	// A capable host gone: calls go to the other; both gone: a clear error.
	n2.Close()
	for i := 0; i < 4; i++ {
		if out := mustAsk(t, f1, "session/s/agent/a/call", "frobbing"); out != "frobbed on n3\n" {
			t.Fatalf("after n2 left, the call ran: %q", out)
		}
	}
	n3.Close()
	waitFor(t, "no capable node", 10*time.Second, func() bool {
		_, err := ask(f1, "session/s/agent/a/call", "frobbing")
		return err != nil && strings.Contains(err.Error(), "no live node can run tool")
	})
}

func TestRoute_PublishThrough9P(t *testing.T) {
	root := t.TempDir()
	n1 := startHost(t, "n1", root, nil)
	n2 := startHost(t, "n2", root, nil, n1.gossip.LocalAddr())
	waitFor(t, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	f2 := mountPublisher(t, n2, n1, n2)

	// Executable first, then metadata, as cp hello hello.meta does.
	script := []byte("#!/bin/sh\necho hello from $TOOLNODE_NODE\n")
	write9p(t, f2, "t/hello", script, 0o755)
	if _, err := f2.Open("t/hello.meta", plan9.OREAD); err == nil {
		t.Fatal("a tool with no metadata yet has a .meta")
	}
	write9p(t, f2, "t/hello.meta", []byte(`{"description":"says hello"}`), 0o644)
	// Invalid metadata is refused and changes nothing.
	fid, err := f2.Open("t/hello.meta", plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write([]byte(`{"description": 5}`)); err == nil {
		t.Fatal("invalid metadata was accepted")
	}
	fid.Close()

	f1 := mount(t, n1.P9Addr())
	waitFor(t, "hello on n1", 5*time.Second, func() bool { return strings.Contains(readFile(t, f1, "t/idx"), "hello\tsays hello") })
	if got := readFile(t, f1, "t/hello"); got != string(script) {
		t.Fatalf("t/hello on n1 = %q", got)
	}
	if doc := mustAsk(t, f1, "tools", "hello"); !strings.Contains(doc, "Published by n2, through 9P.") {
		t.Fatalf("tools doc:\n%s", doc)
	}
	// The publisher is gone; the tool still runs on n1, from its copy.
	n2.Close()
	mustAsk(t, f1, "session/new", "name=s")
	mustAsk(t, f1, "session/s/agent/new", "name=a")
	mustAsk(t, f1, "session/s/agent/a/tools", "hello")
	if out := mustAsk(t, f1, "session/s/agent/a/call", "hello"); out != "hello from n1\n" {
		t.Fatalf("call after the publisher left = %q", out)
	}
	// rm withdraws it.
	if err := f1.Remove("t/hello.meta"); err != nil {
		t.Fatal(err)
	}
	if idx := readFile(t, f1, "t/idx"); strings.Contains(idx, "hello") {
		t.Fatalf("hello still listed after rm:\n%s", idx)
	}
}

// The node running a call dies mid-call: the call fails at once with an
// error saying so, and the next call goes to the other capable node.
func TestRoute_RunnerDiesMidCall(t *testing.T) {
	root := t.TempDir()
	n1 := startHost(t, "n1", root, nil)
	n2 := startHost(t, "n2", root, []string{"frob"}, n1.gossip.LocalAddr())
	n3 := startHost(t, "n3", root, []string{"frob"}, n1.gossip.LocalAddr())
	waitFor(t, "three voters", 10*time.Second, func() bool { return len(voters(n1)) == 3 })
	writeTool(t, n1.cfg.ToolsDir, "slow", `{"description":"slow","variants":[{"match":{"binary":"frob"},"cmd":"if [ -n \"$SLOW\" ]; then :; fi; read -r a; case \"$a\" in *wait*) sleep 30;; esac; echo done on $TOOLNODE_NODE"}]}`, "")
	f1 := mount(t, n1.P9Addr())
	waitFor(t, "slow runnable on n2 and n3", 5*time.Second, func() bool {
		out, err := ask(f1, "cluster/where", "slow")
		return err == nil && out == "n2\nn3\n"
	})
	mustAsk(t, f1, "session/new", "name=s")
	mustAsk(t, f1, "session/s/agent/new", "name=a")
	mustAsk(t, f1, "session/s/agent/a/tools", "slow")

	errc := make(chan error, 1)
	go func() {
		_, err := ask(f1, "session/s/agent/a/call", `slow {"wait":1}`)
		errc <- err
	}()
	// Whichever node runs it, stop it once the tool is running there.
	var runner *Node
	waitFor(t, "the call to start on n2 or n3", 10*time.Second, func() bool {
		for _, n := range []*Node{n2, n3} {
			if entries, _ := os.ReadDir(n.scratchDir()); len(entries) > 0 {
				runner = n
				return true
			}
		}
		return false
	})
	start := time.Now()
	runner.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a call whose runner stopped succeeded")
		}
		t.Logf("runner %s stopped mid-call; the call failed after %s: %v", runner.Name(), time.Since(start).Round(time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Fatal("the call hung after its runner stopped")
	}
	other := n2
	if runner == n2 {
		other = n3
	}
	if out := mustAsk(t, f1, "session/s/agent/a/call", "slow"); out != "done on "+other.Name()+"\n" {
		t.Fatalf("the next call = %q, want it on %s", out, other.Name())
	}
}

// cluster/members counts what each node can run from the capabilities it
// gossips; node meta does not carry the count, so publishing a tool makes
// no alive message on any node (every node passes each on several times).
func TestMembers_ToolsFromCapabilities(t *testing.T) {
	root := t.TempDir()
	n1 := startHost(t, "n1", root, nil)
	startHost(t, "n2", root, []string{"frob"}, n1.gossip.LocalAddr())
	writeTool(t, n1.cfg.ToolsDir, "where", `{"description":"who runs me","cmd":"echo $TOOLNODE_NODE"}`, "")
	writeTool(t, n1.cfg.ToolsDir, "frobbing", `{"description":"generic","variants":[{"match":{"binary":"frob"},"description":"with frob","cmd":"echo frobbed"}]}`, "")
	f1 := mount(t, n1.P9Addr())
	waitFor(t, "n1 to list n1 with 1 tool and n2 with 2", 10*time.Second, func() bool {
		m := readFile(t, f1, "cluster/members")
		return strings.Contains(m, " alive leader 1\n") && strings.Contains(m, " voter 2\n")
	})
	for _, m := range n1.gossip.Members() {
		if m.Meta.Tools != 0 {
			t.Errorf("%s advertises %d tools in its meta; the capabilities say it", m.Name, m.Meta.Tools)
		}
	}
}

// A tool no live node can run says why in the terms of its kind.
func TestNoCapableNode(t *testing.T) {
	if err := noCapableNode("gh__search"); !strings.Contains(err.Error(), "no live host runs MCP server gh") {
		t.Errorf("an upstream tool: %v", err)
	}
	if err := noCapableNode("greet"); !strings.Contains(err.Error(), "no live host matches its variants") {
		t.Errorf("a tool: %v", err)
	}
}
