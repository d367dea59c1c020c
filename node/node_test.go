package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/internal/testcluster"
	"github.com/toolnode/toolnode/registry"
)

type testNode struct {
	*Node
	cfg Config
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startNode runs a node on loopback port-0 listeners with the sandbox on.
func startNode(t testing.TB, data, tools, agents string) *testNode {
	t.Helper()
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       "n1", DataDir: data, ToolsDir: tools, AgentsDir: agents,
		GossipAddr:      "127.0.0.1:0",
		P9Listener:      listen(t),
		ClusterListener: listen(t),
		Debounce:        20 * time.Millisecond,
		LogOutput:       testWriter{t},
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return &testNode{Node: n, cfg: cfg}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	// A node stopping after its test ended may still log; testing panics
	// on that, and the line is of no use then.
	defer func() { recover() }()
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func mount(t testing.TB, addr string) *client.Fsys {
	t.Helper()
	fsys, err := client.Mount("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func readFile(t testing.TB, fsys *client.Fsys, path string) string {
	t.Helper()
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer fid.Close()
	b, err := io.ReadAll(fid)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// ask writes a request to an answer file and reads the answer on the same fid.
func ask(fsys *client.Fsys, path, req string) (string, error) {
	return testcluster.Ask(fsys, path, req)
}

func mustAsk(t testing.TB, fsys *client.Fsys, path, req string) string {
	t.Helper()
	return testcluster.MustAsk(t, fsys, path, req)
}

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testcluster.Eventually(t, d, cond, "waiting for %s", what)
}

func writeTool(t testing.TB, dir, name, meta, script string) {
	t.Helper()
	if script != "" {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNode_PublishWatchCallRestart(t *testing.T) {
	root := t.TempDir()
	data, tools, agents := filepath.Join(root, "data"), filepath.Join(root, "tools"), filepath.Join(root, "agents")
	os.MkdirAll(tools, 0o755)
	os.MkdirAll(agents, 0o755)
	writeTool(t, tools, "greet", `{"description":"say hello","prompt":"Greets NAME.","args":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}}`,
		"#!/bin/sh\nread -r line\necho \"hello $line from $TOOLNODE_NODE as $OLLIE_SESSION_ID/$OLLIE_AGENT\"\n")
	writeTool(t, tools, "hidden", `{"description":"never here","variants":[{"match":{"binary":"no-such-binary-anywhere"}}]}`, "")
	os.WriteFile(filepath.Join(agents, "helper.json"), []byte(`{"autoLoad":["greet"]}`), 0o644)

	n := startNode(t, data, tools, agents)
	fsys := mount(t, n.P9Addr())
	if got := readFile(t, fsys, "t/idx"); got != "greet\tsay hello\n" {
		t.Fatalf("t/idx = %q", got)
	}

	// Watching: a new tool shows up, an invalid edit keeps the valid one,
	// a removal withdraws it.
	writeTool(t, tools, "later", `{"description":"added later"}`, "")
	waitFor(t, "later in t/idx", time.Second, func() bool { return strings.Contains(readFile(t, fsys, "t/idx"), "later\tadded later") })
	os.WriteFile(filepath.Join(tools, "later.meta"), []byte(`{"description": 42}`), 0o644)
	writeTool(t, tools, "marker", `{"description":"marker"}`, "")
	waitFor(t, "marker in t/idx", time.Second, func() bool { return strings.Contains(readFile(t, fsys, "t/idx"), "marker") })
	if !strings.Contains(readFile(t, fsys, "t/idx"), "later\tadded later") {
		t.Fatal("an invalid edit replaced the valid tool")
	}
	os.Remove(filepath.Join(tools, "later.meta"))
	waitFor(t, "later withdrawn", time.Second, func() bool { return !strings.Contains(readFile(t, fsys, "t/idx"), "later") })

	// Sessions and agents.
	work := filepath.Join(root, "work") // cwd rules: not around the node's own directories
	os.MkdirAll(work, 0o755)
	if got := mustAsk(t, fsys, "session/new", "name=dev agent=helper cwd="+work); got != "dev\n" {
		t.Fatalf("session/new answered %q", got)
	}
	if got := readFile(t, fsys, "session/dev/agent/helper/toolsrv.loaded"); got != "greet\n" {
		t.Fatalf("autoLoad: loaded = %q", got)
	}
	out := mustAsk(t, fsys, "session/dev/agent/helper/call", `greet {"name":"x"}`)
	if out != "hello {\"name\":\"x\"} from n1 as dev/helper\n" {
		t.Fatalf("call output %q", out)
	}
	if _, err := ask(fsys, "session/dev/agent/helper/call", `greet {"name":1}`); err == nil {
		t.Fatal("arguments violating the schema were accepted")
	}
	if _, err := ask(fsys, "session/dev/agent/helper/call", `marker {}`); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("calling an unloaded tool: %v", err)
	}
	mustAsk(t, fsys, "session/dev/agent/helper/call", `tool_load {"name":"marker"}`)
	if rev := readFile(t, fsys, "session/dev/agent/helper/toolsrv.rev"); rev != "2\n" {
		t.Fatalf("rev = %q", rev)
	}
	if _, err := ask(fsys, "session/dev/agent/helper/ctl", "tool_load nosuch"); err == nil || !strings.Contains(err.Error(), "no tool \"nosuch\"") {
		t.Fatalf("loading an unknown tool: %v", err)
	}
	pre := readFile(t, fsys, "session/dev/agent/helper/preamble")
	if !strings.Contains(pre, "greet: say hello") || !strings.Contains(pre, "## greet\n\nGreets NAME.") {
		t.Fatalf("preamble:\n%s", pre)
	}

	// Restart on the same data directory: everything is still there.
	n.Close()
	n2 := startNode(t, data, tools, agents)
	fsys2 := mount(t, n2.P9Addr())
	if got := readFile(t, fsys2, "session/dev/agent/helper/toolsrv.loaded"); got != "greet\nmarker\n" {
		t.Fatalf("after restart loaded = %q", got)
	}
	if rev := readFile(t, fsys2, "session/dev/agent/helper/toolsrv.rev"); rev != "2\n" {
		t.Fatalf("after restart rev = %q", rev)
	}
	if got := readFile(t, fsys2, "t/idx"); got != "greet\tsay hello\nmarker\tmarker\n" {
		t.Fatalf("after restart t/idx = %q", got)
	}
}

// A binary installed after start makes a hidden tool visible at the next
// periodic re-resolve, without any change to its metadata.
func TestNode_PeriodicReresolve(t *testing.T) {
	root := t.TempDir()
	tools := filepath.Join(root, "tools")
	os.MkdirAll(tools, 0o755)
	writeTool(t, tools, "needs_frob", `{"description":"generic","variants":[{"match":{"binary":"frob"},"description":"with frob"}]}`, "")
	var mu sync.Mutex
	installed := false
	host := registry.LocalHost()
	host.LookPath = func(name string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if name == "frob" && installed {
			return "/usr/bin/frob", nil
		}
		return "", errors.New("not found")
	}
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       "n1", DataDir: filepath.Join(root, "data"), ToolsDir: tools,
		GossipAddr: "127.0.0.1:0", P9Listener: listen(t), ClusterListener: listen(t),
		ResolveEvery: 50 * time.Millisecond, Host: &host, LogOutput: testWriter{t},
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fsys := mount(t, n.P9Addr())
	if got := readFile(t, fsys, "t/idx"); got != "" {
		t.Fatalf("t/idx before frob = %q", got)
	}
	mu.Lock()
	installed = true
	mu.Unlock()
	waitFor(t, "needs_frob to appear", 2*time.Second, func() bool {
		return readFile(t, fsys, "t/idx") == "needs_frob\twith frob\n"
	})
}

// State survives a restart from a snapshot plus the log after it.
func TestNode_RestartFromSnapshot(t *testing.T) {
	root := t.TempDir()
	data, tools := filepath.Join(root, "data"), filepath.Join(root, "tools")
	os.MkdirAll(tools, 0o755)
	for i := 0; i < 50; i++ {
		writeTool(t, tools, fmt.Sprintf("t%02d", i), fmt.Sprintf(`{"description":"tool %d"}`, i), "#!/bin/sh\ncat\n")
	}
	n := startNode(t, data, tools, "")
	fsys := mount(t, n.P9Addr())
	mustAsk(t, fsys, "session/new", "name=s")
	mustAsk(t, fsys, "session/s/agent/new", "name=a")
	mustAsk(t, fsys, "session/s/agent/a/tools", "t01\nt02")
	if err := n.raftNode().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	mustAsk(t, fsys, "session/s/agent/a/ctl", "tool_unload t01")
	mustAsk(t, fsys, "session/s/agent/a/ctl", "tool_load t03")
	idx := readFile(t, fsys, "t/idx")
	n.Close()

	n2 := startNode(t, data, tools, "")
	fsys2 := mount(t, n2.P9Addr())
	if got := readFile(t, fsys2, "session/s/agent/a/toolsrv.loaded"); got != "t02\nt03\n" {
		t.Fatalf("loaded after restart = %q", got)
	}
	if got := readFile(t, fsys2, "session/s/agent/a/toolsrv.rev"); got != "4\n" {
		t.Fatalf("rev after restart = %q", got)
	}
	if got := readFile(t, fsys2, "t/idx"); got != idx {
		t.Fatalf("t/idx after restart differs:\n%s\nwant\n%s", got, idx)
	}
	if got := readFile(t, fsys2, "t/t07"); got != "#!/bin/sh\ncat\n" {
		t.Fatalf("published executable after restart = %q", got)
	}
}

// A -join that nothing answers does not stop the node: it serves alone,
// tries again, and joins once a member answers at the address.
func TestNode_JoinRetried(t *testing.T) {
	dead := listen(t)
	addr := dead.Addr().String()
	dead.Close() // nothing answers there yet
	n1, err := New(Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       "n1", DataDir: t.TempDir(), GossipAddr: "127.0.0.1:0", Join: []string{addr},
		P9Listener: listen(t), ClusterListener: listen(t), LogOutput: testWriter{t},
	})
	if err != nil {
		t.Fatalf("New with an unreachable -join = %v, want a node that tries again", err)
	}
	defer n1.Close()
	n0, err := New(Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       "n0", DataDir: t.TempDir(), GossipAddr: addr,
		P9Listener: listen(t), ClusterListener: listen(t), LogOutput: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n0.Close()
	waitFor(t, "n1 to join n0 by its retried -join", 15*time.Second, func() bool {
		return len(n1.gossip.Members()) == 2 && len(n0.gossip.Members()) == 2
	})
}

// A restarted lone node applies the log it found before it compares its
// tools directory with that state: it publishes only what changed while
// it was down (here one tool of 1,100), in a catalog complete when New
// returns, and proposes nothing for the rest.
func TestNode_RestartPublishesOnlyChanges(t *testing.T) {
	root := t.TempDir()
	data, tools := filepath.Join(root, "data"), filepath.Join(root, "tools")
	os.MkdirAll(tools, 0o755)
	const count = 1100 // three batches of publishBatch, proposed together
	for i := range count {
		script := ""
		if i%100 == 0 {
			script = fmt.Sprintf("#!/bin/sh\necho %d\n", i)
		}
		writeTool(t, tools, fmt.Sprintf("t%04d", i), fmt.Sprintf(`{"description":"tool %d"}`, i), script)
	}
	n := startNode(t, data, tools, "")
	if got := n.catalog.Count(); got != count {
		t.Fatalf("first start: %d tools in the catalog, want %d", got, count)
	}
	before := map[string]uint64{}
	for _, tl := range n.fsm.Tools() {
		before[tl.Name] = tl.Index
	}
	n.Close()

	writeTool(t, tools, "t0007", `{"description":"changed while down"}`, "")
	n2 := startNode(t, data, tools, "")
	if got := n2.catalog.Count(); got != count {
		t.Fatalf("after restart: %d tools in the catalog, want %d", got, count)
	}
	if e, ok := n2.catalog.Get("t0007"); !ok || e.Resolved.Description != "changed while down" {
		t.Fatalf("the tool changed while the node was down is not current when New returns: %+v", e)
	}
	republished := 0
	for _, tl := range n2.fsm.Tools() {
		if tl.Index != before[tl.Name] {
			republished++
			if tl.Name != "t0007" {
				t.Errorf("%s was proposed again at index %d (was %d) though it did not change", tl.Name, tl.Index, before[tl.Name])
			}
		}
	}
	if republished != 1 {
		t.Fatalf("%d tools proposed again, want 1 (t0007)", republished)
	}
	fsys := mount(t, n2.P9Addr())
	if got := readFile(t, fsys, "t/t0100"); got != "#!/bin/sh\necho 100\n" {
		t.Fatalf("t/t0100 after restart = %q", got)
	}
}

// trustedAnon is the -9p-anon of the nodes these tests start: each
// stands for a host that runs only trusted tools (-9p-anon admin on
// loopback), so a test of another feature attaches without a token.
// tokens_test.go and the end-to-end tests cover the default, none.
const trustedAnon = "admin"

// testClusterKey is the gossip key of the nodes these tests start: a
// cluster of several needs one (DESIGN §7 "Ports"); secret_test.go
// covers a node given none.
var testClusterKey = []byte("toolnode-node-tests-gossip-key-!")
