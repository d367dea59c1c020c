package node

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/internal/testcluster"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// Multi-node tests without cluster sockets (STYLE "Tests"): Raft runs over
// raft's InmemTransport, gossip over testcluster.GossipNet, and forwarded writes
// over net.Pipe into the leader's ServeClusterConn. Only the 9P listeners
// are real (loopback, port 0).

// inmemLog is testWriter until the cluster is torn down: a goroutine of a
// stopped node that logs late must not write to a finished test.
type inmemLog struct {
	mu   sync.Mutex
	done bool
	w    testWriter
}

func (l *inmemLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return len(p), nil
	}
	return l.w.Write(p)
}

// inmemCluster runs nodes in this process, connected through the in-memory
// transports, with partitions that Raft and write forwarding respect.
// Gossip is never partitioned, only lost with a crashed node.
type inmemCluster struct {
	t       *testing.T
	root    string
	voters  int // Config.Voters; 0 = the default
	servers int // Config.Servers; 0 = the default (voters)
	gossip  *testcluster.GossipNet
	log     *inmemLog
	// void stands for the far side of a partition: it takes Raft RPCs and
	// never answers, so they time out as over a cut network.
	void *raft.InmemTransport

	mu      sync.Mutex
	members map[string]*inmemMember
	byAddr  map[string]*inmemMember // by raft address
	order   []string                // names, in the order added
	cut     map[[2]string]bool      // partitioned pairs, both ways
	pipes   []inmemPipe             // forwarding connections made by dial

	tweak func(*Config) // changes every node's configuration; nil: none
	// wrap, when set, wraps the dialling end of each cluster-port
	// connection that dial makes.
	wrap func(from, to string, c net.Conn) net.Conn
}

type inmemMember struct {
	name   string
	cfg    Config
	raftTr *raft.InmemTransport
	gossTr *testcluster.GossipTransport
	node   *Node // the running node; nil while it is stopped
	down   bool  // crashed or stopped: unreachable
}

type inmemPipe struct {
	from, to string
	a, b     net.Conn
}

// newInmemCluster starts the named nodes one after the other: the first
// bootstraps, each next one joins it and is in the Raft configuration
// before the next starts. voters is Config.Voters (0: the
// default).
func newInmemCluster(t *testing.T, voters int, names ...string) *inmemCluster {
	t.Helper()
	return newInmemClusterWith(t, voters, nil, names...)
}

// newInmemClusterWith is newInmemCluster with tweak applied to every
// node's configuration.
func newInmemClusterWith(t *testing.T, voters int, tweak func(*Config), names ...string) *inmemCluster {
	t.Helper()
	c := &inmemCluster{
		t: t, root: t.TempDir(), voters: voters, gossip: &testcluster.GossipNet{},
		log:     &inmemLog{w: testWriter{t}},
		members: map[string]*inmemMember{}, byAddr: map[string]*inmemMember{},
		cut: map[[2]string]bool{}, tweak: tweak,
	}
	_, c.void = raft.NewInmemTransport("")
	t.Cleanup(c.closeAll)
	for _, name := range names {
		c.add(name)
	}
	return c
}

// add starts a new node that joins through the first running one (none:
// it bootstraps) and waits until the leader has it in the configuration.
func (c *inmemCluster) add(name string) *Node {
	c.t.Helper()
	n := c.addClient(name)
	if len(n.cfg.Join) > 0 {
		waitFor(c.t, name+" in the raft configuration", 10*time.Second, func() bool {
			l := c.leader()
			if l == nil {
				return false
			}
			_, ok := suffrages(l)[name]
			return ok
		})
	}
	return n
}

