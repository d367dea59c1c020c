package node

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/toolnode/toolnode/cluster"
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
	raft      *raft.Raft
	wal       *wal.WAL
	walMeta   *metadb.BoltMetaDB
	snaps     *raft.FileSnapshotStore
	transport *raft.NetworkTransport
	mux       *mux
	gossip    *cluster.Cluster
	p9        *p9.Server
	p9ln      net.Listener

	catalog *catalog
	events  *eventLog
	runner  *registry.Runner
	sandbox string // how tools are run, for the node file

	pub publisher

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New starts a node: Raft on its data directory, gossip, the publisher of
// its directories, and the 9P server. On error everything started so far
// is stopped again.
func New(cfg Config) (n *Node, err error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg, logger: log.New(cfg.LogOutput, "", log.LstdFlags|log.Lmsgprefix)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.events = newEventLog(4096)
	host := registry.LocalHost()
	if cfg.Host != nil {
		host = *cfg.Host
	}
	n.catalog = newCatalog(host, cfg.Name)
	n.fsm = raftfsm.New(n)
	defer func() {
		if err != nil {
			n.Close()
			n = nil
		}
	}()

	for _, d := range []string{cfg.DataDir, n.execDir(), n.scratchDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	n.setupRunner()
	if err := n.startRaft(); err != nil {
		return nil, err
	}
	if err := n.startGossip(); err != nil {
		return nil, err
	}
	if err := n.waitLeader(applyTimeout); err != nil {
		return nil, err
	}
	n.catalog.rebuild(n.fsm.Tools())
	n.startPublisher()
	n.startResolver()
	if err := n.startP9(); err != nil {
		return nil, err
	}
	n.logger.Printf("node %s: serving 9P on %s, cluster on %s, gossip on %s", cfg.Name, n.P9Addr(), n.mux.ln.Addr(), cfg.GossipAddr)
	return n, nil
}

func (n *Node) execDir() string    { return filepath.Join(n.cfg.DataDir, "exec") }
func (n *Node) scratchDir() string { return filepath.Join(n.cfg.DataDir, "scratch") }

func (n *Node) setupRunner() {
	rc := registry.RunnerConfig{
		Timeout:    n.cfg.CallTimeout,
		Yolo:       n.cfg.Yolo,
		ScratchDir: n.scratchDir(),
		NodeName:   n.cfg.Name,
	}
	if n.cfg.ToolsDir != "" {
		rc.ExtraPath = []string{n.cfg.ToolsDir}
	}
	n.runner = registry.NewRunner(rc)
	switch abi, err := registry.SandboxStatus(); {
	case n.cfg.Yolo:
		n.sandbox = "off (-yolo)"
		n.logger.Printf("WARNING: -yolo: tools run WITHOUT the sandbox and can change any file this user can")
	case err != nil:
		n.sandbox = "unavailable: " + err.Error()
		n.logger.Printf("sandbox unavailable: %v; this node will refuse to run tools (start it with -yolo to run them unsandboxed)", err)
	default:
		n.sandbox = fmt.Sprintf("landlock ABI %d", abi)
	}
}

func (n *Node) startRaft() error {
	dir := filepath.Join(n.cfg.DataDir, "raft")
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o700); err != nil {
		return fmt.Errorf("raft directory: %w", err)
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: n.cfg.LogOutput, Level: hclog.Warn})
	// The WAL does not close a meta store it did not make; holding our own
	// lets Close release its file lock, so the node can be reopened.
	n.walMeta = &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(dir, "wal"), wal.WithMetaStore(n.walMeta), wal.WithLogger(hl.Named("wal")))
	if err != nil {
		return fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	n.wal = w
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		return fmt.Errorf("raft snapshots in %s: %w", dir, err)
	}
	n.snaps = snaps

	ln := n.cfg.ClusterListener
	if ln == nil {
		if ln, err = net.Listen("tcp", n.cfg.ClusterAddr); err != nil {
			return fmt.Errorf("cluster port: %w", err)
		}
	}
	n.mux = newMux(ln, n.logger)
	adv, err := n.advertiseAddr(ln.Addr())
	if err != nil {
		return err
	}
	n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftLayer{muxListener: n.mux.raft, advertise: adv},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hl,
	})
	n.mux.serve()

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.Name)
	rc.Logger = hl
	rc.SnapshotThreshold = 4096
	if n.cfg.Join == nil {
		// A lone node elects itself quickly.
		rc.HeartbeatTimeout = 500 * time.Millisecond
		rc.ElectionTimeout = 500 * time.Millisecond
		rc.LeaderLeaseTimeout = 250 * time.Millisecond
	}
	has, err := raft.HasExistingState(w, w, snaps)
	if err != nil {
		return fmt.Errorf("read raft state: %w", err)
	}
	if !has && len(n.cfg.Join) == 0 {
		n.logger.Printf("no raft state in %s: bootstrapping a cluster of one", dir)
		conf := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: n.transport.LocalAddr(),
		}}}
		if err := raft.BootstrapCluster(rc, w, w, snaps, n.transport, conf); err != nil {
			return fmt.Errorf("bootstrap raft: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, n.fsm, w, w, snaps, n.transport)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
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

func (n *Node) startGossip() error {
	g, err := cluster.Start(cluster.Config{
		Name:      n.cfg.Name,
		BindAddr:  n.cfg.GossipAddr,
		Advertise: n.cfg.Advertise,
		Key:       n.cfg.EncryptKey,
		Meta:      cluster.Meta{Cluster: string(n.transport.LocalAddr())},
		LogOutput: filteredLog{n.cfg.LogOutput},
	})
	if err != nil {
		return err
	}
	n.gossip = g
	if len(n.cfg.Join) > 0 {
		if _, err := g.Join(n.cfg.Join); err != nil {
			return fmt.Errorf("join %s: %w", strings.Join(n.cfg.Join, ","), err)
		}
	}
	n.wg.Add(1)
	go n.watchMembers()
	return nil
}

// watchMembers turns membership changes into node+/node- events.
func (n *Node) watchMembers() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case ev := <-n.gossip.Events():
			switch ev.Kind {
			case cluster.NodeJoin:
				n.events.add("node+", ev.Member.Name)
			case cluster.NodeLeave:
				n.events.add("node-", ev.Member.Name)
			}
		}
	}
}

