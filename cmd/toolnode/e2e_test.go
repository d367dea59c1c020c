//go:build linux

// The end-to-end test: the real toolnode binary, run as a process on
// loopback with the sandbox on, driven over 9P by an independent client
// (9fans.net/go/plan9/client), through its own command-line client, and
// by raw bytes on its 9P port.

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/examples"
	"github.com/toolnode/toolnode/internal/testcluster"
	"github.com/toolnode/toolnode/internal/testport"
)

// binPath is the toolnode binary TestMain builds.
var binPath string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "toolnode-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "toolnode")
	args := []string{"build", "-o", binPath}
	if raceEnabled() {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building toolnode: %v\n", err)
		return 1
	}
	return m.Run()
}

// raceEnabled and goTool build the node under test as this test binary
// is built.
var (
	raceEnabled = testcluster.RaceEnabled
	goTool      = testcluster.GoTool
)

// ---- the node process

// syncBuffer collects a process's output; it is read while written.
type syncBuffer = testcluster.Buffer

// env is one node's directories and addresses; it survives restarts.
type env struct {
	root, data, tools, agents, config string
	cwd                               string // the test sessions' working directory
	p9, gossip, cluster               string
	tokenless                         bool // its clients attach without a token
}

// e2eWriteScript is a tool of the test's own: it writes "x" to the file
// named by its "path" argument, so the test can see where the sandbox
// lets a tool write. It parses its JSON with sed to need nothing else.
const e2eWriteScript = `#!/bin/sh
# e2e_write: write "x" to the file named by the "path" argument.
p=$(sed -n 's/.*"path" *: *"\([^"]*\)".*/\1/p')
[ -n "$p" ] || { echo "e2e_write: no path given" >&2; exit 2; }
echo x > "$p" || exit 1
echo "wrote $p"
`

const e2eWriteMeta = `{
  "description": "Test tool: write x to the file at path.",
  "prompt": "## e2e_write\n\nWrites x to path.",
  "args": {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}, "additionalProperties": false}
}
`

func newEnv(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	tools, agents, err := examples.Extract(filepath.Join(root, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{
		root: root, data: filepath.Join(root, "data"), tools: tools, agents: agents,
		config: filepath.Join(root, "config"), cwd: filepath.Join(root, "cwd"),
	}
	for _, d := range []string{e.config, e.cwd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tools, "e2e_write"), []byte(e2eWriteScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "e2e_write.meta"), []byte(e2eWriteMeta), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := testport.Pick(t, 3)
	e.p9, e.gossip, e.cluster = ports[0], ports[1], ports[2]
	return e
}

// childEnv is the environment of every process the test starts: no user
// env file (XDG_CONFIG_HOME is the test's), no inherited node address.
func (e *env) childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "XDG_CONFIG_HOME", "OLLIE_TOOLS_PATH", "TOOLNODE_ADDR", "TOOLNODE_TOKEN":
			continue
		}
		out = append(out, kv)
	}
	if _, ok := os.LookupEnv("GORACE"); !ok {
		// A race-enabled binary otherwise sleeps 1 s at exit.
		out = append(out, "GORACE=atexit_sleep_ms=0")
	}
	return append(out, "XDG_CONFIG_HOME="+e.config)
}

// clientEnv is the environment of a client the test runs as the node's
// own user: childEnv, with $XDG_DATA_HOME where the default data
// directory is the one holding the admin token (once it is written).
func (e *env) clientEnv(t *testing.T) []string {
	t.Helper()
	if e.p9 == "" {
		return e.childEnv()
	}
	if _, ok := homes.Load(e.p9); ok {
		waitToken(t, e.p9)
	}
	return append(e.childEnv(), "XDG_DATA_HOME="+e.dataHome(t))
}

// dataHome is a directory whose toolnode is (a link to) the data
// directory of e's cluster's bootstrap node: $XDG_DATA_HOME for a client
// that finds the admin token by default.
func (e *env) dataHome(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(e.root, "xdg-data")
	link := filepath.Join(dir, "toolnode")
	if _, err := os.Lstat(link); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.tokenHome().data, link); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	return dir
}

// proc is a running node, or another process of a test: testcluster's
// Proc, with the names the tests of this package use.
type proc struct {
	*testcluster.Proc
	cmd     *exec.Cmd
	log     *syncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed
}

// spawn starts the binary as node name on e's directories and ports, with
// extra flags and environ as its environment, without waiting for it. The
// process is killed at the end of the test, and its log shown if the test
// failed.
func (e *env) spawn(t *testing.T, name string, environ []string, extra ...string) *proc {
	t.Helper()
	args := []string{"-name", name, "-data", e.data, "-tools", e.tools, "-agents", e.agents,
		"-9p", e.p9, "-gossip", e.gossip, "-cluster", e.cluster}
	e.register(extra)
	return startCmd(t, name, exec.Command(binPath, append(args, extra...)...), environ)
}

// startCmd starts cmd with environ, its output collected, without waiting
// for it. It is killed at the end of the test, and its log, under label,
// shown if the test failed.
func startCmd(t *testing.T, label string, cmd *exec.Cmd, environ []string) *proc {
	t.Helper()
	tp := testcluster.StartT(t, label, cmd, environ)
	p := &proc{Proc: tp, cmd: tp.Cmd, log: tp.Log, done: make(chan struct{})}
	go func() {
		p.waitErr = tp.Err()
		close(p.done)
	}()
	return p
}

// start runs a node on e and waits until its 9P port answers.
func (e *env) start(t *testing.T) *proc {
	t.Helper()
	p := e.spawn(t, "e2e", e.childEnv())
	start := time.Now()
	waitPort(t, p, e.p9)
	t.Logf("node up in %v", time.Since(start).Round(time.Millisecond))
	return p
}

// waitPort waits until the node p answers on its 9P port addr, and fails
// the test when it exits first or 60s pass.
func waitPort(t *testing.T, p *proc, addr string) {
	t.Helper()
	var err error
	up := testcluster.Poll(60*time.Second, func() bool {
		if p.Exited() {
			t.Fatalf("the node exited while starting (%v); log:\n%s", p.Err(), p.log.String())
		}
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
		}
		return err == nil
	})
	if !up {
		t.Fatalf("the node's 9P port %s did not answer within 60s: %v", addr, err)
	}
}