// addClient starts a new node as add does, without waiting for the
// leader to make it a server.
func (c *inmemCluster) addClient(name string) *Node {
	c.t.Helper()
	addr, tr := raft.NewInmemTransport(raft.ServerAddress("raft-" + name))
	m := &inmemMember{name: name, raftTr: tr, gossTr: c.gossip.NewTransport(), down: true}
	m.cfg = Config{
		P9Anon: trustedAnon,
		Name:   name, DataDir: filepath.Join(c.root, name), Voters: c.voters, Servers: c.servers,
		RaftTransport: tr, GossipTransport: m.gossTr, Dial: c.dialer(name),
		LogOutput: c.log,
	}
	if c.tweak != nil {
		c.tweak(&m.cfg)
	}
	c.mu.Lock()
	for _, o := range c.order {
		if !c.members[o].down {
			m.cfg.Join = []string{c.members[o].gossTr.Addr()}
			break
		}
	}
	c.members[name] = m
	c.byAddr[string(addr)] = m
	c.order = append(c.order, name)
	c.mu.Unlock()
	return c.start(m)
}

// start runs a member's node on its data directory and transports, which
// are reconnected to every running member it is not partitioned from.
func (c *inmemCluster) start(m *inmemMember) *Node {
	c.t.Helper()
	for {
		// Drop what Raft RPCs a previous run left unread.
		select {
		case <-m.raftTr.Consumer():
			continue
		default:
		}
		break
	}
	c.mu.Lock()
	for _, o := range c.members {
		if o != m && !o.down && !c.cut[[2]string{m.name, o.name}] {
			m.raftTr.Connect(o.raftTr.LocalAddr(), o.raftTr)
			o.raftTr.Connect(m.raftTr.LocalAddr(), m.raftTr)
		}
	}
	m.gossTr = c.gossip.Renew(m.gossTr)
	c.mu.Unlock()
	cfg := m.cfg
	cfg.GossipTransport = m.gossTr
	cfg.P9Listener = listen(c.t)
	n, err := New(cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", m.name, err)
	}
	c.mu.Lock()
	m.node, m.down = n, false
	c.mu.Unlock()
	return n
}

// isolate cuts a member off every network; c.mu is held.
func (c *inmemCluster) isolate(m *inmemMember) {
	m.down = true
	m.gossTr.SetDown()
	m.raftTr.DisconnectAll()
	for _, o := range c.members {
		if o != m {
			o.raftTr.Disconnect(m.raftTr.LocalAddr())
		}
	}
	c.closePipes(func(p inmemPipe) bool { return p.from == m.name || p.to == m.name })
}

// closePipes closes the forwarding connections drop selects; c.mu is held.
func (c *inmemCluster) closePipes(drop func(inmemPipe) bool) {
	kept := c.pipes[:0]
	for _, p := range c.pipes {
		if drop(p) {
			p.a.Close()
			p.b.Close()
		} else {
			kept = append(kept, p)
		}
	}
	c.pipes = kept
}

// crash stops a node as a failure looks to the others: it drops off the
// gossip, Raft and forwarding networks at once and its Raft stops, with
// no leave and no leadership transfer. The node is closed (its resources
// released) only when it restarts or the test ends.
func (c *inmemCluster) crash(name string) {
	c.t.Helper()
	c.mu.Lock()
	m := c.members[name]
	c.isolate(m)
	n := m.node
	c.mu.Unlock()
	if err := n.raftNode().Shutdown().Error(); err != nil {
		c.t.Fatalf("crash %s: raft shutdown: %v", name, err)
	}
}

// stop closes a node gracefully: it hands over leadership and leaves.
func (c *inmemCluster) stop(name string) {
	c.t.Helper()
	c.mu.Lock()
	m := c.members[name]
	n := m.node
	c.mu.Unlock()
	if err := n.Close(); err != nil {
		c.t.Errorf("close %s: %v", name, err)
	}
	c.mu.Lock()
	c.isolate(m)
	m.node = nil
	c.mu.Unlock()
}

// restart starts a crashed or stopped node again on its data directory,
// with the same transports reconnected.
func (c *inmemCluster) restart(name string) *Node {
	c.t.Helper()
	c.mu.Lock()
	m := c.members[name]
	old := m.node
	m.node = nil
	c.mu.Unlock()
	if old != nil {
		old.Close() // a crashed node: release its data directory
	}
	return c.start(m)
}

