package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/toolnode/toolnode/audit"
	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/logx"
	"github.com/toolnode/toolnode/metrics"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
)

// Errors of the write path.
var (
	// ErrNoLeader: the cluster has no leader to accept a write.
	ErrNoLeader = errors.New("the cluster has no leader and cannot accept writes now; try again shortly")
)

// applyTimeout bounds one write: waiting for a leader and for the commit.
const applyTimeout = 10 * time.Second

// Node is one running toolnode.
type Node struct {
	cfg    Config
	logger *log.Logger

	fsm       *raftfsm.FSM
	raftp     atomic.Pointer[raft.Raft] // nil on a client until the leader adds it (lazyraft.go)
	raftLazy  atomic.Bool               // Raft opens when the leader adds this node
	raftMu    sync.Mutex                // orders a late open of Raft with Close
	raftLate  bool                      // a late open has begun (under raftMu)
	raftLog   hclog.Logger              // Raft's logger, kept for a late open
	wal       *wal.WAL
	logs      *logCache // Raft's log store: the WAL behind a cache of its recent entries
	walMeta   *metadb.BoltMetaDB
	snaps     *raft.FileSnapshotStore
	transport raft.Transport
	mux       *mux          // nil when Config.RaftTransport is given
	tls       *clusterTLS   // nil: plain TCP
	lim       portLimits    // the cluster port's deadlines
	fwd       connPool      // forwarded writes, per leader address
	callConns connPool      // routed calls, per node address
	nudge     nudger        // retry.go
	notices   commitNotices // notice.go
	ri        readIndex     // readindex.go
	route     router
	rep       replica // servers and clients (replica.go)
	procs     procs   // a client's GOMAXPROCS (procs.go)

	unreachMu sync.Mutex
	unreach   map[string]string // node → why the leader keeps it out of Raft
	gossip    *cluster.Cluster
	p9        *p9.Server
	p9ln      net.Listener
	p9tls     bool         // the 9P listener speaks TLS
	mcp       *mcpServer   // nil unless -mcp
	metrics   *metrics.Set // nil unless -metrics: its methods do nothing then
	metricsLn net.Listener
	p9srv     atomic.Pointer[p9.Server] // n.p9 once it serves, for the FSM's goroutine
	anon      p9.Role                   // of an attach without a token (tokens.go)

	catalog *catalog
	events  *eventLog
	runner  *registry.Runner
	sandbox string     // how tools are run, for the node file
	calls   *callQueue // -max-calls
	digests registry.DigestCache
	blobs   blobs // the executables' store and fetches (blobs.go)

	environHidden bool // the process's /proc/PID/environ is blanked

	pub       publisher
	reconcile chan struct{} // membership changed: the leader reconciles
	metaKick  chan struct{} // what this node advertises changed

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	audit    *audit.Log  // Config.AuditFile; nil: none
	steps    *startSteps // times the steps of New (used by New's goroutine only)
	hadState bool        // Raft state was on disk at start
	closing  atomic.Bool // Close has begun: Raft's shutdown noise is expected (logging.go)
}

