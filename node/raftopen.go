package node

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/toolnode/toolnode/raftlog"
)

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
	// commit notice (raftnode), so CommitTimeout is only a fallback and
	// defaults to five times the library's: each of its ticks is an
	// AppendEntries to every follower, most of an idle leader's wake-ups
	// (at 5 ms, ~15% of a core on three nodes).
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
	hl := n.raftLog
	store, err := raftlog.Open(filepath.Join(dir, "wal"), hl.Named("wal"))
	if err != nil {
		return err
	}
	n.store = store
	n.logs = store.Logs()
	w := store.Stable()
	step("raft log opened")
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
	if err != nil {
		return fmt.Errorf("raft snapshots in %s: %w", dir, err)
	}
	n.snaps = snaps

	rc := n.raftConfig(hl)
	notify := make(chan bool, 8)
	rc.NotifyCh = notify
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
		n.bootstrapped = true
	case late:
		n.logger.Printf("raft: the leader is adding this node: opening the raft log in %s", dir)
	default:
		n.logger.Printf("no raft state in %s: joining; the leader will add this node", dir)
	}
	step("raft state checked", "existing", has)
	if has {
		if err := n.recoverPeers(rc, snaps); err != nil {
			return err
		}
	}
	r, err := raft.NewRaft(rc, fsmFeed{n}, n.logs, w, snaps, n.transport)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	step("raft started (snapshot restored)", "applied", n.fsm.LastIndex(), "last-index", r.LastIndex())
	n.raftp.Store(r)
	n.observeStatus(r)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.commits.Run(n.ctx)
	}()
	n.wg.Add(1)
	go n.watchLeadership(notify)
	return nil
}