// partition cuts Raft and forwarding between every node of a and every
// node of b, both ways. Raft RPCs across it time out rather than fail at
// once: hashicorp/raft backs off replication to an unreachable follower
// per failure (up to about ten seconds, not cut short when it comes
// back), so a partition that fails fast delays convergence after healing
// by as much.
func (c *inmemCluster) partition(a, b []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			c.cut[[2]string{x, y}], c.cut[[2]string{y, x}] = true, true
			c.cutRaftLocked(x, y)
		}
	}
	c.closePipes(func(p inmemPipe) bool { return c.cut[[2]string{p.from, p.to}] })
}

// cutRaft cuts Raft only (not forwarding) between nodes x and y, both
// ways, as partition does.
func (c *inmemCluster) cutRaft(x, y string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutRaftLocked(x, y)
}

// cutRaftLocked is cutRaft with c.mu held.
func (c *inmemCluster) cutRaftLocked(x, y string) {
	mx, my := c.members[x], c.members[y]
	mx.raftTr.Disconnect(my.raftTr.LocalAddr())
	my.raftTr.Disconnect(mx.raftTr.LocalAddr())
	mx.raftTr.Connect(my.raftTr.LocalAddr(), c.void)
	my.raftTr.Connect(mx.raftTr.LocalAddr(), c.void)
}

// heal ends every partition.
func (c *inmemCluster) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = map[[2]string]bool{}
	for _, x := range c.members {
		for _, y := range c.members {
			if x != y && !x.down && !y.down {
				x.raftTr.Connect(y.raftTr.LocalAddr(), y.raftTr)
			}
		}
	}
}

// dialer is Config.Dial for the node named from: a pipe into the target
// node's cluster port, refused when the target is down or partitioned.
func (c *inmemCluster) dialer(from string) func(string, time.Duration) (net.Conn, error) {
	return func(addr string, _ time.Duration) (net.Conn, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		to := c.byAddr[addr]
		switch {
		case to == nil || to.down || to.node == nil:
			return nil, fmt.Errorf("dial %s: connection refused", addr)
		case c.cut[[2]string{from, to.name}]:
			return nil, fmt.Errorf("dial %s: no route to host", addr)
		}
		a, b := net.Pipe()
		c.pipes = append(c.pipes, inmemPipe{from: from, to: to.name, a: a, b: b})
		go to.node.ServeClusterConn(b)
		if c.wrap != nil {
			return c.wrap(from, to.name, a), nil
		}
		return a, nil
	}
}

// closeAll closes every node that is still open, concurrently.
func (c *inmemCluster) closeAll() {
	c.mu.Lock()
	var nodes []*Node
	for _, m := range c.members {
		if m.node != nil {
			nodes = append(nodes, m.node)
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Close()
		}()
	}
	wg.Wait()
	c.log.mu.Lock()
	c.log.done = true
	c.log.mu.Unlock()
}

// node returns a running node.
func (c *inmemCluster) node(name string) *Node {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[name]
	if m == nil || m.node == nil || m.down {
		c.t.Fatalf("node %s is not running", name)
	}
	return m.node
}

// up lists the running nodes' names, in the order added.
func (c *inmemCluster) up() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, name := range c.order {
		if m := c.members[name]; !m.down && m.node != nil {
			out = append(out, name)
		}
	}
	return out
}

// leader is the running node that leads, or nil.
func (c *inmemCluster) leader() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range c.order {
		if m := c.members[name]; !m.down && m.node != nil && m.node.raftNode().State() == raft.Leader {
			return m.node
		}
	}
	return nil
}

// waitLeader waits until one of the named nodes leads and all of them
// know it.
func (c *inmemCluster) waitLeader(names ...string) *Node {
	c.t.Helper()
	var l *Node
	waitFor(c.t, fmt.Sprintf("a leader among %v", names), 10*time.Second, func() bool {
		l = nil
		for _, name := range names {
			if n := c.node(name); n.raftNode().State() == raft.Leader {
				l = n
			}
		}
		if l == nil {
			return false
		}
		for _, name := range names {
			if _, id := c.node(name).raftNode().LeaderWithID(); string(id) != l.Name() {
				return false
			}
		}
		return true
	})
	return l
}