// New starts a node: Raft on its data directory, gossip, the publisher of
// its directories, and the 9P server. On error everything started so far
// is stopped again.
func New(cfg Config) (n *Node, err error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	n = &Node{
		cfg:       cfg,
		logger:    log.New(logx.Writer(cfg.Logger, slog.LevelInfo), "", 0),
		reconcile: make(chan struct{}, 1),
		fwd:       connPool{max: fwdIdleMax},
		callConns: connPool{max: callIdleMax, maxAge: callReuse},
		metaKick:  make(chan struct{}, 1),
		lim:       defaultPortLimits,
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.steps = newStartSteps(cfg.Logger)
	n.events = newEventLog(4096)
	if cfg.MetricsAddr != "" {
		n.metrics = metrics.New(cfg.Name, n)
	}
	host := registry.LocalHost()
	if cfg.Host != nil {
		host = *cfg.Host
	}
	n.catalog = newCatalog(host, cfg.Name)
	n.fsm = raftfsm.New(n)
	n.fsm.SetLogf(n.logger.Printf)
	started := n // returns below set n to nil before this runs
	defer func() {
		if err != nil {
			started.Close()
		}
	}()

	// A node that joins with no Raft state is a client until the leader
	// adds it (lazyraft.go): it starts on a client's processors.
	if n.cfg.RaftTransport == nil && n.joins() && !raftStateOnDisk(n.raftDir()) {
		n.raftLazy.Store(true)
		n.startAsClient()
	}
	for _, d := range []string{cfg.DataDir, n.scratchDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	if err := n.openBlobs(); err != nil {
		return nil, err
	}
	n.steps.step("config and data directory")
	// The tools directory is read while Raft starts.
	n.watchDirs()
	ahead := n.scanAhead()
	if n.tls, err = loadClusterTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA); err != nil {
		return nil, err
	}
	if n.tls == nil && len(cfg.EncryptKey) > 0 {
		if n.tls, err = keyClusterTLS(cfg.EncryptKey, cfg.Name); err != nil {
			return nil, err
		}
	}
	n.logPortSecurity()
	if cfg.AuditFile != "" {
		if n.audit, err = audit.Open(cfg.AuditFile, n.logger.Printf); err != nil {
			return nil, err
		}
	}
	n.steps.step("credentials and audit log")
	n.setupRunner()
	n.steps.step("sandbox probe")
	if err := n.startP9Listener(); err != nil {
		return nil, err
	}
	if err := n.setupAnon(); err != nil {
		return nil, err
	}
	n.rep.hub = n.newHub()
	n.steps.step("9P listener, tokens")
	// Updates wait for the catalog's build below: replaying a long log
	// resolves nothing entry by entry.
	n.catalog.hold()
	if err := n.startRaft(); err != nil {
		return nil, err
	}
	if err := n.startGossip(); err != nil {
		return nil, err
	}
	n.checkRole() // a client follows the stream from now on
	n.wg.Add(1)
	go n.watchRole()
	n.steps.step("gossip")
	if err := n.waitLeader(applyTimeout); err != nil {
		return nil, err
	}
	n.steps.step("election (and log replayed)", "applied", n.fsm.LastIndex())
	// A leader publishes its tools directory before 9P opens: read it
	// once, and build the catalog with its parses.
	var first *toolScan
	if n.leading() {
		if first = <-ahead; first == nil {
			first = n.scanTools()
		}
		if first != nil {
			n.catalog.offer(first.found)
			n.steps.step("tools directory read", "scan", first.took.Round(10*time.Microsecond))
		}
	}
	n.catalog.rebuild(n.fsm.Tools, n.fsm.Tool)
	n.steps.step("catalog built", "tools", n.catalog.count())
	n.logDirs()
	n.startPublisher(first)
	n.catalog.dropHints()
	n.steps.step("publisher")
	n.startResolver()
	n.wg.Add(1)
	go n.collectBlobs()
	// What this host can run is gossiped by advertise, beside 9P: encoding
	// thousands of tools for memberlist need not hold up the first read.
	kick(n.metaKick)
	n.wg.Add(1)
	go n.advertise()
	n.startP9()
	if err := n.startMCP(); err != nil {
		return nil, err
	}
	if err := n.startMetrics(); err != nil {
		return nil, err
	}
	n.startAdminToken()
	n.steps.step("9P serving")
	n.startProcs()
	n.logger.Printf("node %s: serving 9P on %s, cluster on %s, gossip on %s", cfg.Name, n.P9Addr(), n.transport.LocalAddr(), n.gossip.LocalAddr())
	return n, nil
}

func (n *Node) scratchDir() string { return filepath.Join(n.cfg.DataDir, "scratch") }
func (n *Node) peersFile() string  { return filepath.Join(n.cfg.DataDir, "peers.json") }

func (n *Node) setupRunner() {
	rc := registry.RunnerConfig{
		Timeout:    n.cfg.CallTimeout,
		Yolo:       n.cfg.Yolo,
		ScratchDir: n.scratchDir(),
		NodeName:   n.cfg.Name,
		Protected:  n.protectedPaths(),
		ToolEnv:    n.cfg.ToolEnv,
	}
	if n.cfg.ToolsDir != "" {
		rc.ExtraPath = []string{n.cfg.ToolsDir}
		rc.Readable = []string{n.cfg.ToolsDir} // -examples puts it in the data directory
	}
	n.runner = registry.NewRunner(rc)
	n.calls = newCallQueue(n.cfg.MaxCalls, min(n.cfg.CallTimeout, MaxCallWait))
	switch _, err := registry.SandboxStatus(); {
	case n.cfg.Yolo:
		n.sandbox = "off (-yolo)"
		n.warnf("-yolo: tools run WITHOUT the sandbox and can change any file this user can")
	case err != nil:
		n.sandbox = "unavailable: " + err.Error()
		n.warnf("sandbox unavailable: %v; this node will refuse to run tools (start it with -yolo to run them unsandboxed)", err)
	default:
		// Tools can read /proc/PID/environ of the node: blank it (the
		// runtime keeps its own copy).
		if err := registry.HideEnviron(); err != nil {
			n.warnf("sandbox: cannot blank this process's /proc/PID/environ: %v", err)
		} else {
			n.environHidden = true
		}
		// What the kernel provides, each protection named, a missing one
		// included.
		n.sandbox = n.sandboxLine()
	}
	n.sandbox += fmt.Sprintf("; max-calls %d", n.cfg.MaxCalls)
	n.logger.Printf("tools run with: %s", n.sandbox)
}

// Raft's timeouts on a server; a client's idle Raft waits clientRaftTimeout
// (replica.go).
const (
	raftHeartbeatTimeout = 800 * time.Millisecond
	raftElectionTimeout  = 800 * time.Millisecond
)

// raftConfig tunes hashicorp/raft for a LAN: a dead leader is noticed
// within about a second, and a new one elected soon after.
func (n *Node) raftConfig(hl hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.Name)
	rc.Logger = hl
	rc.HeartbeatTimeout = raftHeartbeatTimeout
	rc.ElectionTimeout = raftElectionTimeout
	rc.LeaderLeaseTimeout = 400 * time.Millisecond
	// Followers learn that an entry is committed from the next message the
	// leader sends; with no other writes that waits for CommitTimeout. The
	// leader tells every server of each commit at once instead, with a
	// commit notice (notice.go), so CommitTimeout is only a fallback and
	// defaults to five times the library's: each of its ticks is an
	// AppendEntries to every follower, most of an idle leader's wake-ups
	// (the 5 ms it once was cost ~15% of a core on three nodes).
	rc.CommitTimeout = n.cfg.CommitTimeout
	rc.SnapshotThreshold = 4096
	rc.TrailingLogs = 4096
	return rc
}

