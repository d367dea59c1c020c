//go:build linux

// The multi-node end-to-end tests: several real toolnode processes on
// loopback, each with its own data and tools directories and the sandbox
// on, joined by gossip and replicated by Raft, driven over 9P. They reuse
// the single-node test's binary (built in TestMain), processes, free
// ports and 9P helpers; every wait is a poll with a deadline.

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/anishathalye/porcupine"

	"github.com/toolnode/toolnode/examples"
	"github.com/toolnode/toolnode/internal/testcluster"
	"github.com/toolnode/toolnode/internal/testport"
)

// ---- cluster members as processes

// cnode is one member of a test cluster: its directories, addresses and
// command line survive restarts; p is the running process, if any.
type cnode struct {
	name  string
	e     *env
	flags []string // beyond the common ones: -join, -encrypt, -tls-*
	p     *proc
}

// newCnode makes a member's directories (an empty tools directory, no
// profiles) and picks its ports.
func newCnode(t *testing.T, name string) *cnode {
	t.Helper()
	root := t.TempDir()
	e := &env{
		root: root, data: filepath.Join(root, "data"), tools: filepath.Join(root, "tools"),
		agents: filepath.Join(root, "agents"), config: filepath.Join(root, "config"), cwd: filepath.Join(root, "cwd"),
	}
	for _, d := range []string{e.tools, e.agents, e.config, e.cwd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ports := testport.Pick(t, 3)
	e.p9, e.gossip, e.cluster = ports[0], ports[1], ports[2]
	return &cnode{name: name, e: e}
}

// withExamples points the member at the example tools and profiles.
func (n *cnode) withExamples(t *testing.T) *cnode {
	t.Helper()
	tools, agents, err := examples.Extract(filepath.Join(n.e.root, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	n.e.tools, n.e.agents = tools, agents
	return n
}

// addTool writes a tool of metadata only (it runs cmd) into the member's
// tools directory.
func (n *cnode) addTool(t *testing.T, name, desc string) {
	t.Helper()
	meta := fmt.Sprintf(`{"description": %q, "cmd": "echo %s"}`+"\n", desc, name)
	if err := os.WriteFile(filepath.Join(n.e.tools, name+".meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (n *cnode) joining(to *cnode) *cnode {
	n.flags = append(n.flags, "-join", to.e.gossip)
	return n
}

// launch starts the member's process and returns at once. The process
// is killed when the test ends; its log is shown if the test failed.
func (n *cnode) launch(t *testing.T) *proc {
	t.Helper()
	p := n.e.spawn(t, n.name, withClusterKey(n.e.childEnv(), n.flags), n.flags...)
	n.p = p
	return p
}

// start launches the member and waits until it serves 9P.
func (n *cnode) start(t *testing.T) *proc {
	t.Helper()
	begin := time.Now()
	p := n.launch(t)
	n.waitServing(t, 60*time.Second)
	t.Logf("%s serves 9P %v after its start", n.name, time.Since(begin).Round(time.Millisecond))
	return p
}

// waitServing polls until the member answers a read of its node file.
// (Its 9P port accepts connections from the start, but the tree is
// served only once the node has found its cluster.)
func (n *cnode) waitServing(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		select {
		case <-n.p.done:
			t.Fatalf("%s exited while starting (%v); log:\n%s", n.name, n.p.waitErr, n.p.log.String())
		default:
		}
		_, err := read9(n.e.p9, "node")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve 9P on %s within %v: %v", n.name, n.e.p9, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the member's process with SIGKILL: no leave, no handover.
func (n *cnode) kill(t *testing.T) {
	t.Helper()
	if err := n.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die within 10s of SIGKILL", n.name)
	}
}

func (n *cnode) running() bool {
	if n.p == nil {
		return false
	}
	select {
	case <-n.p.done:
		return false
	default:
		return true
	}
}

// ---- 9P with deadlines

// conn9 is a 9P client whose every operation has a deadline, so a dead
// or stuck node makes it fail instead of hanging.
type conn9 struct {
	nc   net.Conn
	fsys *client.Fsys
}

// dial9 attaches with the admin token of addr's cluster (none while it
// is not written yet).
func dial9(addr string, d time.Duration) (*conn9, error) {
	return dial9as(addr, tokenOf(addr), d)
}

// dial9as is dial9 presenting aname as the attach name.
func dial9as(addr, aname string, d time.Duration) (*conn9, error) {
	nc, err := dialTest(addr, d)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(d))
	c, err := client.NewConn(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	fsys, err := c.Attach(nil, "e2e", aname)
	if err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return &conn9{nc: nc, fsys: fsys}, nil
}

// close drops the connection; the server clunks what was left open.
func (c *conn9) close() { c.nc.Close() }

func (c *conn9) read(path string, d time.Duration) (string, error) {
	c.nc.SetDeadline(time.Now().Add(d))
	defer c.nc.SetDeadline(time.Time{})
	return readErr(c.fsys, path)
}

func (c *conn9) ask(path, req string, d time.Duration) (string, error) {
	c.nc.SetDeadline(time.Now().Add(d))
	defer c.nc.SetDeadline(time.Time{})
	return ask(c.fsys, path, req)
}

// list reads the names in directory path.
func (c *conn9) list(path string, d time.Duration) ([]string, error) {
	c.nc.SetDeadline(time.Now().Add(d))
	defer c.nc.SetDeadline(time.Time{})
	fid, err := c.fsys.Open(path, plan9.OREAD)
	if err != nil {
		return nil, err
	}
	defer fid.Close()
	dirs, err := fid.Dirreadall()
	var names []string
	for _, e := range dirs {
		names = append(names, e.Name)
	}
	return names, err
}

// read9 reads one file on a connection of its own.
func read9(addr, path string) (string, error) {
	c, err := dial9(addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.close()
	return c.read(path, 5*time.Second)
}

// ask9 asks one question on a connection of its own.
func ask9(addr, path, req string, d time.Duration) (string, error) {
	c, err := dial9(addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.close()
	return c.ask(path, req, d)
}

func mustAsk9(t *testing.T, n *cnode, path, req string) string {
	t.Helper()
	s, err := ask9(n.e.p9, path, req, 20*time.Second)
	if err != nil {
		t.Fatalf("%s: %s <- %q: %v", n.name, path, req, err)
	}
	return s
}

func mustRead9(t *testing.T, n *cnode, path string) string {
	t.Helper()
	s, err := read9(n.e.p9, path)
	if err != nil {
		t.Fatalf("%s: read %s: %v", n.name, path, err)
	}
	return s
}

// pollUntil calls check every 50 ms until it says done or d passes; then
// the test fails with what check last said.
func pollUntil(t *testing.T, d time.Duration, what string, check func() (bool, string)) time.Duration {
	t.Helper()
	return testcluster.Until(t, d, what, check)
}

// ---- what the nodes say about the cluster

type cmember struct{ addr, state, role, tools string }

// parseMembers reads cluster/members: NAME ADDR STATE ROLE TOOLS.
func parseMembers(s string) (map[string]cmember, error) {
	out := map[string]cmember{}
	for _, l := range lines(s) {
		f := strings.Fields(l)
		if len(f) != 5 {
			return nil, fmt.Errorf("cluster/members line %q does not have 5 fields", l)
		}
		out[f[0]] = cmember{addr: f[1], state: f[2], role: f[3], tools: f[4]}
	}
	return out, nil
}

func members9(n *cnode) (map[string]cmember, string, error) {
	s, err := read9(n.e.p9, "cluster/members")
	if err != nil {
		return nil, "", err
	}
	m, err := parseMembers(s)
	return m, s, err
}

// nodeField is one line "KEY VALUE" of a node file.
func nodeField(node, key string) string {
	for _, l := range lines(node) {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			return v
		}
	}
	return ""
}

// clusterFormed reports whether every one of nodes lists exactly nodes,
// all alive, one leader and the others voters, and every node file
// names that same leader; it returns the leader.
func clusterFormed(nodes []*cnode) (bool, string, string) {
	var b strings.Builder
	leader := ""
	ok := true
	for _, n := range nodes {
		m, text, err := members9(n)
		info, err2 := read9(n.e.p9, "node")
		fmt.Fprintf(&b, "%s members:\n%s%s node: role %s, leader %s (%v %v)\n", n.name, text, n.name,
			nodeField(info, "role"), nodeField(info, "leader"), err, err2)
		if err != nil || err2 != nil || len(m) != len(nodes) {
			ok = false
			continue
		}
		leaders := 0
		for _, o := range nodes {
			mm, found := m[o.name]
			switch {
			case !found || mm.state != "alive":
				ok = false
			case mm.role == "leader":
				leaders++
				if leader == "" {
					leader = o.name
				} else if leader != o.name {
					ok = false
				}
			case mm.role != "voter":
				ok = false
			}
		}
		if leaders != 1 || nodeField(info, "leader") != leader {
			ok = false
		}
	}
	return ok && leader != "", leader, b.String()
}

// waitFormed polls until nodes form one cluster (see clusterFormed) and
// returns the leader's name.
func waitFormed(t *testing.T, d time.Duration, nodes ...*cnode) (string, time.Duration) {
	t.Helper()
	var leader string
	took := pollUntil(t, d, "the cluster to form (all alive, one leader, the rest voters)", func() (bool, string) {
		ok, l, state := clusterFormed(nodes)
		leader = l
		return ok, state
	})
	return leader, took
}

func byName(nodes []*cnode, name string) *cnode {
	for _, n := range nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

func others(nodes []*cnode, not ...*cnode) []*cnode {
	var out []*cnode
	for _, n := range nodes {
		if !slices.Contains(not, n) {
			out = append(out, n)
		}
	}
	return out
}

// ---- 1. write, read, failover, rejoin

func TestE2E_Cluster_WriteReadFailoverRejoin(t *testing.T) {
	t.Parallel()
	n1 := newCnode(t, "c1").withExamples(t)
	n2 := newCnode(t, "c2").joining(n1)
	n3 := newCnode(t, "c3").joining(n1)
	n2.addTool(t, "only_c2", "A tool published by c2.")
	n3.addTool(t, "only_c3", "A tool published by c3.")
	nodes := []*cnode{n1, n2, n3}
	begin := time.Now()
	n1.launch(t)
	n1.waitServing(t, 30*time.Second)
	n2.launch(t)
	n3.launch(t)
	leaderName, _ := waitFormed(t, 30*time.Second, nodes...)
	t.Logf("three nodes formed a cluster %v after the first started; leader %s", time.Since(begin).Round(time.Millisecond), leaderName)
	for _, n := range nodes {
		if l := n.p.log.String(); strings.Contains(l, "bootstrapping") != (n == n1) {
			t.Errorf("%s: bootstrapped %v, want only c1 (started without -join) to:\n%s", n.name, strings.Contains(l, "bootstrapping"), l)
		}
	}

	// Every node's catalog gets the tools the others publish.
	t.Run("catalogs", func(t *testing.T) { testCatalogs(t, nodes, "echo", "only_c2", "only_c3") })

	leader := byName(nodes, leaderName)
	fs := others(nodes, leader)
	f, g := fs[0], fs[1] // two followers

	// A write through a follower, watched from the other follower's events.
	ev, err := dial9(g.e.p9, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.close()
	evFid, err := ev.fsys.Open("events", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustAsk9(t, f, "session/new", "name=w1"); got != "w1\n" {
		t.Fatalf("%s: session/new name=w1 = %q", f.name, got)
	}
	if got := mustAsk9(t, f, "session/w1/agent/new", "name=A"); got != "A\n" {
		t.Fatalf("%s: agent/new name=A = %q", f.name, got)
	}
	const agentA = "session/w1/agent/A/"
	if got := mustAsk9(t, f, agentA+"tools", "echo"); got != "echo\n" {
		t.Fatalf("%s: agent A tools <- echo = %q, want the loaded list", f.name, got)
	}
	// Read your writes: at once, on the node written through.
	if got := mustRead9(t, f, agentA+"toolsrv.loaded"); got != "echo\n" {
		t.Errorf("%s: toolsrv.loaded right after the load = %q, want echo", f.name, got)
	}
	if got := mustRead9(t, f, agentA+"toolsrv.rev"); got != "1\n" {
		t.Errorf("%s: toolsrv.rev right after the load = %q, want 1", f.name, got)
	}
	// The others soon after.
	for _, n := range []*cnode{leader, g} {
		took := pollUntil(t, 5*time.Second, n.name+" to show agent A with echo loaded", func() (bool, string) {
			l, err1 := read9(n.e.p9, agentA+"toolsrv.loaded")
			r, err2 := read9(n.e.p9, agentA+"toolsrv.rev")
			return l == "echo\n" && r == "1\n", fmt.Sprintf("loaded %q rev %q (%v %v)", l, r, err1, err2)
		})
		t.Logf("%s showed the write %v after it returned on %s", n.name, took.Round(time.Millisecond), f.name)
	}
	// Another node's events file saw the agent made and the load.
	readEvents(t, ev, evFid, 10*time.Second, g.name,
		regexp.MustCompile(`(?m)^\d+ agent\+ w1/A$`), regexp.MustCompile(`(?m)^\d+ load w1/A/echo$`))
	ev.close()

	// SIGKILL the leader: how long until a new leader, and until a write
	// through a survivor is accepted.
	survivors := fs
	leader.kill(t)
	killed := time.Now()
	type took struct {
		d   time.Duration
		err error
	}
	firstWrite := make(chan took, 1)
	go func() {
		for {
			_, err := ask9(f.e.p9, agentA+"ctl", "tool_load now", 20*time.Second)
			if err == nil || time.Since(killed) > 30*time.Second {
				firstWrite <- took{time.Since(killed), err}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var newLeader string
	electTook := pollUntil(t, 20*time.Second, "the survivors to agree on a new leader", func() (bool, string) {
		var state []string
		agree := ""
		for i, n := range survivors {
			info, err := read9(n.e.p9, "node")
			l := nodeField(info, "leader")
			state = append(state, fmt.Sprintf("%s: leader %q (%v)", n.name, l, err))
			if err != nil || l == "" || l == "none" || l == leader.name || (i > 0 && l != agree) {
				return false, strings.Join(state, "\n")
			}
			agree = l
		}
		newLeader = agree
		return true, ""
	})
	var w took
	select {
	case w = <-firstWrite:
	case <-time.After(40 * time.Second):
		t.Fatal("the write through a survivor neither returned nor failed within 40s of the kill")
	}
	if w.err != nil {
		t.Fatalf("no write through %s was accepted within 30s of the leader's death: %v", f.name, w.err)
	}
	t.Logf("FIGURE failover: %s killed; new leader %s after %v; first write through %s accepted after %v",
		leader.name, newLeader, electTook.Round(time.Millisecond), f.name, w.d.Round(time.Millisecond))
	if electTook > 10*time.Second {
		t.Errorf("a new leader took %v, want < 10s", electTook)
	}
	if w.d > 10*time.Second {
		t.Errorf("the first write after the leader's death took %v, want < 10s", w.d)
	}

	// The survivors see the killed node as dead.
	for _, n := range survivors {
		pollUntil(t, 30*time.Second, n.name+" to list "+leader.name+" as dead", func() (bool, string) {
			m, text, err := members9(n)
			return err == nil && m[leader.name].state == "dead", fmt.Sprint(text, err)
		})
		t.Logf("FIGURE %s lists %s as dead %v after the kill", n.name, leader.name, time.Since(killed).Round(time.Millisecond))
	}

	// Writes go on, through both survivors.
	if got := mustAsk9(t, g, "session/w1/agent/new", "name=B"); got != "B\n" {
		t.Fatalf("%s: agent/new name=B = %q", g.name, got)
	}
	mustAsk9(t, f, agentA+"ctl", "tool_load file_read")
	if got := mustRead9(t, g, "session/w1/agent/B/toolsrv.rev"); got != "0\n" {
		t.Errorf("%s: agent B toolsrv.rev = %q, want 0", g.name, got)
	}
	wantA := "echo\nfile_read\nnow\n"
	if got := mustRead9(t, f, agentA+"toolsrv.loaded"); !sameLines(got, wantA) {
		t.Errorf("%s: agent A toolsrv.loaded = %q, want %q", f.name, got, wantA)
	}

	// The killed node comes back on its data directory, with its command
	// line of before: it rejoins, catches up, and bootstraps nothing.
	restarted := time.Now()
	p := leader.launch(t)
	leader.waitServing(t, 40*time.Second)
	serving := time.Since(restarted)
	pollUntil(t, 20*time.Second, leader.name+" to catch up with the writes made while it was down", func() (bool, string) {
		a, err1 := read9(leader.e.p9, agentA+"toolsrv.loaded")
		b, err2 := read9(leader.e.p9, "session/w1/agent/B/toolsrv.rev")
		return sameLines(a, wantA) && b == "0\n", fmt.Sprintf("A loaded %q, B rev %q (%v, %v)", a, b, err1, err2)
	})
	caughtUp := time.Since(restarted)
	final, _ := waitFormed(t, 40*time.Second, nodes...)
	t.Logf("FIGURE rejoin: %s restarted: serving 9P after %v, caught up after %v, a voter again (leader %s) after %v",
		leader.name, serving.Round(time.Millisecond), caughtUp.Round(time.Millisecond), final, time.Since(restarted).Round(time.Millisecond))
	if l := p.log.String(); strings.Contains(l, "bootstrapping") {
		t.Errorf("%s restarted on its data bootstrapped a new cluster instead of rejoining:\n%s", leader.name, l)
	}
	// It serves writes again, and the others see them.
	mustAsk9(t, leader, agentA+"ctl", "tool_unload echo")
	for _, n := range nodes {
		pollUntil(t, 10*time.Second, n.name+" to show the unload made through "+leader.name, func() (bool, string) {
			a, err := read9(n.e.p9, agentA+"toolsrv.loaded")
			r, _ := read9(n.e.p9, agentA+"toolsrv.rev")
			return sameLines(a, "file_read\nnow\n") && r == "4\n", fmt.Sprintf("loaded %q rev %q (%v)", a, r, err)
		})
	}
}

// testCatalogs polls until every node's t/idx lists every one of tools.
func testCatalogs(t *testing.T, nodes []*cnode, tools ...string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var missing []string // "NODE TOOL"
		for _, n := range nodes {
			idx, err := read9(n.e.p9, "t/idx")
			if err != nil {
				t.Fatalf("%s: read t/idx: %v", n.name, err)
			}
			for _, tool := range tools {
				if !strings.Contains(idx, tool+"\t") {
					missing = append(missing, n.name+" "+tool)
				}
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// A tool whose metadata the node serves (from its replicated
		// state) but that its t/idx lacks was lost by its catalog.
		var lost []string
		for _, m := range missing {
			name, tool, _ := strings.Cut(m, " ")
			if _, err := read9(byName(nodes, name).e.p9, "t/"+tool+".meta"); err == nil {
				lost = append(lost, m)
			}
		}
		t.Fatalf("t/idx lacks %q after 10s (of which only %q have their metadata replicated)", missing, lost)
	}
}

// sameLines compares two texts as sets of lines.
func sameLines(a, b string) bool {
	x, y := lines(a), lines(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// readEvents reads an events fid until what it has read matches every
// pattern. A read that finds nothing for 5 s returns 0 bytes: read again.
func readEvents(t *testing.T, c *conn9, fid *client.Fid, d time.Duration, where string, want ...*regexp.Regexp) {
	t.Helper()
	var text string
	deadline := time.Now().Add(d)
	buf := make([]byte, 8192)
	for {
		all := true
		for _, re := range want {
			all = all && re.MatchString(text)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: events did not show %q within %v; read:\n%s", where, want, d, text)
		}
		c.nc.SetDeadline(time.Now().Add(8 * time.Second))
		n, err := fid.Read(buf)
		c.nc.SetDeadline(time.Time{})
		text += string(buf[:n])
		if err != nil && n == 0 && !errors.Is(err, io.EOF) {
			t.Fatalf("%s: read events: %v (read so far: %q)", where, err, text)
		}
	}
}

// ---- 2. the gossip key keeps other nodes out

func TestE2E_Cluster_GossipKey(t *testing.T) {
	t.Parallel()
	keyEnv := &env{config: t.TempDir()}
	key := strings.TrimSpace(runCLI(t, keyEnv, "", "keygen"))
	otherKey := strings.TrimSpace(runCLI(t, keyEnv, "", "keygen"))

	k1 := newCnode(t, "k1")
	k1.addTool(t, "keyed_tool", "A tool of the keyed cluster.")
	k1.flags = []string{"-encrypt", key}
	k2 := newCnode(t, "k2").joining(k1)
	k2.flags = append(k2.flags, "-encrypt", key)
	k1.start(t)
	k2.launch(t)
	waitFormed(t, 30*time.Second, k1, k2)
	if got := mustAsk9(t, k2, "session/new", "name=keyed"); got != "keyed\n" {
		t.Fatalf("k2: session/new = %q", got)
	}

	// Two intruders that know the way in but not the key.
	// Their own operators let anything on their hosts in (-9p-anon
	// admin): they hold no token of the keyed cluster.
	bare := newCnode(t, "nokey").joining(k1)
	bare.flags = append(bare.flags, "-9p-anon", "admin")
	wrong := newCnode(t, "wrongkey").joining(k1)
	wrong.flags = append(wrong.flags, "-encrypt", otherKey, "-9p-anon", "admin")
	intruders := []*cnode{bare, wrong}
	for _, n := range intruders {
		n.e.tokenless = true
		n.launch(t)
	}

	// The keyed cluster never lists them.
	watchUntil := time.Now().Add(4 * time.Second)
	for time.Now().Before(watchUntil) {
		for _, n := range []*cnode{k1, k2} {
			m, text, err := members9(n)
			if err != nil {
				t.Fatalf("%s: cluster/members: %v", n.name, err)
			}
			if len(m) != 2 || m["k1"].state != "alive" || m["k2"].state != "alive" {
				t.Fatalf("%s: cluster/members with intruders about:\n%s\nwant only k1 and k2, alive", n.name, text)
			}
		}
		time.Sleep(100 * time.Millisecond) // a window watched on purpose: no intruder may show up in it
	}
	if l := k1.p.log.String(); !strings.Contains(l, "decrypt") && !strings.Contains(l, "not encrypted") {
		t.Errorf("k1's log does not say it refused gossip it could not decrypt:\n%s", l)
	}

	// What became of each intruder: it either failed to start, saying
	// the join failed, or runs alone.
	for _, n := range intruders {
		t.Run(n.name, func(t *testing.T) {
			var exited bool
			pollUntil(t, 30*time.Second, n.name+" to exit or serve 9P", func() (bool, string) {
				if !n.running() {
					exited = true
					return true, ""
				}
				_, err := read9(n.e.p9, "node")
				return err == nil, fmt.Sprint(err)
			})
			if !exited {
				m, text, err := members9(n)
				if err != nil || len(m) != 1 || m[n.name].state != "alive" {
					t.Errorf("%s runs; its cluster/members = %q (%v), want only itself", n.name, text, err)
				}
				t.Logf("%s runs alone", n.name)
				return
			}
			log := n.p.log.String()
			code := n.p.cmd.ProcessState.ExitCode()
			t.Logf("%s exited with status %d", n.name, code)
			if code == 0 {
				t.Errorf("%s exited with status 0 after a failed join:\n%s", n.name, log)
			}
			if strings.Contains(log, "panic:") {
				t.Errorf("%s's failed start panics instead of exiting with the join error:\n%s", n.name, log)
			}
			switch {
			case n == bare:
				// Without a key it does not even try: a cluster of
				// several needs a credential.
				if !strings.Contains(log, "needs a credential") || !strings.Contains(log, "-encrypt") {
					t.Errorf("%s's log does not say a cluster needs -encrypt:\n%s", n.name, log)
				}
			case !strings.Contains(log, "join "+k1.e.gossip):
				t.Errorf("%s's log does not say the join through %s failed:\n%s", n.name, k1.e.gossip, log)
			}
		})
	}
	// The keyed cluster still works.
	waitFormed(t, 10*time.Second, k1, k2)
	if got := mustRead9(t, k1, "session/idx"); !slices.Contains(lines(got), "keyed") {
		t.Errorf("k1: session/idx = %q, want keyed", got)
	}
}

// ---- 3. mutual TLS on the cluster port

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue makes a node certificate for both ends of a TLS connection
// (serverAuth and clientAuth) and writes it and its key into dir.
func (ca *testCA) issue(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{cn, "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func serialNumber(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t *testing.T, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withTLS gives the member a certificate from ca and makes its cluster
// port mutual TLS against ca.
func (n *cnode) withTLS(t *testing.T, ca *testCA) *cnode {
	t.Helper()
	cert, key := ca.issue(t, n.e.root, n.name)
	n.flags = append(n.flags, "-tls-cert", cert, "-tls-key", key, "-tls-ca", ca.file)
	return n
}

func TestE2E_Cluster_TLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "toolnode e2e CA")
	otherCA := newTestCA(t, "another CA")
	t1 := newCnode(t, "t1").withTLS(t, ca)
	t1.addTool(t, "tls_tool", "A tool of the TLS cluster.")
	t2 := newCnode(t, "t2").joining(t1).withTLS(t, ca)
	t3 := newCnode(t, "t3").joining(t1).withTLS(t, ca)
	good := []*cnode{t1, t2, t3}
	t1.start(t)
	t2.launch(t)
	t3.launch(t)
	leaderName, took := waitFormed(t, 30*time.Second, good...)
	t.Logf("three nodes with certificates from one CA formed a cluster in %v; leader %s", took.Round(time.Millisecond), leaderName)

	// A write through a follower replicates to the others.
	fs := others(good, byName(good, leaderName))
	if got := mustAsk9(t, fs[0], "session/new", "name=secure"); got != "secure\n" {
		t.Fatalf("%s: session/new = %q", fs[0].name, got)
	}
	mustAsk9(t, fs[0], "session/secure/agent/new", "name=A")
	mustAsk9(t, fs[0], "session/secure/agent/A/ctl", "tool_load tls_tool")
	for _, n := range good {
		pollUntil(t, 10*time.Second, n.name+" to show the write made through "+fs[0].name, func() (bool, string) {
			s, err := read9(n.e.p9, "session/secure/agent/A/toolsrv.loaded")
			return s == "tls_tool\n", fmt.Sprint(s, err)
		})
	}

	// A node whose certificate comes from another CA gossips (gossip has
	// no key here) but is never made a Raft member.
	// Its operator lets anything on its host in (-9p-anon admin): it
	// holds no token of the cluster.
	rogue := newCnode(t, "rogue").joining(t1).withTLS(t, otherCA)
	rogue.flags = append(rogue.flags, "-9p-anon", "admin")
	rogue.e.tokenless = true
	rogue.launch(t)
	// It finds no leader: it serves 9P only after waiting for one, and
	// a write waits for one too; that runs while the rest is checked.
	type attempt struct {
		info  string // its node file
		err   error  // the write's
		took  time.Duration
		stuck error // it never served 9P
	}
	rogueWrite := make(chan attempt, 1)
	go func() {
		deadline := time.Now().Add(40 * time.Second)
		var a attempt
		for {
			if a.info, a.stuck = read9(rogue.e.p9, "node"); a.stuck == nil || time.Now().After(deadline) || !rogue.running() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if a.stuck == nil {
			start := time.Now()
			_, a.err = ask9(rogue.e.p9, "session/new", "name=intruder", 30*time.Second)
			a.took = time.Since(start)
		}
		rogueWrite <- a
	}()

	pollUntil(t, 20*time.Second, "the cluster to list rogue as alive by gossip", func() (bool, string) {
		m, text, err := members9(t1)
		return err == nil && m["rogue"].state == "alive", fmt.Sprint(text, err)
	})
	t.Run("rogue_not_in_raft", func(t *testing.T) {
		watchUntil := time.Now().Add(5 * time.Second)
		for time.Now().Before(watchUntil) {
			for _, n := range good {
				m, text, err := members9(n)
				if err != nil {
					t.Fatalf("%s: cluster/members: %v", n.name, err)
				}
				if r := m["rogue"].role; r != "" && r != "client" {
					t.Fatalf("the leader gave a node whose certificate the cluster refuses a place in Raft (%s); "+
						"%s's cluster/members:\n%s", r, n.name, text)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The refusal is in the logs: a TLS handshake between rogue and the
	// others fails, on one side or the other.
	refusal := regexp.MustCompile(`tls: |certificate signed by unknown authority|does not verify against the cluster CA`)
	pollUntil(t, 20*time.Second, "a log to show the TLS refusal between rogue and the cluster", func() (bool, string) {
		for _, n := range append(others(good), rogue) {
			for _, l := range lines(n.p.log.String()) {
				if refusal.MatchString(l) {
					t.Logf("%s: %s", n.name, l)
					return true, ""
				}
			}
		}
		return false, "no TLS refusal in any log"
	})

	// Its writes fail: it reaches no leader, and the cluster never sees them.
	var a attempt
	select {
	case a = <-rogueWrite:
	case <-time.After(90 * time.Second):
		t.Fatal("rogue's write neither returned nor failed within 90s")
	}
	if a.stuck != nil {
		t.Fatalf("rogue does not serve 9P: %v", a.stuck)
	}
	if r, l := nodeField(a.info, "role"), nodeField(a.info, "leader"); r != "client" || l != "none" {
		t.Errorf("rogue: node says role %q, leader %q; want client and none", r, l)
	}
	if a.err == nil {
		t.Fatal("rogue: session/new succeeded; want a failure (it can reach no leader)")
	}
	t.Logf("rogue's write failed after %v: %v", a.took.Round(time.Millisecond), a.err)
	if !strings.Contains(a.err.Error(), "leader") {
		t.Errorf("rogue's write failed with %q, want it to say there is no leader", a.err)
	}
	for _, n := range good {
		if s := mustRead9(t, n, "session/idx"); slices.Contains(lines(s), "intruder") {
			t.Errorf("%s lists the session rogue tried to make: %q", n.name, s)
		}
	}
	// The good cluster still takes writes.
	mustAsk9(t, fs[1], "session/secure/agent/A/ctl", "tool_unload tls_tool")
}

// ---- 4. linearizability under leader kills (porcupine)

// Every client loads and unloads tools of its own on one shared agent,
// through its own 9P connection to its own node, and reads the agent's
// loaded set on that node right after each acknowledged write. Reads are
// served from the node's own state, so a read may miss another client's
// write; what the design promises, and what is checked, is that a client
// reads its own acknowledged writes back from the node it wrote through
// and that no acknowledged write is lost. Each client's tools are its
// own, so the history is partitioned by client and each partition must
// be linearizable; a final read of the converged state on every node
// closes each partition.

const (
	lzClients = 3
	lzTools   = 3 // per client
	lzAgent   = "session/lz/agent/A/"
)

func lzTool(client, k int) string { return fmt.Sprintf("lz%d_%d", client, k) }

type lzInput struct {
	client int
	op     string // load, unload, read
	tool   int
}

type lzResult int

const (
	lzOK        lzResult = iota
	lzNotLoaded          // unload of a tool the agent does not have
	lzUnknown            // may or may not have been applied
	lzFailed             // certainly not applied: left out of the history
)

type lzOutput struct {
	res lzResult
	set uint8 // read: the client's tools loaded, one bit each
}

var lzModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		parts := make([][]porcupine.Operation, lzClients)
		for _, op := range h {
			c := op.Input.(lzInput).client
			parts[c] = append(parts[c], op)
		}
		return parts
	},
	Init: func() any { return uint8(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(uint8), input.(lzInput), output.(lzOutput)
		bit := uint8(1) << in.tool
		switch in.op {
		case "read":
			return out.set == s, s
		case "load":
			return out.res == lzOK || out.res == lzUnknown, s | bit
		case "unload":
			switch out.res {
			case lzOK:
				return s&bit != 0, s &^ bit
			case lzNotLoaded:
				return s&bit == 0, s
			case lzUnknown:
				return true, s &^ bit
			}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(lzInput), output.(lzOutput)
		if in.op == "read" {
			return fmt.Sprintf("c%d read -> %03b", in.client, out.set)
		}
		return fmt.Sprintf("c%d %s %s -> %v", in.client, in.op, lzTool(in.client, in.tool), out.res)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%03b", state.(uint8)) },
}

func (r lzResult) String() string {
	return [...]string{"ok", "not loaded", "unknown", "failed"}[r]
}

// lzClassify says what a write's error means for the model.
func lzClassify(err error) (lzResult, bool) {
	if err == nil {
		return lzOK, true
	}
	var e client.Error
	if !errors.As(err, &e) {
		return lzUnknown, false // the connection failed: no answer
	}
	msg := string(e)
	switch {
	case strings.Contains(msg, "is not loaded by agent"):
		return lzNotLoaded, true
	case strings.Contains(msg, "may or may not"), strings.Contains(msg, "not caught up"):
		return lzUnknown, true
	case strings.Contains(msg, "has no leader"):
		return lzFailed, true
	}
	return lzUnknown, true
}

type lzClient struct {
	id    int
	nodes []*cnode
	base  time.Time
	rnd   *mrand.Rand

	conn    *conn9
	on      string // the node conn is to
	ops     []porcupine.Operation
	longest time.Duration // the slowest write, answered or not
	counts  map[string]int
	answers map[string]int // the error texts seen, for the log
}

func (c *lzClient) now() int64 { return int64(time.Since(c.base)) }

// connect dials the client's own node, or, while it is down, the next.
func (c *lzClient) connect(stop <-chan struct{}) bool {
	for i := 0; ; i++ {
		n := c.nodes[(c.id+i)%len(c.nodes)]
		if conn, err := dial9(n.e.p9, time.Second); err == nil {
			c.conn, c.on = conn, n.name
			c.counts["connect "+n.name]++
			return true
		}
		select {
		case <-stop:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *lzClient) drop() {
	if c.conn != nil {
		c.conn.close()
		c.conn = nil
	}
}

func (c *lzClient) run(stop <-chan struct{}) {
	defer c.drop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if c.conn == nil && !c.connect(stop) {
			return
		}
		in := lzInput{client: c.id, op: "load", tool: c.rnd.IntN(lzTools)}
		if c.rnd.IntN(2) == 0 {
			in.op = "unload"
		}
		call := c.now()
		_, err := c.conn.ask(lzAgent+"ctl", "tool_"+in.op+" "+lzTool(c.id, in.tool), 15*time.Second)
		ret := c.now()
		c.longest = max(c.longest, time.Duration(ret-call))
		res, answered := lzClassify(err)
		c.counts[res.String()]++
		if err != nil {
			c.answers[err.Error()]++
		}
		switch res {
		case lzFailed:
		case lzUnknown:
			c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: lzOutput{res: res}, Return: math.MaxInt64})
		default:
			c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: lzOutput{res: res}, Return: ret})
		}
		if !answered {
			c.drop()
		} else if res == lzOK {
			// Read the write back on the node it went through.
			call := c.now()
			s, err := c.conn.read(lzAgent+"toolsrv.loaded", 5*time.Second)
			ret := c.now()
			if err != nil {
				c.counts["read failed"]++
				c.answers["read: "+err.Error()]++
				c.drop()
			} else {
				c.counts["read"]++
				c.ops = append(c.ops, porcupine.Operation{ClientId: c.id, Input: lzInput{client: c.id, op: "read"},
					Call: call, Output: lzOutput{set: lzSet(c.id, s)}, Return: ret})
			}
		}
		time.Sleep(time.Duration(40+c.rnd.IntN(40)) * time.Millisecond) // pacing the client's load
	}
}

// lzSet is the client's tools in a toolsrv.loaded text.
func lzSet(client int, loaded string) uint8 {
	var set uint8
	for _, l := range lines(loaded) {
		for k := range lzTools {
			if l == lzTool(client, k) {
				set |= 1 << k
			}
		}
	}
	return set
}

// currentLeader polls the running nodes until they agree on a leader.
func currentLeader(t *testing.T, nodes []*cnode) *cnode {
	t.Helper()
	var leader *cnode
	pollUntil(t, 20*time.Second, "the running nodes to agree on a leader", func() (bool, string) {
		var state []string
		name := ""
		for _, n := range nodes {
			if !n.running() {
				continue
			}
			info, err := read9(n.e.p9, "node")
			l := nodeField(info, "leader")
			state = append(state, fmt.Sprintf("%s: leader %q (%v)", n.name, l, err))
			if err != nil || l == "" || l == "none" || (name != "" && l != name) {
				return false, strings.Join(state, "\n")
			}
			name = l
		}
		leader = byName(nodes, name)
		return leader != nil && leader.running(), strings.Join(state, "\n")
	})
	return leader
}

func TestE2E_Cluster_Linearizable(t *testing.T) {
	t.Parallel()
	nodes := startLzCluster(t, "l")

	base := time.Now()
	clients, halt := startLzClients(nodes, base)
	defer halt()

	// Kill the leader twice, bringing it back each time. The sleeps are
	// windows of the clients' load on purpose: before a kill, while the
	// leader is down, after its return.
	time.Sleep(1500 * time.Millisecond)
	for round := 1; round <= 2; round++ {
		leader := currentLeader(t, nodes)
		leader.kill(t)
		t.Logf("round %d: killed the leader %s at %v", round, leader.name, time.Since(base).Round(time.Millisecond))
		time.Sleep(2500 * time.Millisecond)
		restart := time.Now()
		leader.launch(t)
		leader.waitServing(t, 40*time.Second)
		serving := time.Since(restart)
		waitFormed(t, 40*time.Second, nodes...)
		t.Logf("round %d: %s restarted: serving 9P after %v, a voter again after %v", round, leader.name,
			serving.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
		time.Sleep(time.Second)
	}
	halt()
	checkLinearizable(t, nodes, clients, base)
}

// checkLinearizable waits until every node shows the same loaded set and
// revision of the lz agent, then checks the clients' history, closed by
// a read of that final set, with porcupine.
func checkLinearizable(t *testing.T, nodes []*cnode, clients []*lzClient, base time.Time) {
	t.Helper()
	// Every node converges on one loaded set and revision.
	var final string
	pollUntil(t, 20*time.Second, "every node to show the same loaded set and revision", func() (bool, string) {
		var state []string
		var first string
		for i, n := range nodes {
			l, err := read9(n.e.p9, lzAgent+"toolsrv.loaded")
			r, err2 := read9(n.e.p9, lzAgent+"toolsrv.rev")
			s := fmt.Sprintf("loaded %q rev %q", l, r)
			state = append(state, fmt.Sprintf("%s: %s (%v %v)", n.name, s, err, err2))
			if err != nil || err2 != nil || (i > 0 && s != first) {
				return false, strings.Join(state, "\n")
			}
			first, final = s, l
		}
		return true, ""
	})
	end := int64(time.Since(base))
	var history []porcupine.Operation
	for _, c := range clients {
		history = append(history, c.ops...)
		history = append(history, porcupine.Operation{ClientId: c.id, Input: lzInput{client: c.id, op: "read"},
			Call: end, Output: lzOutput{set: lzSet(c.id, final)}, Return: end})
		t.Logf("client %d: %d operations; %v", c.id, len(c.ops), c.counts)
		for msg, k := range c.answers {
			t.Logf("client %d: %d× %s", c.id, k, msg)
		}
		if c.counts["ok"] < 10 {
			t.Errorf("client %d had only %d writes acknowledged; the test wants at least 10", c.id, c.counts["ok"])
		}
	}
	start := time.Now()
	res, _ := porcupine.CheckOperationsVerbose(lzModel, history, 30*time.Second)
	t.Logf("FIGURE porcupine checked %d operations in %v: %v", len(history), time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		for _, op := range history {
			ret := "∞"
			if op.Return != math.MaxInt64 {
				ret = time.Duration(op.Return).String()
			}
			t.Logf("%v..%s %s", time.Duration(op.Call), ret, lzModel.DescribeOperation(op.Input, op.Output))
		}
		t.Fatalf("the history is not linearizable (%v): an acknowledged write was lost or a read on the writer's node was stale", res)
	}
}

// startLzClients starts lzClients clients writing through nodes, their
// history timed from base. halt stops them and waits until every one has
// returned; it may be called more than once.
func startLzClients(nodes []*cnode, base time.Time) (clients []*lzClient, halt func()) {
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	clients = make([]*lzClient, lzClients)
	for i := range clients {
		clients[i] = &lzClient{id: i, nodes: nodes, base: base, rnd: mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(i))),
			counts: map[string]int{}, answers: map[string]int{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[i].run(stop)
		}()
	}
	return clients, func() {
		stopOnce.Do(func() { close(stop) })
		wg.Wait()
	}
}

// startLzCluster starts three nodes, PREFIX1 (which publishes the lz
// tools) and two that join it, makes agent A of session lz, and waits
// until every node knows the agent and every tool.
func startLzCluster(t *testing.T, prefix string) []*cnode {
	t.Helper()
	n1 := newCnode(t, prefix+"1")
	for c := range lzClients {
		for k := range lzTools {
			n1.addTool(t, lzTool(c, k), "A tool of the linearizability tests.")
		}
	}
	n2 := newCnode(t, prefix+"2").joining(n1)
	n3 := newCnode(t, prefix+"3").joining(n1)
	nodes := []*cnode{n1, n2, n3}
	n1.start(t)
	n2.launch(t)
	n3.launch(t)
	waitFormed(t, 30*time.Second, nodes...)
	mustAsk9(t, n1, "session/new", "name=lz")
	mustAsk9(t, n1, "session/lz/agent/new", "name=A")
	for _, n := range nodes {
		pollUntil(t, 10*time.Second, n.name+" to know agent A and every test tool", func() (bool, string) {
			_, err := read9(n.e.p9, lzAgent+"toolsrv.rev")
			for c := range lzClients {
				for k := range lzTools {
					if err == nil {
						_, err = read9(n.e.p9, "t/"+lzTool(c, k)+".meta")
					}
				}
			}
			return err == nil, fmt.Sprint(err)
		})
	}
	return nodes
}
