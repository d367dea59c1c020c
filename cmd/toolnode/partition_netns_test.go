//go:build linux

// The partition test: five real nodes, each in a network namespace of its
// own, joined by a bridge in one more namespace; a client namespace on the
// same bridge is where the test's 9P connections come from. The leader is
// cut off (its bridge port set down) for a minute, then healed, while
// clients write throughout; gossip and Raft must agree again within
// healWithin, and the whole history must be linearizable. A second test
// cuts one server off from the others alone (blackhole routes), with a
// client that still reaches it. Both need root
// and ip(8), and touch nothing outside the namespaces they make (a
// private 10.213.X.0/24 lives only inside them).

package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"golang.org/x/sys/unix"
)

// nsDial maps a host IP to the network namespace the test dials it from.
var nsDial sync.Map

// dialTest dials addr over TCP: from the namespace registered for its
// host, if any, else from the test's own.
func dialTest(addr string, d time.Duration) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	ns, ok := nsDial.Load(host)
	if !ok {
		return net.DialTimeout("tcp", addr, d)
	}
	var nc net.Conn
	err := inNetns(ns.(string), func() error {
		var err error
		nc, err = net.DialTimeout("tcp", addr, d)
		return err
	})
	return nc, err
}

// inNetns runs f on an OS thread that has joined the named network
// namespace; a socket made there stays in it after the thread leaves.
func inNetns(name string, f func() error) error {
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", name, err)
	}
	err = f()
	if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
		runtime.UnlockOSThread()
	} // else the thread stays locked and dies with this goroutine
	return err
}

// netLab is the namespaces of one test.
type netLab struct {
	t      *testing.T
	prefix string // of every namespace and link name
	subnet string // "10.213.X."
	bridge string // the namespace holding the bridge
	client string // the namespace the test dials from
	// environ is the nodes' environment, with the cluster's gossip key
	// (newMembers).
	environ []string
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newNetLab makes the bridge and client namespaces; they and every host
// added are deleted when the test ends, even if it fails.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the partition test makes network namespaces: it needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("the partition test needs ip(8): ", err)
	}
	var b [3]byte
	rand.Read(b[:])
	l := &netLab{t: t, prefix: "tn" + hex.EncodeToString(b[:]), subnet: fmt.Sprintf("10.213.%d.", 1+mrand.IntN(254))}
	l.bridge = l.newNS("br")
	ipCmd(t, "-n", l.bridge, "link", "add", "br0", "type", "bridge")
	ipCmd(t, "-n", l.bridge, "link", "set", "br0", "up")
	l.client = l.addHost("c", 2)
	return l
}