// startRaft opens the cluster port, and Raft on the data directory when
// this node has Raft state there or bootstraps a cluster; a node that
// joins with none is a client and opens Raft only when the leader adds it
// (lazyraft.go).
func (n *Node) startRaft() error {
	n.raftLog = n.raftLogger()
	// Decided before the port opens (New, startAsClient): the leader's
	// first request may come at once.
	lazy := n.raftLazy.Load()
	if n.cfg.RaftTransport != nil {
		n.transport = n.cfg.RaftTransport
	} else if err := n.startClusterPort(n.raftLog); err != nil {
		return err
	}
	if lazy {
		n.logger.Printf("no raft state in %s: joining; the leader will add this node, or it stays a client", n.raftDir())
		n.steps.step("cluster port; no raft state: Raft opens when the leader adds this node")
		return nil
	}
	return n.openRaft(false)
}

func (n *Node) raftDir() string { return filepath.Join(n.cfg.DataDir, "raft") }

// joins reports whether this node joins a cluster rather than
// bootstrapping one: it has -join, or the peers it last saw (a client
// restarted without -join has no Raft state, but has been in a cluster).
func (n *Node) joins() bool {
	if len(n.cfg.Join) > 0 {
		return true
	}
	_, err := os.Stat(n.peersFile())
	return err == nil
}