// suffrages is the Raft configuration as n has it.
func suffrages(n *Node) map[string]raft.ServerSuffrage {
	f := n.raftNode().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	out := map[string]raft.ServerSuffrage{}
	for _, s := range f.Configuration().Servers {
		out[string(s.ID)] = s.Suffrage
	}
	return out
}

func countVoters(s map[string]raft.ServerSuffrage) int {
	v := 0
	for _, x := range s {
		if x == raft.Voter {
			v++
		}
	}
	return v
}

func hasSessions(n *Node, names ...string) bool {
	for _, s := range names {
		if _, ok := n.fsm.Session(s); !ok {
			return false
		}
	}
	return true
}

// gossipState is how n's gossip sees the member named.
func gossipState(n *Node, name string) string {
	for _, m := range n.gossip.Members() {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

func newSession(t *testing.T, n *Node, name string) {
	t.Helper()
	got, err := anonOf(n).NewSession("name=" + name)
	if err != nil {
		t.Fatalf("session %s through %s: %v", name, n.Name(), err)
	}
	if got != name {
		t.Fatalf("session %s through %s made %q", name, n.Name(), got)
	}
	if err := n.WalkSession(name); err != nil {
		t.Fatalf("%s does not read back its own write %s: %v", n.Name(), name, err)
	}
}

// anonOf is n's backend for a token-less caller, anon@test, as a 9P
// attach without a token binds it: its writes through a follower are
// forwarded as anon@test via that node, which the leader grants the call
// role (a write of the node itself, node:NAME, may only publish).
func anonOf(n *Node) auditBackend {
	return n.bind(p9.Principal{Name: "anon@test", Role: p9.RoleCall}).(auditBackend)
}

func others(all []string, not ...string) []string {
	var out []string
	for _, a := range all {
		skip := false
		for _, x := range not {
			skip = skip || a == x
		}
		if !skip {
			out = append(out, a)
		}
	}
	return out
}

// The leader crashes: the other two elect a leader and take writes through
// either of them; the crashed node restarts on its data and catches up.
func TestInMem_LeaderLoss(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2", "n3")
	all := c.up()
	old := c.waitLeader(all...)
	newSession(t, c.node(others(all, old.Name())[0]), "before")

	c.crash(old.Name())
	rest := others(all, old.Name())
	start := time.Now()
	l := c.waitLeader(rest...)
	t.Logf("%s crashed; %s leads %s later", old.Name(), l.Name(), time.Since(start).Round(time.Millisecond))
	for _, name := range rest {
		newSession(t, c.node(name), "after-"+name)
	}
	for _, name := range rest {
		n := c.node(name)
		waitFor(t, "the writes on "+name, 5*time.Second, func() bool {
			return hasSessions(n, "before", "after-"+rest[0], "after-"+rest[1])
		})
	}

	// The leader retries replication to the node it lost with a backoff
	// that grows with the downtime (hashicorp/raft), hence the margin.
	start = time.Now()
	r := c.restart(old.Name())
	waitFor(t, old.Name()+" to catch up", 15*time.Second, func() bool {
		return hasSessions(r, "before", "after-"+rest[0], "after-"+rest[1])
	})
	t.Logf("%s restarted; caught up %s later", old.Name(), time.Since(start).Round(time.Millisecond))
	l = c.waitLeader(all...)
	newSession(t, r, "back")
	for _, name := range rest {
		n := c.node(name)
		waitFor(t, "the write through the restarted node on "+name, 5*time.Second, func() bool { return hasSessions(n, "back") })
	}
	if s := suffrages(l); countVoters(s) != 3 {
		t.Fatalf("configuration after the restart: %v", s)
	}
}

// A partition leaves the leader and one follower in a minority: they
// refuse writes for want of a leader while the majority elects one and goes
// on; after the partition heals all five converge on the majority's
// writes, and the refused writes are nowhere.
func TestInMem_MinorityPartition(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 0, "n1", "n2", "n3", "n4", "n5")
	all := c.up()
	old := c.waitLeader(all...)
	newSession(t, old, "before")
	minority := []string{old.Name(), others(all, old.Name())[0]}
	majority := others(all, minority...)
	f := mount(t, old.P9Addr())

	c.partition(minority, majority)
	start := time.Now()
	l := c.waitLeader(majority...)
	t.Logf("partitioned %v from %v; %s leads the majority %s later", minority, majority, l.Name(), time.Since(start).Round(time.Millisecond))
	waitFor(t, "the minority to lose its leader", 10*time.Second, func() bool {
		for _, name := range minority {
			if addr, _ := c.node(name).raftNode().LeaderWithID(); addr != "" {
				return false
			}
		}
		return true
	})

	// The two refused writes (one direct on the follower, one over 9P on
	// the old leader) wait out applyTimeout while the majority goes on.
	type refused struct {
		how    string
		direct bool
		err    error
		d      time.Duration
	}
	res := make(chan refused, 2)
	go func() {
		s := time.Now()
		_, err := anonOf(c.node(minority[1])).NewSession("name=lost")
		res <- refused{"NewSession on " + minority[1], true, err, time.Since(s)}
	}()
	go func() {
		s := time.Now()
		_, err := ask(f, "session/new", "name=lost9p")
		res <- refused{"session/new over 9P on " + minority[0], false, err, time.Since(s)}
	}()
	for i, name := range majority {
		newSession(t, c.node(name), fmt.Sprintf("maj%d", i))
	}
	deadline := time.After(applyTimeout + 10*time.Second)
	for range 2 {
		select {
		case r := <-res:
			if r.err == nil || !strings.Contains(r.err.Error(), "no leader") {
				t.Errorf("%s in the minority: err = %v, want one saying there is no leader", r.how, r.err)
			}
			if r.direct && !errors.Is(r.err, ErrNoLeader) {
				t.Errorf("%s: %v is not ErrNoLeader", r.how, r.err)
			}
			t.Logf("%s refused after %s: %v", r.how, r.d.Round(time.Millisecond), r.err)
		case <-deadline:
			t.Fatal("a write in the minority did not fail within the bounded wait")
		}
	}

	// The leader resumes replication to the nodes it could not reach
	// after a backoff that grew during the partition (see partition):
	// the former minority catches up seconds after healing.
	c.heal()
	converged := func(want ...string) func() bool {
		return func() bool {
			for _, name := range all {
				if fmt.Sprint(c.node(name).fsm.SessionNames()) != fmt.Sprint(want) {
					return false
				}
			}
			return true
		}
	}
	start = time.Now()
	waitFor(t, "all five to converge on the majority's writes", 20*time.Second, converged("before", "maj0", "maj1", "maj2"))
	t.Logf("healed; all five converged %s later", time.Since(start).Round(time.Millisecond))
	c.waitLeader(all...)
	newSession(t, c.node(minority[1]), "healed")
	waitFor(t, "the write through the former minority on all five", 5*time.Second, converged("before", "healed", "maj0", "maj1", "maj2"))
	for _, name := range all {
		if n := c.node(name); hasSessions(n, "lost") || hasSessions(n, "lost9p") {
			t.Fatalf("a write refused in the minority is on %s: %v", name, n.fsm.SessionNames())
		}
	}
}

// A voter crashes: when gossip declares it dead the leader promotes the
// healthy non-voter and demotes the dead voter, keeping three live voters.
func TestInMem_VoterReplacement(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 3)
	c.servers = 4 // a non-voter to promote
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		c.add(name)
	}
	all := c.up()
	l := c.waitLeader(all...)
	want := map[string]raft.ServerSuffrage{"n1": raft.Voter, "n2": raft.Voter, "n3": raft.Voter, "n4": raft.Nonvoter}
	waitFor(t, "three voters and a non-voter", 10*time.Second, func() bool { return reflect.DeepEqual(suffrages(l), want) })

	victim := others([]string{"n1", "n2", "n3"}, l.Name())[0]
	c.crash(victim)
	start := time.Now()
	waitFor(t, "gossip to declare "+victim+" dead", 20*time.Second, func() bool {
		l := c.leader()
		return l != nil && gossipState(l, victim) == "dead"
	})
	dead := time.Since(start)
	waitFor(t, "n4 promoted and "+victim+" demoted", 10*time.Second, func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		s := suffrages(l)
		return s["n4"] == raft.Voter && s[victim] == raft.Nonvoter && countVoters(s) == 3
	})
	t.Logf("%s crashed; dead by gossip after %s, replaced after %s", victim, dead.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	newSession(t, c.node("n4"), "after")
}

