package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Errors of this package.
var (
	// ErrMetaTooLarge: the advertised facts do not fit in memberlist's
	// 512-byte node meta.
	ErrMetaTooLarge = errors.New("node meta exceeds memberlist's limit")
)

// Config says how to run membership.
type Config struct {
	Name      string
	BindAddr  string // host:port for gossip (TCP and UDP)
	Advertise string // host peers use to reach this node; "" = bind host
	Key       []byte // gossip encryption key (16, 24 or 32 bytes); nil = none
	Meta      Meta   // initial advertised facts
	LogOutput io.Writer
	// Transport replaces memberlist's network transport (tests use
	// memberlist's MockNetwork); nil uses real UDP/TCP on BindAddr.
	Transport memberlist.Transport
	// ReconnectInterval is how often a failed member is tried again
	// (reconnect.go); 0 means DefaultReconnectInterval.
	ReconnectInterval time.Duration
	// ReconnectTimeout is how long a failed member is tried again before
	// it is forgotten; 0 means DefaultReconnectTimeout, and a negative
	// value turns reconnecting off.
	ReconnectTimeout time.Duration
	// GossipInterval, GossipNodes and ProbeInterval are memberlist's; 0
	// means DefaultGossipInterval, DefaultGossipNodes and
	// DefaultProbeInterval.
	GossipInterval, ProbeInterval time.Duration
	GossipNodes                   int
	// Compress compresses every message this node sends (memberlist's
	// LZW, on in memberlist's defaults). Off: see Start. A node reads
	// compressed messages either way, so members that differ in it
	// understand each other.
	Compress bool
	// CapsChanged, when set, is told the tools whose capable nodes may
	// have changed: a node's entry for them now says something else. It
	// is called outside the cluster's locks, on gossip's goroutines, and
	// must not block.
	CapsChanged func(tools []string)
}

// Meta is what a node advertises in memberlist node meta.
type Meta struct {
	Cluster string `json:"c,omitempty"` // raft + node-to-node address
	P9      string `json:"p,omitempty"` // 9P address
	// Tools is how many tools its host can run, as older builds
	// advertised it; nodes now leave it out (the capabilities say it, and
	// a count that changes makes an alive message every node passes on).
	Tools int `json:"t,omitempty"`
	// Leaving is set just before a graceful leave, so the others can tell
	// a departure from a failure (memberlist reports both as a leave).
	Leaving bool `json:"l,omitempty"`
	// Server is set while the node is in the Raft configuration: clients
	// follow the change stream of such nodes. Want is set by -server: the
	// node asks the leader to make it a server.
	Server bool `json:"s,omitempty"`
	Want   bool `json:"w,omitempty"`
}

// Member is one node as gossip sees it.
type Member struct {
	Name  string
	Addr  string // gossip address
	State string // alive, suspect, dead, left
	Meta  Meta
}

// EventKind is a membership change.
type EventKind int

// The membership changes.
const (
	NodeJoin EventKind = iota
	NodeLeave
	NodeUpdate
)

func (k EventKind) String() string {
	return [...]string{"join", "leave", "update"}[k]
}

// Event reports a membership change.
type Event struct {
	Kind   EventKind
	Member Member
}

// Cluster is a running memberlist.
type Cluster struct {
	ml     *memberlist.Memberlist
	events chan Event

	name, addr string // this node's, fixed at Start
	logger     *log.Logger
	changed    func(tools []string) // Config.CapsChanged, set before any gossip

	mu   sync.Mutex
	meta Meta
	// updating serializes memberlist's UpdateNode, which is not safe to
	// call from two goroutines (SetMeta from the node's advertiser racing
	// Leave at stop).
	updating sync.Mutex
	// members is this node's copy of the membership, kept from memberlist's
	// events (which it calls under its own lock): the nodes memberlist
	// hands out are shared with its goroutines and cannot be read safely.
	// Dead and departed members stay listed for ForgetAfter.
	members map[string]tracked

	// caps is every node's capabilities as this node knows them: node →
	// tool → entry (caps.go). Only this node writes caps[name].
	caps        map[string]map[string]entry
	lastVersion uint64          // the newest version this node issued
	syncAll     bool            // send this node's entries to every live member
	syncTo      map[string]bool // ... or to these

	bq   *memberlist.TransmitLimitedQueue // capability deltas to gossip
	kick chan struct{}                    // wakes syncLoop
	stop chan struct{}                    // closed by Shutdown
	once sync.Once

	reconnectEvery, reconnectFor time.Duration   // reconnect.go
	trying                       map[string]bool // members a reconnect is under way to; under mu
	failed                       chan struct{}   // a member failed: wakes reconnectLoop
	settleOnce                   sync.Once       // settle runs after the first join
}