// openRaft opens Raft's log and snapshots, bootstraps a cluster of one
// when there is no state and nothing to join, and starts Raft. late: the
// leader is adding this node, a client until now (lazyraft.go).
func (n *Node) openRaft(late bool) error {
	step := n.steps.step
	if late {
		step = func(string, ...any) {} // the start's steps are New's alone
	}
	dir := n.raftDir()
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o700); err != nil {
		return fmt.Errorf("raft directory: %w", err)
	}
	hl := n.raftLog
	// The WAL does not close a meta store it did not make; holding our own
	// lets Close release its file lock, so the node can be reopened.
	n.walMeta = &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(dir, "wal"), wal.WithMetaStore(n.walMeta), wal.WithLogger(hl.Named("wal")))
	if err != nil {
		return fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	n.wal = w
	n.logs = newLogCache(w)
	step("raft log opened")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		return fmt.Errorf("raft snapshots in %s: %w", dir, err)
	}
	n.snaps = snaps

	rc := n.raftConfig(hl)
	notify := make(chan bool, 8)
	rc.NotifyCh = notify
	n.notices.kick = make(chan struct{}, 1)
	has, err := raft.HasExistingState(n.logs, w, snaps)
	if err != nil {
		return fmt.Errorf("read raft state: %w", err)
	}
	switch {
	case has:
		n.hadState = true
		n.logger.Printf("raft state found in %s: rejoining with it", dir)
	case !n.joins() && !late:
		n.logger.Printf("no raft state in %s and no -join: bootstrapping a cluster of one", dir)
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: n.transport.LocalAddr(),
		}}}
		if err := raft.BootstrapCluster(rc, n.logs, w, snaps, n.transport, conf); err != nil {
			return fmt.Errorf("bootstrap raft: %w", err)
		}
	case late:
		n.logger.Printf("raft: the leader is adding this node: opening the raft log in %s", dir)
	default:
		n.logger.Printf("no raft state in %s: joining; the leader will add this node", dir)
	}
	step("raft state checked", "existing", has)
	r, err := raft.NewRaft(rc, fsmFeed{n}, n.logs, w, snaps, n.transport)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	step("raft started (snapshot restored)", "applied", n.fsm.LastIndex(), "last-index", r.LastIndex())
	n.raftp.Store(r)
	n.observeStatus(r)
	if n.broadcasting() {
		n.wg.Add(1)
		go n.broadcastCommits()
	}
	n.wg.Add(1)
	go n.watchLeadership(notify)
	return nil
}

// startClusterPort listens on the cluster address (mutual TLS when
// configured) and runs Raft's network transport over it.
func (n *Node) startClusterPort(hl hclog.Logger) error {
	ln := n.cfg.ClusterListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", n.cfg.ClusterAddr); err != nil {
			return fmt.Errorf("cluster port: %w", err)
		}
	}
	adv, err := n.advertiseAddr(ln.Addr())
	if err != nil {
		ln.Close()
		return err
	}
	n.mux = newMux(n.tls.wrapListener(ln), n.cfg.MaxClusterConns, n.logger.Printf)
	n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftLayer{muxListener: n.mux.raft, advertise: adv, n: n},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hl,
	})
	n.mux.serve(n.ServeClusterConn)
	return nil
}

// advertiseAddr is the cluster address peers dial: -advertise's host with
// the listener's port.
func (n *Node) advertiseAddr(bound net.Addr) (net.Addr, error) {
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return bound, nil
	}
	if n.cfg.Advertise == "" {
		if tcp.IP.IsUnspecified() {
			return nil, fmt.Errorf("cluster address %s is unspecified: give -advertise HOST", bound)
		}
		return bound, nil
	}
	ip := net.ParseIP(n.cfg.Advertise)
	if ip == nil {
		addrs, err := net.LookupIP(n.cfg.Advertise)
		if err != nil || len(addrs) == 0 {
			return nil, fmt.Errorf("-advertise %q: cannot resolve it: %v", n.cfg.Advertise, err)
		}
		ip = addrs[0]
	}
	return &net.TCPAddr{IP: ip, Port: tcp.Port}, nil
}

// meta is what this node advertises by gossip. How many tools it can run
// is not in it (cluster/members counts the capabilities gossiped beside
// it): each change of node meta is an alive message that every node
// passes on several times, and the count changed on every node as it
// joined (its catalog arrives after its join) and at every publish.
func (n *Node) meta() cluster.Meta {
	return cluster.Meta{Cluster: string(n.transport.LocalAddr()), P9: n.P9Addr(),
		Server: n.rep.isServer.Load(), Want: n.cfg.Server}
}