// stop sends SIGTERM, then SIGKILL after 40s, and checks a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if !p.Stop(40 * time.Second) {
		t.Fatal("the node did not exit within 40s of SIGTERM; killed")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the node exited with status %d (%v), want 0", code, p.Err())
	}
	if !strings.Contains(p.log.String(), "shutting down") {
		t.Fatalf("the node's log does not say it is shutting down:\n%s", p.log.String())
	}
}

// waitLog polls the node's log until it has a line with every one of
// the substrings.
func (p *proc) waitLog(t *testing.T, d time.Duration, subs ...string) string {
	t.Helper()
	line, err := p.WaitLog(d, subs...)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// ---- credentials: the cluster's admin token, where its user finds it

// clusterKey is the gossip key of the members of the test clusters: a
// cluster of several nodes needs a credential (-encrypt or mTLS).
var clusterKey = base64.StdEncoding.EncodeToString([]byte("toolnode-e2e-test-cluster-key-!!"))

// withClusterKey is environ with $TOOLNODE_GOSSIP_KEY set to clusterKey,
// unless flags or environ give a credential (-encrypt, -tls-cert, the
// variable) or -insecure already.
func withClusterKey(environ, flags []string) []string {
	for _, f := range flags {
		if f == "-encrypt" || f == "-tls-cert" || f == "-insecure" {
			return environ
		}
	}
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TOOLNODE_GOSSIP_KEY=") {
			return environ
		}
	}
	return append(environ, "TOOLNODE_GOSSIP_KEY="+clusterKey)
}

// homes maps the 9P and gossip addresses of every node a test spawned
// to its env.
var homes sync.Map // address -> *env

// joinedOf maps a node's env to the env of the node it joined (-join).
var joinedOf sync.Map

// metricsHomes maps a -metrics address to its node's 9P address.
var metricsHomes sync.Map

// register records e under its addresses, and the node it joins.
func (e *env) register(flags []string) {
	homes.Store(e.p9, e)
	homes.Store(e.gossip, e)
	for i, f := range flags {
		if f == "-metrics" && i+1 < len(flags) {
			metricsHomes.Store(flags[i+1], e.p9)
		}
		if f == "-join" && i+1 < len(flags) {
			if j, ok := homes.Load(strings.Split(flags[i+1], ",")[0]); ok && j.(*env) != e {
				joinedOf.Store(e, j)
			}
		}
	}
}

// tokenHome is the env of the node that bootstrapped e's cluster: the
// one whose data directory holds the admin token.
func (e *env) tokenHome() *env {
	for seen := 0; seen < 64; seen++ {
		j, ok := joinedOf.Load(e)
		if !ok {
			break
		}
		e = j.(*env)
	}
	return e
}