// Nodes added one by one become voters up to Voters, then non-voters; a
// voter that leaves is removed and a non-voter promoted in its place.
func TestInMem_NonVoterPromotion(t *testing.T) {
	t.Parallel()
	c := newInmemCluster(t, 3)
	c.servers = 5
	c.add("n1")
	for i, name := range []string{"n2", "n3", "n4", "n5"} {
		c.add(name)
		want := raft.Voter
		if i >= 2 {
			want = raft.Nonvoter
		}
		waitFor(t, fmt.Sprintf("%s as %v", name, want), 10*time.Second, func() bool {
			l := c.leader()
			return l != nil && suffrages(l)[name] == want
		})
	}
	all := c.up()
	l := c.waitLeader(all...)
	want := map[string]raft.ServerSuffrage{"n1": raft.Voter, "n2": raft.Voter, "n3": raft.Voter, "n4": raft.Nonvoter, "n5": raft.Nonvoter}
	if got := suffrages(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("configuration = %v, want %v", got, want)
	}

	leaver := others([]string{"n1", "n2", "n3"}, l.Name())[0]
	start := time.Now()
	c.stop(leaver)
	waitFor(t, leaver+" removed and a non-voter promoted", 10*time.Second, func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		s := suffrages(l)
		_, still := s[leaver]
		return !still && len(s) == 4 && countVoters(s) == 3
	})
	l = c.leader()
	t.Logf("%s left; configuration %v after %s", leaver, suffrages(l), time.Since(start).Round(time.Millisecond))
	// The leader removes a node as soon as it announces its leave, which
	// can be a moment before gossip records the leave itself.
	waitFor(t, "gossip on the leader to say "+leaver+" left", 5*time.Second, func() bool {
		return gossipState(l, leaver) == "left"
	})
	newSession(t, c.node(others(c.up(), l.Name())[0]), "after")
}