func (n *Node) startGossip() error {
	g, err := cluster.Start(cluster.Config{
		Name:      n.cfg.Name,
		BindAddr:  n.cfg.GossipAddr,
		Advertise: n.cfg.Advertise,
		Key:       n.cfg.EncryptKey,
		Meta:      n.meta(),
		LogOutput: n.gossipLogOutput(),
		Transport: n.cfg.GossipTransport,

		ReconnectTimeout: n.cfg.ReconnectTimeout,
	})
	if err != nil {
		return err
	}
	n.gossip = g
	n.wg.Add(1)
	go n.watchMembers()
	join := n.cfg.Join
	if len(join) == 0 {
		// A restarted member finds the cluster again through the peers it
		// last knew.
		join = n.loadPeers()
	}
	if len(join) > 0 {
		if _, err := g.Join(join); err != nil {
			if len(n.cfg.Join) > 0 {
				n.logger.Printf("[WARN] join %s: %v; trying again in the background", strings.Join(join, ","), err)
				n.wg.Add(1)
				go n.retryJoin(join)
				return nil
			}
			n.logger.Printf("none of the last known peers (%s) answered; waiting to be joined", strings.Join(join, ","))
		}
	}
	return nil
}

// retryJoin tries -join again until one address answers or the node
// stops, as serf's retry_join does: a node started before the members it
// names (a Kubernetes pod before its Service's endpoints, a host booted
// first), or one whose join timed out in a storm of joins, serves alone
// meanwhile, saying so in its log, and joins as soon as it can.
func (n *Node) retryJoin(addrs []string) {
	defer n.wg.Done()
	wait := joinRetryMin
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
		if _, err := n.gossip.Join(addrs); err != nil {
			wait = min(2*wait, joinRetryMax)
			n.logger.Printf("[WARN] join %s: %v; trying again in %s", strings.Join(addrs, ","), err, wait)
			continue
		}
		n.logger.Printf("joined the cluster through %s", strings.Join(addrs, ","))
		return
	}
}

// joinRetryMin and joinRetryMax bound the wait between tries of -join.
const (
	joinRetryMin = time.Second
	joinRetryMax = 30 * time.Second
)

// watchMembers turns membership changes into node+/node- events, tells
// the leader to reconcile, and remembers the peers for a restart
// (peers.go): at the first join at once, then at most every
// peersSaveEvery, and once more as the node stops.
func (n *Node) watchMembers() {
	defer n.wg.Done()
	var ps peerSaves
	for {
		select {
		case <-n.ctx.Done():
			ps.flush(n.savePeers)
			return
		case <-ps.due():
			ps.flush(n.savePeers)
		case ev := <-n.gossip.Events():
			switch ev.Kind {
			case cluster.NodeJoin:
				n.events.add("node+", ev.Member.Name)
				ps.changed(time.Now(), n.savePeers)
			case cluster.NodeLeave:
				n.events.add("node-", ev.Member.Name)
				// A client following that server leaves it now, not
				// after five heartbeats of silence (a partition keeps
				// the connection open).
				if _, f := n.followerState(); f != nil && ev.Member.Meta.Cluster != "" {
					f.Leave(ev.Member.Meta.Cluster)
				}
			}
			kick(n.reconcile)
		}
	}
}

// kick signals ch without blocking; one pending signal is enough.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// advertise keeps what this node gossips current (what it can run, its
// role) as tools are published and variants re-resolved, and starts
// fetching newly published executables this node does not have.
func (n *Node) advertise() {
	defer n.wg.Done()
	var swept uint64
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.metaKick:
			if n.blobs.rescan.Swap(false) {
				swept = 0
			}
			swept = n.fetchSince(swept)
			n.gossip.SetCapabilities(n.catalog.caps())
			if err := n.gossip.SetMeta(n.meta()); err != nil {
				n.logger.Printf("gossip: advertising this node: %v", err)
			}
		}
	}
}