// tokenOf is the admin token of the cluster of the node at addr: "" when
// it is not written yet, or addr is no node of the test.
func tokenOf(addr string) string {
	v, ok := homes.Load(addr)
	if !ok || v.(*env).tokenless {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(v.(*env).tokenHome().data, "admin.token"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// waitToken polls until the admin token of addr's cluster is written.
func waitToken(t testing.TB, addr string) string {
	t.Helper()
	var s string
	testcluster.Eventually(t, 60*time.Second, func() bool {
		if s = tokenOf(addr); s != "" {
			return true
		}
		if v, ok := homes.Load(addr); !ok || v.(*env).tokenless {
			t.Fatalf("no admin token for the node at %s", addr)
		}
		return false
	}, "the admin token for the node at %s is written", addr)
	return s
}

// ---- 9P helpers

// attach9 attaches to the node at addr with its cluster's admin token.
func attach9(t testing.TB, addr string) *client.Fsys {
	t.Helper()
	return testcluster.Attach(t, addr, "e2e", waitToken(t, addr))
}

// The 9P helpers of this package's tests are testcluster's.
var (
	readAll  = testcluster.ReadAll
	readErr  = testcluster.ReadErr
	cat      = testcluster.Cat
	ask      = testcluster.Ask
	mustAsk  = testcluster.MustAsk
	askFails = testcluster.AskFails
	lsDir    = testcluster.Ls
)

func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func withNL(b []byte) string {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return string(b) + "\n"
	}
	return string(b)
}

// ---- the oracle: which example tools this host shows

type toolWant struct {
	name, desc, prompt string
	meta               []byte
}

type variant struct {
	Match       map[string]json.RawMessage `json:"match"`
	Description string                     `json:"description"`
	Prompt      string                     `json:"prompt"`
}

// visibleTools reads the .meta files of a tools directory and resolves
// their variants against this host, independently of the product.
func visibleTools(t *testing.T, dir string) []toolWant {
	t.Helper()
	metas, err := filepath.Glob(filepath.Join(dir, "*.meta"))
	if err != nil {
		t.Fatal(err)
	}
	var out []toolWant
	for _, path := range metas {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Description string    `json:"description"`
			Prompt      string    `json:"prompt"`
			Variants    []variant `json:"variants"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		w := toolWant{name: strings.TrimSuffix(filepath.Base(path), ".meta"), desc: m.Description, prompt: m.Prompt, meta: b}
		visible := len(m.Variants) == 0
		for _, v := range m.Variants {
			if matches(t, v.Match) {
				visible = true
				if v.Description != "" {
					w.desc = v.Description
				}
				if v.Prompt != "" {
					w.prompt = v.Prompt
				}
				break
			}
		}
		if visible {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func matches(t *testing.T, match map[string]json.RawMessage) bool {
	for key, raw := range match {
		var vals []string
		if json.Unmarshal(raw, &vals) != nil {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatalf("match %s: %s", key, raw)
			}
			vals = []string{s}
		}
		holds := slices.ContainsFunc(vals, func(v string) bool {
			switch key {
			case "binary":
				_, err := exec.LookPath(v)
				return err == nil
			case "file":
				_, err := os.Stat(v)
				return err == nil
			case "os":
				return v == runtime.GOOS
			case "arch":
				return v == runtime.GOARCH
			case "env":
				return os.Getenv(v) != ""
			case "nenv":
				return os.Getenv(v) == ""
			}
			t.Fatalf("unknown match key %q", key)
			return false
		})
		if !holds {
			return false
		}
	}
	return true
}

func idxText(tools []toolWant) string {
	var b strings.Builder
	for _, w := range tools {
		fmt.Fprintf(&b, "%s\t%s\n", w.name, w.desc)
	}
	return b.String()
}

// ---- the test

// suite is one node under test and what the test expects of it.
type suite struct {
	e     *env
	want  []toolWant // the tools this host shows, by the test's own reading
	node  *proc
	addr  string
	fsys  *client.Fsys // a client shared by the parts that run in order
	hello string       // the content of hello.txt in the sessions' cwd
}

// The paths of the agents the test drives.
const (
	dev  = "session/dev/agent/coder/"
	keep = "session/keep/agent/"
)

func TestEndToEnd(t *testing.T) {
	e := newEnv(t)
	s := &suite{e: e, want: visibleTools(t, e.tools), addr: e.p9, hello: "one\ntwo\nthree\n"}
	for _, name := range []string{"echo", "file_read", "file_write", "now", "e2e_write"} {
		if !slices.ContainsFunc(s.want, func(w toolWant) bool { return w.name == name }) {
			t.Fatalf("tool %s is not visible on this host (needs jq or python3); the test needs it", name)
		}
	}
	if err := os.WriteFile(filepath.Join(e.cwd, "hello.txt"), []byte(s.hello), 0o644); err != nil {
		t.Fatal(err)
	}
	s.node = e.start(t)

	// The parts that change nothing run side by side with the 5 s wait
	// of a quiet events file.
	t.Run("quiet", func(t *testing.T) {
		t.Run("events_timeout", s.testEventsTimeout)
		t.Run("root", s.testRoot)
		t.Run("t", s.testT)
		t.Run("a", s.testA)
		t.Run("tools", s.testTools)
		t.Run("node", s.testNode)
		t.Run("cluster", s.testCluster)
		t.Run("offsets", s.testOffsets)
		t.Run("wstat", s.testWstat)
		t.Run("bad_9p", s.testBad9p)
		t.Run("cli_read", s.testCliRead)
	})

	// The parts that change state run in order, on one client.
	s.fsys = attach9(t, s.addr)
	t.Run("sessions", s.testSessions)
	t.Run("events", s.testEvents)
	t.Run("agent", s.testAgent)
	t.Run("call_large", s.testCallLarge)
	t.Run("watch", s.testWatch)
	t.Run("kill_session", s.testKillSession)
	t.Run("cli", s.testCli)
	t.Run("restart", s.testRestart)
}

// snapshot is the state of session keep and the catalog, which a restart
// must keep.
func (s *suite) snapshot(t *testing.T, fsys *client.Fsys) map[string]string {
	t.Helper()
	m := map[string]string{
		"agents":  strings.Join(lsDir(t, fsys, keep), " "),
		"t/idx":   cat(t, fsys, "t/idx"),
		"a/":      strings.Join(lsDir(t, fsys, "a"), " "),
		"session": cat(t, fsys, "session/idx"),
	}
	for _, a := range []string{"coder", "helper"} {
		for _, f := range []string{"toolsrv.loaded", "toolsrv.rev", "preamble"} {
			m[a+"/"+f] = cat(t, fsys, keep+a+"/"+f)
		}
	}
	return m
}

// testRestart makes session keep, stops the node and starts it again on
// the same data directory and ports: the session, its agents, their
// loaded sets and revisions are all there.
func (s *suite) testRestart(t *testing.T) {
	fsys := s.fsys
	if got := mustAsk(t, fsys, "session/new", "name=keep agent=coder cwd="+s.e.cwd); got != "keep\n" {
		t.Fatalf("session/new keep = %q", got)
	}
	mustAsk(t, fsys, keep+"new", "name=helper profile=reader")
	mustAsk(t, fsys, keep+"coder/ctl", "tool_load now")
	mustAsk(t, fsys, keep+"coder/ctl", "tool_unload file_grep")
	before := s.snapshot(t, fsys)
	if before["coder/toolsrv.rev"] != "6\n" {
		t.Errorf("keep/coder toolsrv.rev = %q, want 6 (4 autoLoad, a load, an unload)", before["coder/toolsrv.rev"])
	}

	s.node.stop(t)
	node2 := s.e.start(t)
	if strings.Contains(node2.log.String(), "bootstrapping") {
		t.Error("the restarted node bootstrapped a new cluster instead of using its data")
	}
	fsys = attach9(t, s.addr)
	after := s.snapshot(t, fsys)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s after restart = %q, want %q", k, after[k], v)
		}
	}
	if got := mustAsk(t, fsys, keep+"coder/call", `file_read {"path":"hello.txt"}`); got != s.hello {
		t.Errorf("call after restart = %q", got)
	}
	fsys.Close()
	node2.stop(t)
}

// testEventsTimeout: a read of events with nothing happening returns 0 bytes after about 5 s.
func (s *suite) testEventsTimeout(t *testing.T) {
	addr := s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	fid, err := fsys.Open("events", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	start := time.Now()
	n, err := fid.Read(make([]byte, 8192))
	took := time.Since(start)
	t.Logf("a quiet events read returned after %v", took.Round(time.Millisecond))
	if n != 0 || (err != nil && err != io.EOF) {
		t.Fatalf("quiet events read: %d bytes, %v; want 0 bytes", n, err)
	}
	if took < 4*time.Second || took > 8*time.Second {
		t.Fatalf("quiet events read returned after %v, want about 5s", took)
	}
}

// testRoot: the root lists the tree, and files report length 0.
func (s *suite) testRoot(t *testing.T) {
	addr := s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	got := lsDir(t, fsys, "/")
	if w := []string{"a", "cluster", "events", "m", "node", "session", "t", "token", "tools", "trust", "v"}; !slices.Equal(got, w) {
		t.Fatalf("ls / = %q, want %q", got, w)
	}
	// Generated files report length 0; t/idx its true length.
	for _, p := range []string{"node", "t/idx", "events", "tools", "session/new", "cluster/members"} {
		d, err := fsys.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		want := uint64(0)
		if p == "t/idx" {
			want = uint64(len(cat(t, fsys, p)))
		}
		if d.Length != want {
			t.Errorf("stat %s: length %d, want %d", p, d.Length, want)
		}
	}
}

// testT: t/idx, t/NAME.meta and t/NAME are what the tools directory holds.
func (s *suite) testT(t *testing.T) {
	e, want, addr := s.e, s.want, s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	if got, w := cat(t, fsys, "t/idx"), idxText(want); got != w {
		t.Fatalf("t/idx =\n%s\nwant\n%s", got, w)
	}
	for _, w := range want {
		if got := cat(t, fsys, "t/"+w.name+".meta"); got != withNL(w.meta) {
			t.Errorf("t/%s.meta differs from the file:\n%s", w.name, got)
		}
	}
	script, err := os.ReadFile(filepath.Join(e.tools, "file_read"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cat(t, fsys, "t/file_read"); got != string(script) {
		t.Errorf("t/file_read differs from the script (%d bytes, want %d)", len(got), len(script))
	}
	d, err := fsys.Stat("t/file_read")
	if err != nil {
		t.Fatal(err)
	}
	if d.Mode&0o111 == 0 {
		t.Errorf("t/file_read mode %v is not executable", d.Mode)
	}
	if _, err := readErr(fsys, "t/now"); err == nil {
		t.Error("t/now (a tool with no executable) read, want an error")
	}
	names := lsDir(t, fsys, "t")
	if !slices.Contains(names, "idx") || !slices.Contains(names, "file_read") || !slices.Contains(names, "echo.meta") || slices.Contains(names, "echo") {
		t.Errorf("ls t = %q", names)
	}
}

// testA: a/ serves the agent profiles as written.
func (s *suite) testA(t *testing.T) {
	e, addr := s.e, s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	b, err := os.ReadFile(filepath.Join(e.agents, "coder.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cat(t, fsys, "a/coder.json"); got != withNL(b) {
		t.Errorf("a/coder.json = %q, want the file", got)
	}
	if got := lsDir(t, fsys, "a"); !slices.Equal(got, []string{"coder.json", "reader.json"}) {
		t.Errorf("ls a = %q", got)
	}
}

// testTools: tools answers a tool name with its documentation.
func (s *suite) testTools(t *testing.T) {
	want, addr := s.want, s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	var fr toolWant
	for _, w := range want {
		if w.name == "file_read" {
			fr = w
		}
	}
	doc := mustAsk(t, fsys, "tools", "file_read")
	if !strings.HasPrefix(doc, "file_read: "+fr.desc+"\n") || !strings.Contains(doc, strings.TrimRight(fr.prompt, "\n")) {
		t.Errorf("tools <- file_read:\n%s\nwant its description and prompt", doc)
	}
	askFails(t, fsys, "tools", "nosuch", `"nosuch"`)
	if u := cat(t, fsys, "tools"); u != "" {
		t.Errorf("tools read before a write = %q, want nothing (as 9p rdwr reads first)", u)
	}
}

// testNode: node describes this node: a leader of one, sandboxed.
func (s *suite) testNode(t *testing.T) {
	e, want, addr := s.e, s.want, s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	got := lines(cat(t, fsys, "node"))
	for _, l := range []string{
		"name e2e", "os " + runtime.GOOS, "arch " + runtime.GOARCH, "role leader", "leader e2e",
		"gossip " + e.gossip, "cluster " + e.cluster, "9p " + e.p9, fmt.Sprintf("tools %d", len(want)),
	} {
		if !slices.Contains(got, l) {
			t.Errorf("node has no line %q:\n%s", l, strings.Join(got, "\n"))
		}
	}
	if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, "sandbox landlock") }) {
		t.Errorf("node does not say the Landlock sandbox is on:\n%s", strings.Join(got, "\n"))
	}
}

// testCluster: cluster/members and cluster/where.
func (s *suite) testCluster(t *testing.T) {
	e, want, addr := s.e, s.want, s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	if got, w := cat(t, fsys, "cluster/members"), fmt.Sprintf("e2e %s alive leader %d\n", e.gossip, len(want)); got != w {
		t.Errorf("cluster/members = %q, want %q", got, w)
	}
	if got := mustAsk(t, fsys, "cluster/where", "file_read"); got != "e2e\n" {
		t.Errorf("cluster/where <- file_read = %q, want e2e", got)
	}
	askFails(t, fsys, "cluster/where", "nosuch", `"nosuch"`)
}

// testOffsets: a file read a few bytes at a time, at explicit offsets, reads whole.
func (s *suite) testOffsets(t *testing.T) {
	addr := s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	whole := cat(t, fsys, "t/idx")
	fid, err := fsys.Open("t/idx", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	var got []byte
	buf := make([]byte, 7)
	for {
		n, err := fid.ReadAt(buf, int64(len(got)))
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 10*len(whole) {
			t.Fatal("reading t/idx 7 bytes at a time does not end")
		}
	}
	if string(got) != whole {
		t.Errorf("t/idx read 7 bytes at a time =\n%s\nwant\n%s", got, whole)
	}
}

// testWstat: a Twstat to length 0 (as FUSE sends for O_TRUNC) is accepted, a rename is not.
func (s *suite) testWstat(t *testing.T) {
	addr := s.addr
	t.Parallel()
	fsys := attach9(t, addr)
	var d plan9.Dir
	d.Null()
	d.Length = 0
	if err := fsys.Wstat("session/new", &d); err != nil {
		t.Errorf("Twstat length 0 on session/new (as FUSE sends for O_TRUNC): %v", err)
	}
	if err := fsys.Wstat("t/idx", &d); err == nil {
		t.Error("Twstat length 0 on read-only t/idx succeeded")
	}
	d.Null()
	d.Name = "old"
	if err := fsys.Wstat("session/new", &d); err == nil || !strings.Contains(err.Error(), "rename") {
		t.Errorf("rename of session/new: %v, want an error about renaming", err)
	}
	if got := lsDir(t, fsys, "session"); !slices.Contains(got, "new") {
		t.Errorf("session/new gone after a refused rename: %q", got)
	}
}

// testBad9p: bad bytes on the 9P port.
func (s *suite) testBad9p(t *testing.T) {
	node, addr := s.node, s.addr
	t.Parallel()
	badInput(t, addr, node)
}

// testCliRead: the binary's own 9P client, reading.
func (s *suite) testCliRead(t *testing.T) {
	e, addr := s.e, s.addr
	t.Parallel()
	if got := runCLI(t, e, "", "9p", addr, "ls", "/"); got != "a/\ncluster/\nevents\nm/\nnode\nsession/\nt/\ntoken/\ntools\ntrust/\nv/\n" {
		t.Errorf("toolnode 9p ls / = %q", got)
	}
	if got := runCLI(t, e, "", "9p", addr, "read", "node"); !strings.HasPrefix(got, "name e2e\n") {
		t.Errorf("toolnode 9p read node = %q", got)
	}
}

// testSessions: session/new, session/idx and agent/new, and their errors.
func (s *suite) testSessions(t *testing.T) {
	e, fsys := s.e, s.fsys
	if got := mustAsk(t, fsys, "session/new", "name=dev agent=coder cwd="+e.cwd); got != "dev\n" {
		t.Fatalf("session/new = %q, want dev", got)
	}
	if got := lines(cat(t, fsys, "session/idx")); !slices.Contains(got, "dev") {
		t.Fatalf("session/idx = %q, want dev", got)
	}
	askFails(t, fsys, "session/new", "bogus=1", `unknown key "bogus"`, "name=S")
	askFails(t, fsys, "session/new", "name=a/b", "a/b", "/")
	askFails(t, fsys, "session/new", "name=new", "reserved")
	askFails(t, fsys, "session/new", "name=idx", "reserved")
	askFails(t, fsys, "session/new", "name=dev", `"dev" already exists`)
	askFails(t, fsys, "session/new", "name=rel cwd=some/dir", "absolute")
	// The cwd rules (DESIGN §7), checked at session/new, not at a call.
	askFails(t, fsys, "session/new", "name=gone cwd=/home/me/src", "does not exist")
	askFails(t, fsys, "session/new", "name=root cwd=/", "root directory")
	askFails(t, fsys, "session/new", "name=tl cwd="+e.tools, "inside the node's tools directory")
	askFails(t, fsys, "session/new", "name=dt cwd="+e.data, "inside the node's data directory")
	askFails(t, fsys, "session/new", "name=up cwd="+e.root, "contains the node's")
	askFails(t, fsys, "session/new", "name=p agent=nosuch", "nosuch")
	if got := lines(cat(t, fsys, "session/idx")); slices.ContainsFunc(got, func(s string) bool { return s != "dev" }) {
		t.Errorf("failed session/new writes left sessions behind: %q", got)
	}
	if got := lsDir(t, fsys, "session/dev"); !slices.Equal(got, []string{"agent", "ctl"}) {
		t.Errorf("ls session/dev = %q", got)
	}
	if got := lsDir(t, fsys, "session/dev/agent"); !slices.Equal(got, []string{"coder", "new"}) {
		t.Errorf("ls session/dev/agent = %q, want coder and new", got)
	}
	if got := mustAsk(t, fsys, "session/dev/agent/new", "name=second"); got != "second\n" {
		t.Errorf("agent/new name=second = %q", got)
	}
	askFails(t, fsys, "session/dev/agent/new", "name=third profile=nosuch", "nosuch")
	askFails(t, fsys, "session/dev/agent/new", "name=second", "second")
	askFails(t, fsys, "session/dev/agent/new", "name=new", "new")
	// README: an agent without name= gets a1, ...
	if got, err := ask(fsys, "session/dev/agent/new", "profile=reader"); err != nil {
		t.Errorf("agent/new without name=: %v", err)
	} else if got != "a1\n" {
		t.Errorf("agent/new without name= = %q, want a1", got)
	} else if _, err := ask(fsys, "session/dev/agent/a1/ctl", "kill"); err != nil {
		t.Error(err)
	}
	if got := lsDir(t, fsys, "session/dev/agent"); !slices.Equal(got, []string{"coder", "new", "second"}) {
		t.Errorf("ls session/dev/agent = %q, want coder, new, second", got)
	}
	if err := tell(fsys, "session/dev/ctl", "explode"); err == nil {
		t.Error("session/dev/ctl <- explode succeeded")
	}
	if err := fsys.Remove("session/dev"); err == nil || !strings.Contains(err.Error(), "kill") {
		t.Errorf("remove session/dev: %v, want an error that says to write kill", err)
	}
	if _, err := fsys.Create("session/made", plan9.OREAD, plan9.DMDIR|0o755); err == nil || !strings.Contains(err.Error(), "session/new") {
		t.Errorf("create in session/: %v, want an error that points to session/new", err)
	}
	if got := lsDir(t, fsys, "session"); !slices.Equal(got, []string{"dev", "idx", "new"}) {
		t.Errorf("ls session = %q", got)
	}

	// README: session/new without name= makes s1, s2, ...
	if got, err := ask(fsys, "session/new", "cwd="+e.cwd); err != nil {
		t.Errorf("session/new without name=: %v", err)
	} else if got != "s1\n" {
		t.Errorf("session/new without name= = %q, want s1", got)
	} else if err := tell(fsys, "session/s1/ctl", "kill"); err != nil {
		t.Error(err)
	}
}

// testEvents: a load is an event on an events fid opened before it.
func (s *suite) testEvents(t *testing.T) {
	fsys := s.fsys
	ev, err := fsys.Open("events", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	loadErr := make(chan error, 1)
	go func() {
		_, err := ask(fsys, dev+"tools", "now")
		loadErr <- err
	}()
	buf := make([]byte, 8192)
	n, err := ev.Read(buf)
	if err != nil {
		t.Fatalf("events read: %v", err)
	}
	if err := <-loadErr; err != nil {
		t.Fatalf("load now: %v", err)
	}
	if !regexp.MustCompile(`(?m)^[0-9]+ load dev/coder/now$`).Match(buf[:n]) {
		t.Fatalf("events = %q, want a line INDEX load dev/coder/now", buf[:n])
	}
}

// testAgent: every file of an agent: tools, ctl, toolsrv.*, preamble and call, with the sandbox.
func (s *suite) testAgent(t *testing.T) {
	e, want, fsys, hello := s.e, s.want, s.fsys, s.hello
	rev := func() int {
		t.Helper()
		var r int
		s := cat(t, fsys, dev+"toolsrv.rev")
		if _, err := fmt.Sscanf(s, "%d\n", &r); err != nil || !strings.HasSuffix(s, "\n") {
			t.Fatalf("toolsrv.rev = %q", s)
		}
		return r
	}
	loaded := func() []string {
		t.Helper()
		l := lines(cat(t, fsys, dev+"toolsrv.loaded"))
		sort.Strings(l)
		return l
	}
	// The profile's autoLoad, then now (the events part).
	wantLoaded := []string{"file_glob", "file_grep", "file_read", "file_write", "now"}
	if got := loaded(); !slices.Equal(got, wantLoaded) {
		t.Fatalf("toolsrv.loaded = %q, want %q", got, wantLoaded)
	}
	if r := rev(); r != len(wantLoaded) {
		t.Errorf("toolsrv.rev = %d after %d loads, want %d", r, len(wantLoaded), len(wantLoaded))
	}
	if got := cat(t, fsys, dev+"tools"); got != cat(t, fsys, dev+"toolsrv.loaded") {
		t.Errorf("tools read = %q, want the loaded list", got)
	}

	r0 := rev()
	got := mustAsk(t, fsys, dev+"tools", "now") // already loaded
	if !slices.Contains(lines(got), "now") {
		t.Errorf("tools <- now answered %q, want the loaded list", got)
	}
	if r := rev(); r != r0 {
		t.Errorf("loading a loaded tool moved toolsrv.rev from %d to %d", r0, r)
	}
	if got := mustAsk(t, fsys, dev+"ctl", "tool_unload now"); got != "unloaded now\n" {
		t.Errorf("ctl tool_unload now = %q", got)
	}
	if r := rev(); r != r0+1 {
		t.Errorf("toolsrv.rev = %d after an unload, want %d", r, r0+1)
	}
	if slices.Contains(loaded(), "now") {
		t.Error("now still loaded after tool_unload")
	}
	if got := mustAsk(t, fsys, dev+"ctl", "tool_load now"); got != "loaded now\n" {
		t.Errorf("ctl tool_load now = %q", got)
	}
	if r := rev(); r != r0+2 {
		t.Errorf("toolsrv.rev = %d after a load, want %d", r, r0+2)
	}
	askFails(t, fsys, dev+"tools", "nosuch", `"nosuch"`)
	askFails(t, fsys, dev+"ctl", "tool_load nosuch", `"nosuch"`)
	askFails(t, fsys, dev+"ctl", "explode", "tool_load")
	if r := rev(); r != r0+2 {
		t.Errorf("failed loads moved toolsrv.rev to %d, want %d", r, r0+2)
	}

	all := mustAsk(t, fsys, dev+"ctl", "tools_all")
	for _, w := range want {
		if l := w.name + "\t" + w.desc + "\te2e"; !slices.Contains(lines(all), l) {
			t.Errorf("tools_all has no line %q:\n%s", l, all)
		}
	}

	pre := cat(t, fsys, dev+"preamble")
	var fr toolWant
	for _, w := range want {
		if !strings.Contains(pre, w.name+": "+w.desc+"\n") {
			t.Errorf("preamble does not list %s", w.name)
		}
		if w.name == "file_read" {
			fr = w
		}
	}
	if !strings.Contains(pre, "\n## file_read\n") || !strings.Contains(pre, strings.TrimRight(fr.prompt, "\n")) {
		t.Errorf("preamble has no file_read section with its prompt:\n%s", pre)
	}
	if strings.Contains(pre, "## echo") {
		t.Error("preamble has a section for echo, which is not loaded")
	}

	// call
	call := dev + "call"
	if got := mustAsk(t, fsys, call, `file_read {"path":"hello.txt"}`); got != hello {
		t.Errorf("file_read hello.txt = %q, want %q", got, hello)
	}
	got = mustAsk(t, fsys, call, `file_write {"path":"made/new.txt","content":"made\n"}`)
	if !strings.Contains(got, "made/new.txt") {
		t.Errorf("file_write answered %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(e.cwd, "made", "new.txt")); err != nil || string(b) != "made\n" {
		t.Errorf("file_write into the session's cwd: %q, %v", b, err)
	}
	askFails(t, fsys, call, `file_write {"path":"../outside.txt","content":"x"}`, "..")
	if _, err := os.Stat(filepath.Join(e.root, "outside.txt")); err == nil {
		t.Error("file_write wrote ../outside.txt")
	}

	// The sandbox: e2e_write can write in the cwd, not elsewhere.
	mustAsk(t, fsys, dev+"ctl", "tool_load e2e_write")
	inside := filepath.Join(e.cwd, "inside.txt")
	if got := mustAsk(t, fsys, call, `e2e_write {"path":"`+inside+`"}`); got != "wrote "+inside+"\n" {
		t.Errorf("e2e_write into the cwd = %q", got)
	}
	if b, err := os.ReadFile(inside); err != nil || string(b) != "x\n" {
		t.Errorf("e2e_write into the cwd wrote %q, %v", b, err)
	}
	outside := filepath.Join(t.TempDir(), "escaped.txt")
	askFails(t, fsys, call, `e2e_write {"path":"`+outside+`"}`, "e2e_write", "ermission denied")
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("the sandbox let a tool write %s, outside the cwd and scratch", outside)
	}

	// Arguments are checked before anything runs.
	schema := filepath.Join(e.cwd, "schema.txt")
	askFails(t, fsys, call, `e2e_write {"path":"`+schema+`","extra":1}`, "invalid arguments", "extra")
	askFails(t, fsys, call, `file_read {"nope":1}`, "invalid arguments", "path")
	if _, err := os.Stat(schema); err == nil {
		t.Error("a call whose arguments break the schema ran")
	}
	askFails(t, fsys, call, `nosuch {}`, `no tool "nosuch"`)
	askFails(t, fsys, call, `echo {"text":"hi"}`, "tool_load", "echo")
	askFails(t, fsys, call, `echo {"text":`, "incomplete")
	askFails(t, fsys, call, `echo [1]`, "JSON object")

	if got := mustAsk(t, fsys, call, `tool_load {"name":"echo"}`); got != "loaded echo\n" {
		t.Errorf("call tool_load echo = %q", got)
	}
	if got := mustAsk(t, fsys, call, `echo {"text":"hi"}`); got != "hi\n" {
		t.Errorf("echo hi = %q", got)
	}
	if got := mustAsk(t, fsys, call, `tools_all {}`); got != mustAsk(t, fsys, dev+"ctl", "tools_all") {
		t.Errorf("call tools_all = %q, want what ctl tools_all says", got)
	}
	if l := loaded(); slices.ContainsFunc(l, func(s string) bool { return strings.HasPrefix(s, "tool") }) {
		t.Errorf("built-ins listed among the loaded tools: %q", l)
	}
	if got := mustAsk(t, fsys, call, `now`); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$`).MatchString(got) {
		t.Errorf("now = %q", got)
	}

	// A FUSE-style open with truncation, then a call.
	fid, err := fsys.Open(call, plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	var d plan9.Dir
	d.Null()
	d.Length = 0
	if err := fid.Wstat(&d); err != nil {
		t.Errorf("Twstat length 0 on an open call fid: %v", err)
	}
	if _, err := fid.WriteAt([]byte(`echo {"text":"after truncate"}`), 0); err != nil {
		t.Error(err)
	} else if b, err := readAll(fid); err != nil || string(b) != "after truncate\n" {
		t.Errorf("call after truncation = %q, %v", b, err)
	}
	fid.Close()

	// Agent ctl kill.
	if got := mustAsk(t, fsys, "session/dev/agent/second/ctl", "kill"); got != "killed agent second\n" {
		t.Errorf("ctl kill = %q", got)
	}
	if got := lsDir(t, fsys, "session/dev/agent"); !slices.Equal(got, []string{"coder", "new"}) {
		t.Errorf("ls session/dev/agent after kill = %q", got)
	}
	if _, err := fsys.Stat("session/dev/agent/second"); err == nil {
		t.Error("walk to a killed agent succeeded")
	}
}

// testCallLarge: a call written in pieces runs; one over 1 MiB is refused.
func (s *suite) testCallLarge(t *testing.T) {
	fsys := s.fsys
	call := dev + "call"
	fid, err := fsys.Open(call, plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	text := strings.Repeat("abcdefghij", 1000) // 10000 bytes
	req := []byte(`echo {"text":"` + text + `"}`)
	const piece = 3000
	for off := 0; off < len(req); off += piece {
		end := min(off+piece, len(req))
		if n, err := fid.WriteAt(req[off:end], int64(off)); err != nil || n != end-off {
			t.Fatalf("write %d..%d of a split call: %d, %v", off, end, n, err)
		}
	}
	if b, err := readAll(fid); err != nil || string(b) != text+"\n" {
		t.Fatalf("split call answered %d bytes, %v; want the %d-byte text back", len(b), err, len(text)+1)
	}

	// Over 1 MiB: an error before the limit is passed by a whole piece.
	chunk := bytes.Repeat([]byte("x"), 60000)
	head := []byte(`echo {"text":"`)
	if _, err := fid.WriteAt(head, 0); err != nil {
		t.Fatal(err)
	}
	off, limitErr := len(head), error(nil)
	for off <= 1<<20+len(chunk) {
		n, err := fid.WriteAt(chunk, int64(off))
		if err != nil {
			limitErr = err
			break
		}
		off += n
	}
	if limitErr == nil || !strings.Contains(limitErr.Error(), "1 MiB") {
		t.Fatalf("a %d-byte call request: %v; want an error about the 1 MiB limit", off, limitErr)
	}
	if off > 1<<20 {
		t.Errorf("the call took %d bytes before refusing, over 1 MiB", off)
	}
	// The fid still serves a new request.
	if _, err := fid.WriteAt([]byte(`echo {"text":"small"}`), 0); err != nil {
		t.Fatal(err)
	}
	if b, err := readAll(fid); err != nil || string(b) != "small\n" {
		t.Fatalf("call after the refused one = %q, %v", b, err)
	}
}

// testWatch: the tools directory is watched: additions, invalid edits, removals.
func (s *suite) testWatch(t *testing.T) {
	e, node, fsys := s.e, s.node, s.fsys
	exe := filepath.Join(e.tools, "hello")
	meta := filepath.Join(e.tools, "hello.meta")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho hello from the tools dir\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	valid := `{"description":"Say hello."}` + "\n"
	start := time.Now()
	if err := os.WriteFile(meta, []byte(valid), 0o644); err != nil {
		t.Fatal(err)
	}
	hasHello := func(s string) bool { return slices.Contains(lines(s), "hello\tSay hello.") }
	// The deadline bounds the wait on a loaded machine; it is no speed
	// goal (the time taken is logged below).
	if !pollIdx(t, fsys, 10*time.Second, hasHello) {
		t.Fatalf("t/idx does not show hello 10s after its .meta was written:\n%s", cat(t, fsys, "t/idx"))
	}
	t.Logf("a new tool reached t/idx after %v", time.Since(start).Round(time.Millisecond))
	if got := cat(t, fsys, "t/hello.meta"); got != valid {
		t.Errorf("t/hello.meta = %q", got)
	}
	mustAsk(t, fsys, dev+"tools", "hello")
	if got := mustAsk(t, fsys, dev+"call", "hello"); got != "hello from the tools dir\n" {
		t.Errorf("call hello = %q", got)
	}

	if err := os.WriteFile(meta, []byte(`{"description":5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	line := node.waitLog(t, 5*time.Second, "hello.meta", "description")
	t.Logf("invalid edit logged: %s", line)
	if got := cat(t, fsys, "t/idx"); !hasHello(got) {
		t.Errorf("an invalid edit replaced the valid hello:\n%s", got)
	}
	if got := cat(t, fsys, "t/hello.meta"); got != valid {
		t.Errorf("t/hello.meta after an invalid edit = %q, want the valid version", got)
	}

	start = time.Now()
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if !pollIdx(t, fsys, time.Second, func(s string) bool { return !strings.Contains(s, "hello\t") }) {
		t.Fatalf("t/idx still shows hello 1s after its .meta was removed")
	}
	t.Logf("a removed tool left t/idx after %v", time.Since(start).Round(time.Millisecond))
	if _, err := fsys.Stat("t/hello.meta"); err == nil {
		t.Error("t/hello.meta still there")
	}
}

// testKillSession: session/S/ctl kill removes the session.
func (s *suite) testKillSession(t *testing.T) {
	fsys := s.fsys
	if err := tell(fsys, "session/dev/ctl", "kill"); err != nil {
		t.Fatal(err)
	}
	if got := lines(cat(t, fsys, "session/idx")); slices.Contains(got, "dev") {
		t.Errorf("session/idx after kill = %q", got)
	}
	if _, err := fsys.Stat("session/dev"); err == nil {
		t.Error("walk to a killed session succeeded")
	}
	if _, err := fsys.Open(dev+"toolsrv.rev", plan9.OREAD); err == nil {
		t.Error("open of a killed session's file succeeded")
	}
}

// testCli: the binary's own client: rdwr and call.
func (s *suite) testCli(t *testing.T) {
	e, addr, fsys := s.e, s.addr, s.fsys
	if got := runCLI(t, e, "name=x\n", "9p", addr, "rdwr", "session/new"); got != "x\n" {
		t.Errorf("toolnode 9p rdwr session/new <- name=x = %q", got)
	}
	if got := runCLI(t, e, "", "call", "-a", addr, "echo", `{"text":"via cli"}`); got != "via cli\n" {
		t.Errorf("toolnode call echo = %q, want \"via cli\\n\"", got)
	}
	if left := slices.DeleteFunc(lines(cat(t, fsys, "session/idx")), func(s string) bool { return !strings.HasPrefix(s, "call-") }); len(left) > 0 {
		t.Errorf("toolnode call left its throwaway session(s) %q behind", left)
	}
	if err := tell(fsys, "session/x/ctl", "kill"); err != nil {
		t.Error(err)
	}
}

func pollIdx(t *testing.T, fsys *client.Fsys, d time.Duration, ok func(string) bool) bool {
	t.Helper()
	return testcluster.Poll(d, func() bool { return ok(cat(t, fsys, "t/idx")) })
}

// badInput sends frames no 9P client sends and checks the node drops the
// connection, or answers an Rerror and goes on, and stays up.
func badInput(t *testing.T, addr string, node *proc) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 512)
	for {
		for i := range random {
			random[i] = byte(rnd.Uint32())
		}
		if size := binary.LittleEndian.Uint32(random); size < 7 || size > 1<<17 {
			break // a size no server accepts: the connection must close
		}
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"size 3", append(le32(3), 0, 0, 0)},
		{"size 1<<30", append(le32(1<<30), 100, 0xff, 0xff)},
		{"random", random},
	} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(c.data) // the server may close before it has read it all
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the connection is still open after 10s", c.name)
		}
		conn.Close()
	}

	// A frame of a valid size but an unknown type is answered with an
	// Rerror, and the connection goes on: a Tversion after it is answered.
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	frame := append(le32(7), 0xfe, 1, 0) // type 254, tag 1
	version := []byte("9P2000")
	tv := append(le32(uint32(4+1+2+4+2+len(version))), plan9.Tversion, 0xff, 0xff)
	tv = binary.LittleEndian.AppendUint32(tv, 8192)
	tv = binary.LittleEndian.AppendUint16(tv, uint16(len(version)))
	tv = append(tv, version...)
	if _, err := conn.Write(append(frame, tv...)); err != nil {
		t.Fatal(err)
	}
	for _, wantType := range []uint8{plan9.Rerror, plan9.Rversion} {
		f, err := plan9.ReadFcall(conn)
		if err != nil {
			t.Fatalf("reading the answer (want type %d): %v", wantType, err)
		}
		if f.Type != wantType {
			t.Fatalf("answer %v, want type %d", f, wantType)
		}
	}

	// The node is up and serves another client.
	fsys := attach9(t, addr)
	if got := cat(t, fsys, "node"); !strings.HasPrefix(got, "name e2e\n") {
		t.Errorf("node after bad input = %q", got)
	}
	node.waitLog(t, 5*time.Second, "9p:", "closing connection")
}

// runCLI runs the built binary as a client and returns its standard
// output; a failure is fatal. As the node's own user, it finds the
// cluster's admin token in the default data directory
// ($XDG_DATA_HOME/toolnode, here the bootstrap node's data directory).
func runCLI(t *testing.T, e *env, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = e.clientEnv(t)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolnode %q: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

func TestKeygen(t *testing.T) {
	e := &env{config: t.TempDir()}
	out := runCLI(t, e, "", "keygen")
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("keygen printed %q, want one line", out)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(out, "\n"))
	if err != nil || len(key) != 32 {
		t.Fatalf("keygen printed %q: %d bytes, %v; want base64 of 32 bytes", out, len(key), err)
	}
	if out2 := runCLI(t, e, "", "keygen"); out2 == out {
		t.Error("two keygen runs printed the same key")
	}
}