// A large state survives a snapshot and a restart, and the snapshot
// compacts the log.
func TestInMem_SnapshotLargeState(t *testing.T) {
	t.Parallel()
	const (
		tools     = 10000
		perBatch  = 100 // every applied publish re-sorts the node's whole tool index
		sessions  = 100
		agentsPer = 10
	)
	c := newInmemCluster(t, 0, "n1")
	n := c.node("n1")

	// Writers in parallel, so Raft commits the entries in groups.
	parallel := func(jobs int, job func(i int) error) {
		t.Helper()
		const workers = 16
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < jobs; i += workers {
					if err := job(i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	toolName := func(i int) string { return fmt.Sprintf("tool%05d", i%tools) }
	begin := time.Now()
	parallel(tools/perBatch, func(b int) error {
		cmd := raftfsm.PublishTools{Owner: "n1", Time: nowNano()}
		for i := b * perBatch; i < (b+1)*perBatch; i++ {
			cmd.Tools = append(cmd.Tools, raftfsm.ToolSpec{Name: toolName(i), Meta: []byte(fmt.Sprintf(`{"description":"tool %d"}`, i))})
		}
		_, err := n.apply(raftfsm.CmdPublishTools, cmd)
		return err
	})
	parallel(sessions, func(s int) error {
		sess := fmt.Sprintf("s%03d", s)
		if _, err := n.NewSession("name=" + sess); err != nil {
			return err
		}
		for a := range agentsPer {
			agent := fmt.Sprintf("a%d", a)
			if _, err := n.NewAgent(sess, "name="+agent); err != nil {
				return err
			}
			// One tool a command, and a third loaded and unloaded
			// again: enough entries for the snapshot to compact the log
			// past its trailing entries. Two tools stay loaded; rev 4.
			k := (s*agentsPer + a) * 7
			for _, tool := range []string{toolName(k), toolName(k + 1), toolName(k + 2)} {
				if err := n.Load(sess, agent, []string{tool}); err != nil {
					return err
				}
			}
			if err := n.Unload(sess, agent, []string{toolName(k + 2)}); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%d tools and %d agents written in %s (%d entries)", tools, sessions*agentsPer, time.Since(begin).Round(time.Millisecond), n.raftNode().LastIndex())

	// What must survive: every tool's record and every agent's loaded set
	// and revision.
	type agentView struct {
		Loaded []string
		Rev    uint64
	}
	view := func(n *Node) (map[string]raftfsm.Tool, map[string]agentView) {
		ts := map[string]raftfsm.Tool{}
		for _, tl := range n.fsm.Tools() {
			ts[tl.Name] = *tl
		}
		as := map[string]agentView{}
		for _, s := range n.fsm.SessionNames() {
			sess, _ := n.fsm.Session(s)
			for name, a := range sess.Agents {
				as[s+"/"+name] = agentView{a.Loaded, a.Rev}
			}
		}
		return ts, as
	}
	tools0, agents0 := view(n)
	if len(tools0) != tools || len(agents0) != sessions*agentsPer || len(n.ToolIndex()) != tools {
		t.Fatalf("before the snapshot: %d tools (%d visible), %d agents", len(tools0), len(n.ToolIndex()), len(agents0))
	}
	if a := agents0["s042/a7"]; fmt.Sprint(a) != "{[tool02989 tool02990] 4}" {
		t.Fatalf("s042/a7 = %v", a)
	}

	if err := n.raftNode().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	snaps, err := n.snaps.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot stored: %v %v", snaps, err)
	}
	first, err := n.logs.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, _ := n.logs.LastIndex()
	trailing := n.raftConfig(nil).TrailingLogs
	t.Logf("snapshot at index %d; the log keeps %d..%d", snaps[0].Index, first, last)
	if first <= 1 || last-first+1 < trailing {
		t.Fatalf("log not compacted as expected: %d..%d with %d trailing entries", first, last, trailing)
	}
	c.stop("n1")

	r := c.restart("n1")
	if first, _ := r.logs.FirstIndex(); first <= 1 {
		t.Fatalf("the restarted log starts at %d: not restored from the snapshot", first)
	}
	tools1, agents1 := view(r)
	if !reflect.DeepEqual(tools1, tools0) {
		t.Fatalf("tools after the restart differ: %d, want %d", len(tools1), len(tools0))
	}
	if !reflect.DeepEqual(agents1, agents0) {
		t.Fatalf("agents after the restart differ: %d, want %d", len(agents1), len(agents0))
	}
	if len(r.ToolIndex()) != tools {
		t.Fatalf("%d tools visible after the restart, want %d", len(r.ToolIndex()), tools)
	}
	f := mount(t, r.P9Addr())
	if got := readFile(t, f, "session/s099/agent/a9/toolsrv.loaded"); got != "tool06993\ntool06994\n" {
		t.Fatalf("s099/a9 loaded over 9P = %q", got)
	}
	if got := readFile(t, f, "session/s099/agent/a9/toolsrv.rev"); got != "4\n" {
		t.Fatalf("s099/a9 rev over 9P = %q", got)
	}
	newSession(t, r, "after")
}