// waitLeader, on a node that is the only voter it knows of (a lone node,
// fresh or restarted), waits until it has elected itself and, restarted,
// has applied the log it found on disk: its own directories are then
// compared with what it restored and published before 9P opens. Any
// other node starts serving at once: reads meanwhile come from its state,
// and writes wait for a leader.
func (n *Node) waitLeader(d time.Duration) error {
	r := n.raftNode()
	if r == nil || !n.loneVoter() {
		return nil
	}
	restore := n.campaignNow()
	defer restore()
	deadline := time.Now().Add(d)
	for {
		if r.State() == raft.Leader {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raft elected no leader within %s", d)
		}
		select {
		case <-n.ctx.Done():
			return n.ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	if !n.hadState {
		return nil
	}
	// Raft applies the entries after the last snapshot only once the new
	// leader commits: until then the FSM lacks them, and the publisher
	// would propose again every tool they hold. (The timeout bounds the
	// queueing only: a long log is applied to its end.)
	if err := r.Barrier(time.Until(deadline)).Error(); err != nil {
		n.warnf("raft: applying the log found on disk: %v; its tools may be proposed again", err)
	}
	return nil
}

// campaignNow makes a lone voter elect itself at once instead of after
// raft's first heartbeat timeout (800–1600 ms, the bulk of a start). A
// lower heartbeat timeout given to ReloadConfig wakes raft's follower loop
// immediately; finding no leader contact, it campaigns, and as the only
// voter it wins. The returned func puts the timeout back. Safe because the
// node is the only voter of its configuration: no other node can lead.
func (n *Node) campaignNow() (restore func()) {
	r := n.raftNode()
	rc := r.ReloadableConfig()
	orig := rc.HeartbeatTimeout
	// It must stay at or above LeaderLeaseTimeout; any lower value wakes
	// the loop.
	rc.HeartbeatTimeout = orig - time.Millisecond
	if err := r.ReloadConfig(rc); err != nil {
		n.logger.Printf("raft: cannot shorten the first election: %v", err)
		return func() {}
	}
	return func() {
		rc.HeartbeatTimeout = orig
		if err := r.ReloadConfig(rc); err != nil {
			n.logger.Printf("raft: restoring the heartbeat timeout: %v", err)
		}
	}
}

// loneVoter reports whether this node is the only voter in its Raft
// configuration.
func (n *Node) loneVoter() bool {
	r := n.raftNode()
	if r == nil {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	servers := f.Configuration().Servers
	return len(servers) == 1 && string(servers[0].ID) == n.cfg.Name && servers[0].Suffrage == raft.Voter
}

func (n *Node) startP9Listener() error {
	ln := n.cfg.P9Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", n.cfg.P9Addr); err != nil {
			return fmt.Errorf("9P address: %w", err)
		}
	}
	tcfg, err := loadP9TLS(n.cfg.P9TLSCert, n.cfg.P9TLSKey)
	if err != nil {
		ln.Close()
		return err
	}
	if tcfg != nil {
		ln = newTLSListener(ln, tcfg, p9HandshakeTimeout, p9MaxHandshakes, n.logger.Printf)
		n.p9tls = true
		n.logger.Printf("9P over TLS on %s, certificate %s", ln.Addr(), n.cfg.P9TLSCert)
	}
	n.p9ln = ln
	return nil
}

// startP9 serves the tree on the listener opened at start.
func (n *Node) startP9() {
	opt := p9.Options{Logf: n.logger.Printf, Attach: n.attach}
	if n.metrics != nil {
		opt.Observe = n.metrics.Op
	}
	if n.audit != nil {
		opt.Bind = n.bind
	}
	n.p9 = p9.NewServer(n, opt)
	n.p9srv.Store(n.p9)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.p9.Serve(n.p9ln); err != nil {
			n.logger.Printf("9P server stopped: %v", err)
		}
	}()
}