// waitLeader polls until the cluster has a leader or d passes.
func (n *Node) waitLeader(d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			return nil
		}
		select {
		case <-n.ctx.Done():
			return n.ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	if len(n.cfg.Join) > 0 {
		n.logger.Printf("no raft leader yet after %s; serving reads, writes wait for one", d)
		return nil
	}
	return fmt.Errorf("raft elected no leader within %s", d)
}

func (n *Node) startP9() error {
	ln := n.cfg.P9Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", n.cfg.P9Addr); err != nil {
			return fmt.Errorf("9P address: %w", err)
		}
	}
	n.p9ln = ln
	n.p9 = p9.NewServer(n, p9.Options{Logf: n.logger.Printf})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.p9.Serve(ln); err != nil {
			n.logger.Printf("9P server stopped: %v", err)
		}
	}()
	return nil
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

// apply proposes one command and waits until this node has applied it,
// so the writer reads its own write back from this node. No lock is held
// across raft.Apply.
func (n *Node) apply(t raftfsm.CommandType, body any) (raftfsm.Result, error) {
	data, err := raftfsm.Encode(t, body)
	if err != nil {
		return raftfsm.Result{}, err
	}
	deadline := time.Now().Add(applyTimeout)
	for n.raft.State() != raft.Leader {
		if time.Now().After(deadline) {
			return raftfsm.Result{}, ErrNoLeader
		}
		if addr, _ := n.raft.LeaderWithID(); addr != "" {
			return raftfsm.Result{}, fmt.Errorf("this node is not the leader (%s is) and forwarding writes is not supported yet", addr)
		}
		select {
		case <-n.ctx.Done():
			return raftfsm.Result{}, errors.New("the node is shutting down")
		case <-time.After(20 * time.Millisecond):
		}
	}
	f := n.raft.Apply(data, time.Until(deadline))
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return raftfsm.Result{}, fmt.Errorf("%w (%v)", ErrNoLeader, err)
		}
		return raftfsm.Result{}, fmt.Errorf("write not committed: %w", err)
	}
	switch r := f.Response().(type) {
	case error:
		return raftfsm.Result{}, r
	case raftfsm.Result:
		return r, nil
	default:
		return raftfsm.Result{}, nil
	}
}

// Close stops the node: 9P first (no new requests), then the publisher
// and resolver, then gossip (a graceful leave), then Raft and its log.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.p9 != nil {
			n.p9.Close()
		}
		n.cancel()
		if n.gossip != nil {
			if err := n.gossip.Leave(2 * time.Second); err != nil {
				n.logger.Printf("gossip leave: %v", err)
			}
		}
		n.wg.Wait()
		if n.raft != nil {
			if err := n.raft.Shutdown().Error(); err != nil {
				n.closeErr = fmt.Errorf("raft shutdown: %w", err)
			}
		}
		if n.transport != nil {
			n.transport.Close()
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
	})
	return n.closeErr
}

// filteredLog drops memberlist's debug chatter.
type filteredLog struct {
	w interface{ Write([]byte) (int, error) }
}

func (f filteredLog) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "[DEBUG]") {
		return len(p), nil
	}
	return f.w.Write(p)
}