type tracked struct {
	m    Member
	gone time.Time // when it died or left; zero while it lives
}

// memberlist's timers. Each tick wakes an idle node, and on a virtual
// machine a wake-up costs more than the work of an idle node. memberlist
// makes its probe and gossip tickers in the same instant, so their ticks
// fall on one grid and a probe's wake-up carries a gossip round.
// Gossip runs every 500 ms (memberlist's LAN default is 200 ms, its WAN
// default 500 ms) to six nodes instead of memberlist's three: a change
// reaches a hundred nodes in about 0.9 s, ten in 0.3 s
// (BenchmarkBroadcastSpread), and the alive news of a hundred nodes
// joining at once goes round twice as fast as at one round a second. A
// gossip tick with nothing queued sends nothing, but it still wakes the
// process.
//
// Every member, server or client, probes a member every second,
// memberlist's LAN default, as Consul and serf keep it. memberlist takes
// ProbeInterval once, at creation, and scales from it a probe's wait for
// indirect acks and the suspicion timeouts; a role-dependent interval
// would be fixed by the role a node starts in, and the clients the
// leader makes servers would keep a client's. At 3 s for every member
// a crashed one was called dead in 20 s against 8 s at a second
// (BenchmarkFailureDetection), for 0.04 % of a core saved per idle
// client (BENCHMARKS.md, "Upstream memberlist and jsonschema, unpatched").
const (
	DefaultGossipInterval = 500 * time.Millisecond
	DefaultGossipNodes    = 6
	DefaultProbeInterval  = time.Second
)

// ForgetAfter is how long a dead or departed member is still listed.
const ForgetAfter = 24 * time.Hour

// Start creates the memberlist and begins gossiping. It does not join.
func Start(cfg Config) (*Cluster, error) {
	out := cfg.LogOutput
	if out == nil {
		out = os.Stderr
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Name
	// A node restarted under the same name at a new address is taken back
	// once it has been dead this long, as consul does.
	mc.DeadNodeReclaimTime = 30 * time.Second
	mc.GossipInterval, mc.GossipNodes, mc.ProbeInterval = DefaultGossipInterval, DefaultGossipNodes, DefaultProbeInterval
	if cfg.GossipInterval > 0 {
		mc.GossipInterval = cfg.GossipInterval
	}
	if cfg.GossipNodes > 0 {
		mc.GossipNodes = cfg.GossipNodes
	}
	if cfg.ProbeInterval > 0 {
		mc.ProbeInterval = cfg.ProbeInterval
	}
	// memberlist compresses each message on its own, with a fresh LZW
	// writer whose 64 KiB table is allocated and cleared every time: a
	// probe of 60 bytes paid for it. That was ~15 % of a node's CPU while
	// a hundred nodes formed a cluster and ~5 % of an idle node's, and
	// much of their garbage, for packets that fit in one datagram whether
	// compressed or not (gossip fills a packet before compressing it). A
	// LAN has the bandwidth; Compress turns it back on.
	mc.EnableCompression = cfg.Compress
	c := newCluster(mc.Name, cfg.Meta, log.New(out, "", log.LstdFlags))
	c.changed = cfg.CapsChanged
	c.reconnectEvery, c.reconnectFor = cfg.ReconnectInterval, cfg.ReconnectTimeout
	if c.reconnectEvery <= 0 {
		c.reconnectEvery = DefaultReconnectInterval
	}
	if c.reconnectFor == 0 {
		c.reconnectFor = DefaultReconnectTimeout
	}
	if cfg.LogOutput != nil {
		mc.LogOutput = cfg.LogOutput
	}
	if cfg.Transport != nil {
		mc.Transport = cfg.Transport
	} else {
		host, port, err := splitHostPort(cfg.BindAddr)
		if err != nil {
			return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
		}
		mc.BindAddr, mc.BindPort = host, port
		if cfg.Advertise != "" {
			ip, err := resolveHost(cfg.Advertise)
			if err != nil {
				return nil, err
			}
			mc.AdvertiseAddr, mc.AdvertisePort = ip, port
		}
	}
	if len(cfg.Key) > 0 {
		mc.SecretKey = cfg.Key
		mc.GossipVerifyIncoming = true
		mc.GossipVerifyOutgoing = true
	}
	mc.Delegate = &delegate{c: c}
	mc.Events = &eventDelegate{c: c}
	if b, err := json.Marshal(cfg.Meta); err != nil || len(b) > memberlist.MetaMaxSize {
		return nil, ErrMetaTooLarge
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.BindAddr, err)
	}
	c.ml = ml
	c.addr = ml.LocalNode().Address()
	go c.syncLoop()
	if c.reconnectFor > 0 {
		go c.reconnectLoop()
	}
	return c, nil
}