func (l *netLab) newNS(suffix string) string {
	name := l.prefix + suffix
	ipCmd(l.t, "netns", "add", name)
	l.t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// addHost makes a namespace wired to the bridge with address subnet.host
// and returns its name.
func (l *netLab) addHost(suffix string, host int) string {
	ns := l.newNS(suffix)
	port := l.port(suffix)
	ipCmd(l.t, "-n", l.bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	ipCmd(l.t, "-n", l.bridge, "link", "set", port, "master", "br0", "up")
	ipCmd(l.t, "-n", ns, "addr", "add", l.subnet+strconv.Itoa(host)+"/24", "dev", "eth0")
	ipCmd(l.t, "-n", ns, "link", "set", "eth0", "up")
	ipCmd(l.t, "-n", ns, "link", "set", "lo", "up")
	return ns
}

// port is the bridge-side end of a host's link.
func (l *netLab) port(suffix string) string { return "p" + suffix }

// cut sets a host's bridge port down or up.
func (l *netLab) cut(suffix string, down bool) {
	state := "up"
	if down {
		state = "down"
	}
	ipCmd(l.t, "-n", l.bridge, "link", "set", l.port(suffix), state)
}

// newMembers makes the nodes n1…nN, on hosts .11 on, each joining n1,
// with a new gossip key for the cluster and the flags every partition
// test's node takes, then extra.
func (l *netLab) newMembers(n int, extra ...string) []*nsNode {
	var key [32]byte
	rand.Read(key[:])
	l.environ = append(newEnvNoFiles(), "TOOLNODE_GOSSIP_KEY="+base64.StdEncoding.EncodeToString(key[:]))
	common := []string{"-9p-anon", "admin"}
	if help, _ := exec.Command(binPath, "serve", "-h").CombinedOutput(); strings.Contains(string(help), "-insecure") {
		common = append(common, "-insecure") // 9P on a non-loopback address, test only
	}
	var hosts []*nsNode
	for i := 1; i <= n; i++ {
		h := l.newNode("n"+strconv.Itoa(i), 10+i)
		h.flags = append(append(h.flags, common...), extra...)
		if i > 1 {
			h.flags = append(h.flags, "-join", hosts[0].e.gossip)
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// launch starts a member made by newMembers.
func (l *netLab) launch(n *nsNode) {
	l.t.Helper()
	n.launch(l.t, append(slices.Clip(l.environ), "XDG_CONFIG_HOME="+n.e.config))
}

// nsNode is a cluster member on a host of its own.
type nsNode struct {
	*cnode
	ns, suffix string
}

func (l *netLab) newNode(name string, host int) *nsNode {
	t := l.t
	ns := l.addHost(name, host)
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
	ip := l.subnet + strconv.Itoa(host)
	e.p9, e.gossip, e.cluster = ip+":9564", ip+":7946", ip+":9565"
	nsDial.Store(ip, l.client)
	t.Cleanup(func() { nsDial.Delete(ip) })
	return &nsNode{cnode: &cnode{name: name, e: e}, ns: ns, suffix: name}
}

// launch starts the node inside its namespace (ip netns exec execs it, so
// the process is the node itself).
func (n *nsNode) launch(t *testing.T, environ []string) {
	t.Helper()
	e := n.e
	args := []string{"netns", "exec", n.ns, binPath, "-name", n.name, "-data", e.data, "-tools", e.tools, "-agents", e.agents,
		"-9p", e.p9, "-gossip", e.gossip, "-cluster", e.cluster}
	n.p = startCmd(t, n.name, exec.Command("ip", append(args, n.flags...)...), environ)
}

// gossipAgrees reports whether every node lists every node alive.
func gossipAgrees(nodes []*cnode) (bool, string) {
	var b strings.Builder
	ok := true
	for _, n := range nodes {
		m, text, err := members9(n)
		fmt.Fprintf(&b, "%s: %v\n%s", n.name, err, text)
		if err != nil || len(m) != len(nodes) {
			ok = false
			continue
		}
		for _, o := range nodes {
			if m[o.name].state != "alive" {
				ok = false
			}
		}
	}
	return ok, b.String()
}

// healWithin is how soon after the network heals gossip and Raft must
// agree again (issue 10).
const healWithin = 5 * time.Second

// TestE2E_Partition_LeaderCutOff cuts the leader off for a minute
// (TOOLNODE_PARTITION_SECONDS overrides) while clients write through
// every node, heals the network, and checks that gossip and Raft agree
// within healWithin, that no write outlived its timeout, and that the
// history is linearizable. TOOLNODE_PARTITION_CONTROL=1 runs the control:
// the nodes never try failed members again (-reconnect-timeout 0), and
// the test then expects gossip NOT to heal within 20 s.
func TestE2E_Partition_LeaderCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute-long partition")
	}
	lab := newNetLab(t)
	control := os.Getenv("TOOLNODE_PARTITION_CONTROL") == "1"
	cutFor := 60 * time.Second
	if s := os.Getenv("TOOLNODE_PARTITION_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("TOOLNODE_PARTITION_SECONDS=%q: want a number of seconds", s)
		}
		cutFor = time.Duration(n) * time.Second
	}
	var extra []string
	if control {
		extra = []string{"-reconnect-timeout", "0"}
	}
	hosts := lab.newMembers(5, extra...)
	var nodes []*cnode
	for _, n := range hosts {
		nodes = append(nodes, n.cnode)
	}
	for c := range lzClients {
		for k := range lzTools {
			hosts[0].addTool(t, lzTool(c, k), "A tool of the partition test.")
		}
	}
	for i, n := range hosts {
		lab.launch(n)
		if i == 0 {
			n.waitServing(t, 60*time.Second) // the others join it
		}
	}
	_, formed := waitFormed(t, 60*time.Second, nodes...)
	t.Logf("five nodes formed one cluster in %v", formed.Round(time.Millisecond))
	mustAsk9(t, nodes[0], "session/new", "name=lz")
	mustAsk9(t, nodes[0], "session/lz/agent/new", "name=A")
	for _, n := range nodes {
		pollUntil(t, 20*time.Second, n.name+" to know agent A and every test tool", func() (bool, string) {
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

	base := time.Now()
	clients, halt := startLzClients(nodes, base)
	defer halt()

	time.Sleep(2 * time.Second) // writes on a whole cluster, on purpose, before the cut
	leader := currentLeader(t, nodes)
	var cut *nsNode
	for _, h := range hosts {
		if h.cnode == leader {
			cut = h
		}
	}
	lab.cut(cut.suffix, true)
	t.Logf("cut the leader %s off at %v for %v", cut.name, time.Since(base).Round(time.Millisecond), cutFor)
	rest := others(nodes, leader)
	// The majority elects a leader of its own and lists the cut-off node dead.
	pollUntil(t, 30*time.Second, "the majority to elect a new leader", func() (bool, string) {
		l := currentLeaderNow(rest)
		return l != "" && l != leader.name, "leader " + l
	})
	time.Sleep(time.Until(base.Add(2*time.Second + cutFor))) // the cut lasts cutFor on purpose
	lab.cut(cut.suffix, false)
	healed := time.Now()
	t.Logf("healed at %v", time.Since(base).Round(time.Millisecond))

	if control {
		deadline := healed.Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if ok, state := gossipAgrees(nodes); ok {
				t.Fatalf("control: gossip healed %v after the network without reconnecting; the control shows nothing:\n%s",
					time.Since(healed).Round(time.Millisecond), state)
			}
			time.Sleep(200 * time.Millisecond) // the control watches a window in which nothing may heal
		}
		t.Logf("FIGURE control: gossip has not healed %v after the network (reconnecting off)", time.Since(healed).Round(time.Second))
		return
	}

	var gossipAt, raftAt time.Duration
	for gossipAt == 0 || raftAt == 0 {
		if gossipAt == 0 {
			if ok, _ := gossipAgrees(nodes); ok {
				gossipAt = time.Since(healed)
			}
		}
		if raftAt == 0 {
			if ok, _, _ := clusterFormed(nodes); ok {
				raftAt = time.Since(healed)
			}
		}
		if time.Since(healed) > 60*time.Second {
			ok1, s1 := gossipAgrees(nodes)
			ok2, _, s2 := clusterFormed(nodes)
			t.Fatalf("not healed 60 s after the network (gossip %v, raft %v):\n%s\n%s", ok1, ok2, s1, s2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("FIGURE heal: gossip agrees %v and Raft %v after the network healed", gossipAt.Round(time.Millisecond), raftAt.Round(time.Millisecond))
	if gossipAt > healWithin || raftAt > healWithin {
		t.Errorf("gossip agreed %v and Raft %v after the heal; want both within %v", gossipAt, raftAt, healWithin)
	}
	time.Sleep(2 * time.Second) // writes after the heal, on purpose, before the check
	halt()

	var final string
	pollUntil(t, 30*time.Second, "every node to show the same loaded set and revision", func() (bool, string) {
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
		t.Logf("client %d: %d operations, slowest write %v; %v", c.id, len(c.ops), c.longest.Round(time.Millisecond), c.counts)
		for msg, k := range c.answers {
			t.Logf("client %d: %d× %s", c.id, k, msg)
		}
		// Each write has a 15 s deadline; a little over it is the client
		// noticing. Past that, a write hung.
		if c.longest > 17*time.Second {
			t.Errorf("client %d: a write took %v, past its 15 s timeout", c.id, c.longest)
		}
		if c.counts["ok"] < 10 {
			t.Errorf("client %d had only %d writes acknowledged; the test wants at least 10", c.id, c.counts["ok"])
		}
	}
	res, _ := porcupine.CheckOperationsVerbose(lzModel, history, 30*time.Second)
	t.Logf("porcupine checked %d operations: %v", len(history), res)
	if res != porcupine.Ok {
		for _, op := range history {
			ret := "∞"
			if op.Return != math.MaxInt64 {
				ret = time.Duration(op.Return).String()
			}
			t.Logf("%v..%s %s", time.Duration(op.Call), ret, lzModel.DescribeOperation(op.Input, op.Output))
		}
		t.Fatalf("the history is not linearizable (%v): an acknowledged write was lost across the partition", res)
	}
}

// currentLeaderNow is the leader every one of nodes names, or "".
func currentLeaderNow(nodes []*cnode) string {
	name := ""
	for _, n := range nodes {
		info, err := read9(n.e.p9, "node")
		l := nodeField(info, "leader")
		if err != nil || l == "" || l == "none" || (name != "" && l != name) {
			return ""
		}
		name = l
	}
	return name
}

// newEnvNoFiles is the child environment of the e2e tests without
// XDG_CONFIG_HOME, which each node sets to its own.
func newEnvNoFiles() []string {
	var out []string
	for _, kv := range (&env{}).childEnv() {
		if !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			out = append(out, kv)
		}
	}
	return out
}

// blackhole drops, inside host's namespace, what it sends to the others'
// addresses (or, with drop false, lets it through again): with the
// same done on each of the others, a cut between those hosts alone, the
// bridge and every other host unaffected.
func (l *netLab) blackhole(host *nsNode, drop bool, others ...*nsNode) {
	verb := "add"
	if !drop {
		verb = "del"
	}
	for _, o := range others {
		ip, _, _ := net.SplitHostPort(o.e.cluster)
		ipCmd(l.t, "-n", host.ns, "route", verb, "blackhole", ip+"/32")
	}
}

// A partial partition: the server a client follows is cut off from the
// other servers, and the client still reaches it. That server has no
// leader and gets nothing new; the client moves to a server that does,
// and reads a write made through the leader during the cut. After the
// network heals, the cut-off server has the write too.
func TestE2E_Partition_ClientLeavesServerCutOffFromLeader(t *testing.T) {
	lab := newNetLab(t)
	hosts := lab.newMembers(4, "-voters", "3")
	servers := []*cnode{hosts[0].cnode, hosts[1].cnode, hosts[2].cnode}
	for i, n := range hosts {
		if i == 3 { // the client, once the three servers are in Raft
			waitFormed(t, 60*time.Second, servers...)
		}
		lab.launch(n)
		if i == 0 {
			n.waitServing(t, 60*time.Second)
		}
	}
	client := hosts[3]
	line := client.p.waitLog(t, 30*time.Second, "stream: following server")
	var followed *nsNode
	for _, h := range hosts[:3] {
		if strings.Contains(line, " "+h.e.cluster+" ") {
			followed = h
		}
	}
	if followed == nil {
		t.Fatalf("the client follows none of the servers: %s", line)
	}
	mustAsk9(t, servers[0], "session/new", "name=before")
	pollUntil(t, 20*time.Second, "the client to read the write before the cut", func() (bool, string) {
		s, err := read9(client.e.p9, "session/idx")
		return err == nil && strings.Contains(s, "before"), fmt.Sprint(s, err)
	})

	rest := []*nsNode{}
	for _, h := range hosts[:3] {
		if h != followed {
			rest = append(rest, h)
		}
	}
	lab.blackhole(followed, true, rest...)
	for _, h := range rest {
		lab.blackhole(h, true, followed)
	}
	cut := time.Now()
	t.Logf("cut %s (the server %s follows) off from %s and %s", followed.name, client.name, rest[0].name, rest[1].name)
	var leader *cnode
	pollUntil(t, 30*time.Second, "a leader on the majority side", func() (bool, string) {
		l := currentLeaderNow([]*cnode{rest[0].cnode, rest[1].cnode})
		if leader = byName(servers, l); l == followed.name {
			leader = nil // not yet seen gone
		}
		return leader != nil, "leader " + l
	})
	mustAsk9(t, leader, "session/new", "name=during")
	took := pollUntil(t, 30*time.Second, "the client to read the write made during the cut", func() (bool, string) {
		s, err := read9(client.e.p9, "session/idx")
		return err == nil && strings.Contains(s, "during"), fmt.Sprint(s, err)
	})
	t.Logf("FIGURE the client read the write %v after it was made (%v after the cut)", took.Round(time.Millisecond), time.Since(cut).Round(time.Millisecond))
	client.p.waitLog(t, 5*time.Second, "left server "+followed.e.cluster, "no leader")

	lab.blackhole(followed, false, rest...)
	for _, h := range rest {
		lab.blackhole(h, false, followed)
	}
	pollUntil(t, 30*time.Second, followed.name+" to have the write once healed", func() (bool, string) {
		s, err := read9(followed.e.p9, "session/idx")
		return err == nil && strings.Contains(s, "during"), fmt.Sprint(s, err)
	})
}