// P9Addr is the address the 9P server listens on.
func (n *Node) P9Addr() string {
	if n.p9ln == nil {
		return ""
	}
	return n.p9ln.Addr().String()
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// apply makes one write: on the leader it is applied here; on a follower
// it is forwarded to the leader, and this node waits until it has applied
// the write too, so the writer reads it back from the node it wrote
// through. A write that was certainly not applied is retried, the leader
// re-resolved each time, until applyTimeout; so is one whose answer was
// lost, since every command is proposed as a request with an id of its
// own, which applies once however often it is proposed (retry.go,
// raftfsm/dedupe.go). With no leader by then it fails with
// ErrNoLeader. No lock is held across raft.Apply.
func (n *Node) apply(t raftfsm.CommandType, body any) (raftfsm.Result, error) {
	data, err := raftfsm.Encode(t, body)
	if err != nil {
		return raftfsm.Result{}, err
	}
	once := false
	if !n.cfg.noRequestIDs {
		if data, err = raftfsm.Request(rand.Text(), data); err != nil {
			return raftfsm.Result{}, err
		}
		once = true
	}
	deadline := time.Now().Add(applyTimeout)
	for {
		r, err := n.applyOnce(t, data, once, time.Until(deadline))
		if err == nil || !retryable(once, err) {
			return r, err
		}
		if time.Now().After(deadline) {
			if errors.Is(err, ErrNoLeader) || errors.Is(err, errAmbiguous) {
				return raftfsm.Result{}, err
			}
			return raftfsm.Result{}, fmt.Errorf("%w (%v)", ErrNoLeader, err)
		}
		select {
		case <-n.ctx.Done():
			return raftfsm.Result{}, errors.New("the node is shutting down")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// retryable: the write was certainly not applied, and may succeed later;
// or it may have been applied and proposing it again cannot apply it a
// second time (once).
func retryable(once bool, err error) bool {
	return errors.Is(err, errUnsent) || errors.Is(err, raft.ErrNotLeader) ||
		errors.Is(err, ErrNoLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) ||
		(once && errors.Is(err, errAmbiguous))
}

func (n *Node) applyOnce(t raftfsm.CommandType, data []byte, once bool, timeout time.Duration) (raftfsm.Result, error) {
	if n.leading() {
		r, _, err := n.applyHere(data, timeout, "this node")
		return r, err
	}
	addr, _ := n.leaderAddr()
	if addr == "" {
		return raftfsm.Result{}, ErrNoLeader
	}
	wait := timeout
	if once && len(data) < 1<<20 {
		// Give up on a silent leader early: the retry is safe. (A large
		// command may take its time to travel.)
		wait = min(timeout, fwdAnswerTimeout)
	}
	resp, err := n.forward(string(addr), data, wait)
	if err != nil {
		return raftfsm.Result{}, err
	}
	if resp.Err != "" {
		return raftfsm.Result{}, &remoteError{msg: resp.Err, kind: errKinds[resp.Kind]}
	}
	n.ri.expectNotice(resp.Index)
	if appliedLater(t) {
		n.ri.ack(resp.Index)
		return raftfsm.Result{Name: resp.Name}, nil
	}
	deadline := time.Now().Add(timeout)
	for {
		// The commit notice (or the stream) brings the write at once. A
		// node whose role changed while the write was in flight (a client
		// the leader just made a server) may have been told nothing: after
		// a short wait, a ReadIndex round makes the leader tell it.
		if n.waitApplied(resp.Index, min(time.Until(deadline), noticeGrace)) {
			return raftfsm.Result{Name: resp.Name}, nil
		}
		if !time.Now().Before(deadline) {
			return raftfsm.Result{}, fmt.Errorf("the write was committed at index %d but this node has not caught up within %s; it will", resp.Index, timeout)
		}
		n.caughtUp()
	}
}

// noticeGrace is how long a forwarding node waits for its write to reach
// its state before it asks the leader again (applyOnce).
const noticeGrace = 250 * time.Millisecond

// applyHere applies a command on this node, which must be the leader, and
// returns its result and log index. Every command, proposed here or
// forwarded (from names its sender for the log), is validated first: an
// invalid one is refused with an error wrapping raftfsm.ErrInvalid and a
// log line, and never appended to the log.
func (n *Node) applyHere(data []byte, timeout time.Duration, from string) (raftfsm.Result, uint64, error) {
	if err := raftfsm.ValidateLimits(data, raftfsm.Limits{MaxExecSize: n.cfg.MaxExecSize}); err != nil {
		n.logger.Printf("refused a command from %s: %v", from, err)
		return raftfsm.Result{}, 0, err
	}
	r := n.raftNode()
	if r == nil {
		return raftfsm.Result{}, 0, fmt.Errorf("%w (this node is a client)", ErrNoLeader)
	}
	f := r.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
			// Not in the log: safe to try again.
			return raftfsm.Result{}, 0, fmt.Errorf("%w (%v)", ErrNoLeader, err)
		case errors.Is(err, raft.ErrLeadershipLost):
			return raftfsm.Result{}, 0, fmt.Errorf("the leader lost its leadership while the write was in flight: %w", errAmbiguous)
		}
		return raftfsm.Result{}, 0, fmt.Errorf("write not committed: %w", err)
	}
	if raftfsm.TypeOf(data) == raftfsm.CmdRevokeToken && !n.broadcasting() {
		// Every node refuses a revoked token at once, not at the
		// follower's next AppendEntries (up to CommitTimeout later);
		// without the broadcast a commit notice tells only the node that
		// forwarded a write.
		n.nudgeFollowers()
	}
	switch r := f.Response().(type) {
	case error:
		return raftfsm.Result{}, 0, r
	case raftfsm.Result:
		return r, f.Index(), nil
	default:
		return raftfsm.Result{}, f.Index(), nil
	}
}

// Close stops the node: 9P first (no new requests); then, if it leads, it
// hands leadership to another voter; then the publisher, resolver and
// leader loop stop; gossip leaves gracefully (the leader then removes this
// node from Raft); Raft shuts down, and its log is closed last.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.mcp != nil {
			n.mcp.close()
		}
		if n.p9 != nil {
			n.p9.Close()
		} else if n.p9ln != nil {
			n.p9ln.Close()
		}
		n.closing.Store(true)
		if n.leading() && n.otherVoters() {
			if err := n.raftNode().LeadershipTransfer().Error(); err != nil {
				n.warnf("handing over leadership: %v", err)
			}
		}
		// Under raftMu: a late open of Raft (lazyraft.go) has ended or
		// will not begin.
		n.raftMu.Lock()
		n.cancel()
		n.raftMu.Unlock()
		if n.rep.hub != nil {
			n.rep.hub.Close()
		}
		if n.gossip != nil {
			if err := n.gossip.Leave(2 * time.Second); err != nil {
				n.warnf("gossip leave: %v", err)
			}
			n.awaitRemoval(leaveDrain)
		}
		n.wg.Wait()
		n.stopBlobs()
		n.fwd.closeAll()
		if n.runner != nil {
			if err := n.runner.Close(); err != nil {
				n.logger.Printf("removing the cgroups of calls: %v", err)
			}
		}
		n.callConns.closeAll()
		if r := n.raftNode(); r != nil {
			if err := r.Shutdown().Error(); err != nil {
				n.closeErr = fmt.Errorf("raft shutdown: %w", err)
			}
		}
		if c, ok := n.transport.(io.Closer); ok && n.cfg.RaftTransport == nil {
			c.Close()
		}
		if n.mux != nil {
			n.mux.close()
		}
		// The log store last: Raft may write to it until Shutdown returns.
		if n.wal != nil {
			if err := n.wal.Close(); err != nil && n.closeErr == nil {
				n.closeErr = fmt.Errorf("raft log close: %w", err)
			}
		}
		if n.walMeta != nil {
			if err := n.walMeta.Close(); err != nil && n.closeErr == nil {
				n.closeErr = fmt.Errorf("raft log metadata close: %w", err)
			}
		}
		// The audit log last: everything that records has stopped.
		if err := n.audit.Close(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	})
	return n.closeErr
}

// leaveDrain bounds how long a leaving server waits for the leader to
// take it out of Raft's configuration.
const leaveDrain = 3 * time.Second

// awaitRemoval, on a server that left gossip, waits until the leader has
// removed it from Raft's configuration, as a leaving Consul server does:
// the removal is a commit that may need this node's vote (two voters
// need both), so its Raft must answer until then. It gives up after d,
// and at once on a client or the last voter.
func (n *Node) awaitRemoval(d time.Duration) {
	if n.raftNode() == nil || !n.otherVoters() {
		return
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if in, err := n.inRaft(); err != nil || !in {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.warnf("leaving: the leader had not removed this node from Raft within %s; the others will once it is seen gone", d)
}

// otherVoters reports whether the configuration has a voter besides this
// node.
func (n *Node) otherVoters() bool {
	r := n.raftNode()
	if r == nil {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.Name {
			return true
		}
	}
	return false
}