// newCluster makes the state of a Cluster; Start adds the memberlist.
func newCluster(name string, meta Meta, logger *log.Logger) *Cluster {
	c := &Cluster{
		name:    name,
		meta:    meta,
		logger:  logger,
		events:  make(chan Event, 256),
		members: map[string]tracked{},
		caps:    map[string]map[string]entry{},
		syncTo:  map[string]bool{},
		trying:  map[string]bool{},
		kick:    make(chan struct{}, 1),
		failed:  make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	c.bq = &memberlist.TransmitLimitedQueue{NumNodes: c.aliveCount, RetransmitMult: retransmitMult}
	return c
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return h, port, nil
}

// resolveHost turns an advertise host into an IP, as memberlist needs.
func resolveHost(h string) (string, error) {
	if net.ParseIP(h) != nil {
		return h, nil
	}
	ips, err := net.LookupIP(h)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("-advertise %q: cannot resolve it: %v", h, err)
	}
	return ips[0].String(), nil
}

// Join contacts existing members; it succeeds if at least one answered.
func (c *Cluster) Join(addrs []string) (int, error) {
	n, err := c.ml.Join(addrs)
	if n > 0 {
		c.settleOnce.Do(func() { go c.settle() })
		// Entries that waited for members to be sent to (syncTargets)
		// go to those the join made known.
		c.mu.Lock()
		pending := c.syncAll
		c.mu.Unlock()
		if pending {
			wake(c.kick)
		}
		return n, nil
	}
	return 0, err
}

// After its first join, a node exchanges its whole state with a random
// live member every settleEvery for settleFor. A join is a push/pull with
// one seed; members that joined in the same second reach the node only
// by gossip, which a storm of joins (a hundred hosts booted at once)
// drops, and memberlist's own push/pull repairs that only every 30-90 s.
// The first exchange comes settleFirst after the join, with a random
// half of it either side: a node that joins last in a storm lacks only
// what its seed lacked, and learns it a second later, not three.
const (
	settleFirst = time.Second
	settleEvery = 3 * time.Second
	settleFor   = 30 * time.Second
)

func (c *Cluster) settle() {
	end := time.Now().Add(settleFor)
	wait := settleFirst/2 + time.Duration(rand.Int63n(int64(settleFirst)))
	for time.Now().Before(end) {
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		wait = settleEvery
		// This package's copy of the members: the nodes memberlist hands
		// out are written by its goroutines meanwhile.
		var peers []string
		c.mu.Lock()
		for name, t := range c.members {
			if name != c.name && t.m.State == "alive" && t.m.Addr != "" {
				peers = append(peers, t.m.Addr)
			}
		}
		c.mu.Unlock()
		if len(peers) > 0 {
			c.ml.Join([]string{peers[rand.Intn(len(peers))]})
		}
	}
}

// Events delivers membership changes. Sends never block memberlist: when
// the reader falls behind, events are dropped and the node's periodic
// reconcile catches up from Members.
func (c *Cluster) Events() <-chan Event { return c.events }

