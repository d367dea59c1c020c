package node

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/audit"
	"github.com/toolnode/toolnode/blobs"
	"github.com/toolnode/toolnode/calls"
	"github.com/toolnode/toolnode/catalog"
	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/logx"
	"github.com/toolnode/toolnode/mcpserve"
	"github.com/toolnode/toolnode/metrics"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/procs"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/raftlog"
	"github.com/toolnode/toolnode/raftnode"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/rollout"
	"github.com/toolnode/toolnode/sandbox"
	"github.com/toolnode/toolnode/signing"
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
	store     *raftlog.Store            // Raft's log and stable store, nil until Raft opens
	logs      raft.LogStore             // store.Logs()
	snaps     *raft.FileSnapshotStore
	transport raft.Transport
	port      *clusterport.Server // listens unless Config.RaftTransport is given
	tls       *clusterport.TLS    // nil: plain TCP
	dialer    clusterport.Dialer
	lim       clusterport.Limits // the cluster port's deadlines
	fwd       clusterport.Pool   // forwarded writes, per leader address
	callConns clusterport.Pool   // routed calls, per node address
	commits   *raftnode.Notices  // the leader's commit notices
	ri        readIndex          // readindex.go
	route     router
	rep       replica      // servers and clients (replica.go)
	procs     *procs.Procs // a client's GOMAXPROCS

	// clientPeers: cluster addresses whose certificate was a client
	// node's when last dialled (address → time.Time), leader.go.
	clientPeers sync.Map

	gossip    *cluster.Cluster
	p9        *p9.Server
	p9ln      net.Listener
	p9tls     bool             // the 9P listener speaks TLS
	mcp       *mcpserve.Server // nil unless -mcp
	callLines mcpserve.Lines   // the calls' lines to MCP sessions (progress, stderr)
	metrics   *metrics.Set     // nil unless -metrics: its methods do nothing then
	metricsLn net.Listener
	p9srv     atomic.Pointer[p9.Server] // n.p9 once it serves, for the FSM's goroutine
	anon      p9.Role                   // of an attach without a token (tokens.go)

	catalog *catalog.Catalog
	sigs    toolSigs // t/NAME.sig attached, executables staged (trust.go)
	// dirSigner signs the tools directory's tools that have no NAME.sig
	// (-sign-key); nil for none.
	dirSigner *signing.Signer
	events    *p9.EventRing
	runner    *registry.Runner
	sandbox   string           // how tools are run, for the node file
	calls     *calls.Queue     // -max-calls
	rollout   *rollout.Service // v/ and canaries
	digests   sandbox.DigestCache
	blobs     *blobs.Service // the executables' store, fetches and collection

	environHidden bool // the process's /proc/PID/environ is blanked

	pub       publisher
	reconcile chan struct{} // membership changed: the leader reconciles
	metaKick  chan struct{} // what this node advertises changed
	up        upstreams     // upstream MCP servers (upstream.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	audit    *audit.Log  // Config.AuditFile; nil: none
	steps    *startSteps // times the steps of New (used by New's goroutine only)
	hadState bool        // Raft state was on disk at start
	// bootstrapped: this node bootstrapped its cluster at this start, so
	// it writes the cluster's admin token (tokens.go).
	bootstrapped bool
	closing      atomic.Bool // Close has begun: Raft's shutdown noise is expected (logging.go)
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
		fwd:       clusterport.Pool{Max: fwdIdleMax},
		callConns: clusterport.Pool{Max: callIdleMax, MaxAge: callReuse},
		metaKick:  make(chan struct{}, 1),
		lim:       clusterport.DefaultLimits,
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.steps = newStartSteps(cfg.Logger)
	n.procs = procs.New(n.ctx, cfg.ClientProcs, n.logger.Printf)
	n.events = p9.NewEventRing(4096)
	n.commits = raftnode.New(n.ctx, raftnode.Config{
		Self:      raft.ServerID(cfg.Name),
		Raft:      n.raftNode,
		Transport: func() raft.Transport { return n.transport },
		Logs:      func() raft.LogStore { return n.logs },
	})
	if cfg.MetricsAddr != "" {
		n.metrics = metrics.New(cfg.Name, n)
	}
	host := registry.LocalHost()
	if cfg.Host != nil {
		host = *cfg.Host
	}
	n.catalog = catalog.New(host, cfg.Name)
	n.fsm = raftfsm.New(n)
	n.fsm.SetLogf(n.logger.Printf)
	n.catalog.SetTrust(n.fsm.TrustError)
	n.rollout = n.newRollout()
	n.setupUpstream(host)
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
		n.procs.StartAsClient()
	}
	for _, d := range []string{cfg.DataDir, n.scratchDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	if err := n.checkFormat(); err != nil {
		return nil, err
	}
	if err := n.openBlobs(); err != nil {
		return nil, err
	}
	if err := n.clusterCredential(); err != nil {
		return nil, err
	}
	n.steps.step("config and data directory")
	// The tools directory is read while Raft starts.
	n.watchDirs()
	ahead := n.scanAhead()
	if n.tls, err = clusterport.LoadTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA); err != nil {
		return nil, err
	}
	if cfg.SignKey != "" {
		if n.dirSigner, err = signing.LoadSigner(cfg.SignKey); err != nil {
			return nil, fmt.Errorf("-sign-key: %w", err)
		}
	}
	if n.tls == nil && len(n.cfg.EncryptKey) > 0 {
		if n.tls, err = clusterport.KeyTLS(n.cfg.EncryptKey, cfg.Name); err != nil {
			return nil, err
		}
	}
	n.port, n.dialer = n.newPort(), n.newDialer()
	if err := n.clientOnlyStart(); err != nil {
		return nil, err
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
	n.catalog.Hold()
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
			n.catalog.Offer(first.found)
			n.steps.step("tools directory read", "scan", first.took.Round(10*time.Microsecond))
		}
	}
	n.catalog.Rebuild(n.liveTools, n.liveTool)
	n.steps.step("catalog built", "tools", n.catalog.Count())
	n.logDirs()
	n.startPublisher(first)
	n.startUpstream()
	n.catalog.DropHints()
	n.steps.step("publisher")
	n.startResolver()
	n.wg.Add(1)
	go n.collectBlobs()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.rollout.Watch(n.ctx)
	}()
	n.wg.Add(1)
	go n.flushStaged()
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
	n.procs.Start(!n.rep.isServer.Load())
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
	n.calls = calls.NewQueue(n.cfg.MaxCalls, min(n.cfg.CallTimeout, calls.MaxCallWait))
	switch _, err := sandbox.Status(); {
	case n.cfg.Yolo:
		n.sandbox = "off (-yolo)"
		n.warnf("-yolo: tools run WITHOUT the sandbox and can change any file this user can")
	case err != nil:
		n.sandbox = "unavailable: " + err.Error()
		n.warnf("sandbox unavailable: %v; this node will refuse to run tools (start it with -yolo to run them unsandboxed)", err)
	default:
		// Tools can read /proc/PID/environ of the node: blank it (the
		// runtime keeps its own copy).
		if err := sandbox.HideEnviron(); err != nil {
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
	rl := n.port.Listener(clusterport.ProtoRaft, "raft", func(c net.Conn) net.Conn {
		return clusterport.RequestDeadline(c, n.lim.RaftMsg)
	})
	n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:                &raftLayer{Listener: rl, advertise: adv, n: n},
		ServerAddressProvider: n.raftAddrs(),
		MaxPool:               3,
		Timeout:               10 * time.Second,
		Logger:                hl,
	})
	n.port.Listen(ln)
	return nil
}

// advertiseAddr is the cluster address peers dial: -advertise's host with
// the listener's port. A host name is kept as a name (Raft's
// configuration holds it, and each dial resolves it), so a node whose IP
// changes under a stable name (Compose, a StatefulSet) is found again.
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
	if ip := net.ParseIP(n.cfg.Advertise); ip != nil {
		return &net.TCPAddr{IP: ip, Port: tcp.Port}, nil
	}
	if _, err := net.LookupHost(n.cfg.Advertise); err != nil {
		n.warnf("-advertise %q does not resolve yet (%v): peers resolve it at each dial", n.cfg.Advertise, err)
	}
	return hostAddr(net.JoinHostPort(n.cfg.Advertise, strconv.Itoa(tcp.Port))), nil
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
	tcfg, err := p9.LoadTLS(n.cfg.P9TLSCert, n.cfg.P9TLSKey)
	if err != nil {
		ln.Close()
		return err
	}
	if tcfg != nil {
		ln = p9.NewTLSListener(ln, tcfg, p9.TLSHandshakeTimeout, p9.TLSMaxHandshakes, n.logger.Printf)
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
	opt.Bind = n.bind // each principal's Backend: the audit log, sessions' owners
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