// Members lists every node gossip knows, sorted by name: the live ones
// and those that died or left in the last ForgetAfter.
func (c *Cluster) Members() []Member {
	var out []Member
	c.mu.Lock()
	for name, t := range c.members {
		if !t.gone.IsZero() && time.Since(t.gone) > ForgetAfter {
			delete(c.members, name)
			delete(c.caps, name)
			continue
		}
		out = append(out, t.m)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LocalName is this node's gossip name.
func (c *Cluster) LocalName() string { return c.name }

// LocalAddr is this node's gossip address.
func (c *Cluster) LocalAddr() string { return c.addr }

// SetMeta changes what this node advertises and gossips the change.
func (c *Cluster) SetMeta(m Meta) error {
	b, err := json.Marshal(m)
	if err != nil || len(b) > memberlist.MetaMaxSize {
		return ErrMetaTooLarge
	}
	c.mu.Lock()
	// Once Leave has begun, the node stays leaving: a SetMeta racing it
	// (the node's advertiser, woken by a role change) must not gossip
	// that it is not, or the others take its leave for a failure.
	m.Leaving = m.Leaving || c.meta.Leaving
	changed := c.meta != m
	c.meta = m
	c.mu.Unlock()
	if !changed {
		return nil
	}
	c.updating.Lock()
	defer c.updating.Unlock()
	return c.ml.UpdateNode(5 * time.Second)
}

// wake signals a goroutine that waits on ch, unless a signal is pending.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Leave tells the others this node is going, then stops gossip.
func (c *Cluster) Leave(timeout time.Duration) error {
	c.mu.Lock()
	c.meta.Leaving = true
	c.mu.Unlock()
	// UpdateNode returns once the broadcast has been sent as often as
	// memberlist retransmits it (4·⌈log10(N+1)⌉ sends, up to
	// DefaultGossipNodes a round: two to four rounds in a small cluster),
	// which a quarter of the usual 2 s did not allow. Not all of them by
	// the deadline is no failure: the leave message follows.
	// It is serialised with SetMeta: memberlist's UpdateNode is not safe
	// from two goroutines.
	c.updating.Lock()
	err := c.ml.UpdateNode(timeout * 3 / 4)
	c.updating.Unlock()
	if err != nil {
		c.logger.Printf("cluster: the leaving flag was not yet retransmitted to every member (%v); leaving anyway", err)
	}
	// The same for the leave message: memberlist waits until it has been
	// sent as often as it retransmits it, which in a cluster of two (one
	// send a round) takes four rounds. It went out every round until the
	// deadline, and whoever has it passes it on.
	if err = c.ml.Leave(timeout); err != nil {
		c.logger.Printf("cluster: leaving before the leave message was retransmitted as often as memberlist does (%v)", err)
		err = nil
	}
	if serr := c.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops gossip without telling anyone (a crash, as others see it).
func (c *Cluster) Shutdown() error {
	c.once.Do(func() { close(c.stop) })
	return c.ml.Shutdown()
}

func member(n *memberlist.Node, logger *log.Logger) Member {
	m := Member{Name: n.Name, Addr: n.Address(), State: stateName(n.State)}
	if len(n.Meta) > 0 {
		if err := json.Unmarshal(n.Meta, &m.Meta); err != nil {
			logger.Printf("cluster: node %s sent unreadable meta: %v", n.Name, err)
		}
	}
	return m
}

func stateName(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	case memberlist.StateLeft:
		return "left"
	}
	return "unknown"
}

// delegate answers memberlist's questions; each method is a short forward.
type delegate struct{ c *Cluster }

var _ memberlist.Delegate = (*delegate)(nil)

func (d *delegate) NodeMeta(limit int) []byte {
	d.c.mu.Lock()
	m := d.c.meta
	d.c.mu.Unlock()
	b, _ := json.Marshal(m)
	if len(b) > limit {
		return nil
	}
	return b
}
func (d *delegate) NotifyMsg(buf []byte) { d.c.notifyMsg(buf) }
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.c.bq.GetBroadcasts(overhead, limit)
}
func (d *delegate) LocalState(join bool) []byte            { return d.c.localState() }
func (d *delegate) MergeRemoteState(buf []byte, join bool) { d.c.mergeRemoteState(buf) }

type eventDelegate struct{ c *Cluster }

var _ memberlist.EventDelegate = (*eventDelegate)(nil)

func (e *eventDelegate) send(k EventKind, n *memberlist.Node) {
	m := member(n, e.c.logger)
	t := tracked{m: m}
	if k == NodeLeave {
		t.m.State = "dead"
		if m.Meta.Leaving {
			t.m.State = "left"
		}
		t.gone = time.Now()
		if t.m.State == "dead" {
			wake(e.c.failed)
		}
	} else {
		t.m.State = "alive"
	}
	e.c.mu.Lock()
	prev, known := e.c.members[m.Name]
	e.c.members[m.Name] = t
	// A node that comes back from the dead (a partition healed) may have
	// missed deltas for long: it gets this node's entries directly, not at
	// the next push/pull. A node that joins for the first time does not:
	// its join's push/pull brought it its seed's whole table, and the
	// settling push/pulls of its first 30 s (settle) what the seed lacked;
	// every node telling every joiner was N² TCP sends while N nodes
	// formed a cluster.
	tell := k == NodeJoin && known && !prev.gone.IsZero() && m.Name != e.c.name && len(e.c.caps[e.c.name]) > 0
	e.c.mu.Unlock()
	if tell {
		e.c.requestSync(m.Name)
	}
	select {
	case e.c.events <- Event{Kind: k, Member: t.m}:
	default:
	}
}
func (e *eventDelegate) NotifyJoin(n *memberlist.Node)   { e.send(NodeJoin, n) }
func (e *eventDelegate) NotifyLeave(n *memberlist.Node)  { e.send(NodeLeave, n) }
func (e *eventDelegate) NotifyUpdate(n *memberlist.Node) { e.send(NodeUpdate, n) }
