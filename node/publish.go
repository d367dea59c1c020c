package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/signing"
)

// publishBatch bounds how many tools one Raft command carries, and
// publishBatchBytes how much metadata (executables are named by digest,
// never carried); publishInFlight how many such commands a sync proposes
// at once.
const (
	publishBatch      = 512
	publishBatchBytes = 4 << 20
	publishInFlight   = 4
)

// publisher keeps the replicated catalog in step with this node's tools
// and agents directories; the syncer goroutine does every sync.
type publisher struct {
	mu       sync.Mutex
	problems map[string]string // file → reason, as last logged
	hashes   map[string]hashed // executable path → content hash cache
	tools    chan struct{}     // the tools directory changed
	profiles chan struct{}     // the agents directory changed
}

type hashed struct {
	size  int64
	mtime time.Time
	hash  string
}

// watchDirs starts watching the node's tools and agents directories. It
// runs before their first read, so that a change made while the node
// starts is not missed: it makes the syncer read the directory again.
func (n *Node) watchDirs() {
	n.pub.problems = map[string]string{}
	n.pub.hashes = map[string]hashed{}
	n.pub.tools = make(chan struct{}, 1)
	n.pub.profiles = make(chan struct{}, 1)
	for _, w := range []struct {
		dir  string
		kick chan struct{}
	}{{n.cfg.ToolsDir, n.pub.tools}, {n.cfg.AgentsDir, n.pub.profiles}} {
		if w.dir == "" {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			err := registry.WatchDir(n.ctx, w.dir, n.cfg.Debounce, n.logger.Printf, func() { kick(w.kick) })
			if err != nil && n.ctx.Err() == nil {
				n.warnf("watching %s stopped: %v", w.dir, err)
			}
		}()
	}
}

// scanAhead reads the tools directory in the background while Raft
// starts, for a node that will likely lead (no -join): it publishes from
// that read before 9P opens. The channel gives the scan, or nil when
// there is nothing to read ahead.
func (n *Node) scanAhead() <-chan *toolScan {
	ch := make(chan *toolScan, 1)
	if n.cfg.ToolsDir == "" || len(n.cfg.Join) > 0 {
		ch <- nil
		return ch
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ch <- n.scanTools()
	}()
	return ch
}

// startPublisher starts publishing the node's directories (watchDirs
// watches them). first, when not nil, is a read of the tools directory
// made after the watch began (New's, which the catalog was built with);
// a leader publishes from it.
func (n *Node) startPublisher(first *toolScan) {
	// A node that leads (a lone node) syncs before 9P opens, so its
	// catalog is complete from the first read. Any other syncs in the
	// background: its writes wait for the leader, and a leader that backed
	// off replicating to a node that was down can take seconds to let it
	// catch up; 9P must not wait for that.
	toolsOK, profilesOK := false, false
	if n.leading() {
		if first == nil {
			first = n.scanTools()
		}
		toolsOK, profilesOK = n.syncToolsFrom(first), n.syncProfiles()
	}
	n.wg.Add(1)
	go n.syncer(!toolsOK, !profilesOK)
}

// syncer is the one goroutine that publishes the node's directories:
// when a watcher says one changed, and again after a pause while a sync
// fails (no leader yet, a leader change), so a directory that does not
// change again still reaches the cluster. Being one goroutine, it needs
// no lock across its writes.
func (n *Node) syncer(toolsDue, profilesDue bool) {
	defer n.wg.Done()
	var retry <-chan time.Time
	for {
		if toolsDue || profilesDue {
			retry = time.After(retrySyncAfter)
		} else {
			retry = nil
		}
		select {
		case <-n.ctx.Done():
			return
		case <-n.pub.tools:
			toolsDue = !n.syncTools()
			continue
		case <-n.pub.profiles:
			profilesDue = !n.syncProfiles()
			continue
		case <-retry:
		}
		if toolsDue {
			toolsDue = !n.syncTools()
		}
		if profilesDue {
			profilesDue = !n.syncProfiles()
		}
	}
}

// retrySyncAfter is the pause before a failed sync is tried again.
const retrySyncAfter = time.Second

// startResolver re-resolves every tool's variants periodically, so a
// binary installed later (or removed) changes what this host shows.
func (n *Node) startResolver() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(n.cfg.ResolveEvery)
		defer t.Stop()
		for {
			select {
			case <-n.ctx.Done():
				return
			case <-t.C:
				if n.catalog.Rebuild(n.liveTools, n.liveTool) {
					kick(n.metaKick)
					n.logger.Printf("re-resolved variants: this host now runs %d tools", n.catalog.Count())
				}
			}
		}
	}()
}

// logProblems logs each invalid file of dir once per distinct reason.
func (n *Node) logProblems(kind, dir string, probs []registry.Problem) {
	present := map[string]bool{}
	n.pub.mu.Lock()
	defer n.pub.mu.Unlock()
	for _, p := range probs {
		present[p.File] = true
		reason := p.Err.Error()
		if n.pub.problems[p.File] != reason {
			n.warnf("%s: skipping invalid %s: %s (a valid version already published is kept)", kind, p.File, reason)
			n.pub.problems[p.File] = reason
		}
	}
	for f := range n.pub.problems {
		if filepath.Dir(f) == dir && !present[f] {
			delete(n.pub.problems, f)
		}
	}
}

// invalidNames are the names whose files exist but are invalid: their
// published versions are kept, not withdrawn.
func invalidNames(probs []registry.Problem, suffix string) map[string]bool {
	out := map[string]bool{}
	for _, p := range probs {
		if base := filepath.Base(p.File); strings.HasSuffix(base, suffix) {
			out[strings.TrimSuffix(base, suffix)] = true
		}
	}
	return out
}

// toolScan is one read of the tools directory (registry.ScanTools).
type toolScan struct {
	found map[string]registry.DirTool
	probs []registry.Problem
	err   error
	took  time.Duration
}

// scanTools reads the tools directory; nil when the node has none.
func (n *Node) scanTools() *toolScan {
	if n.cfg.ToolsDir == "" {
		return nil
	}
	t0 := time.Now()
	s := &toolScan{}
	s.found, s.probs, s.err = registry.ScanTools(n.cfg.ToolsDir)
	s.took = time.Since(t0)
	return s
}

// syncTools publishes what changed in the tools directory and withdraws
// the tools this node owns that are gone from it.
func (n *Node) syncTools() bool { return n.syncToolsFrom(n.scanTools()) }

// syncToolsFrom is syncTools with the directory already read.
func (n *Node) syncToolsFrom(scan *toolScan) bool {
	if scan == nil {
		return true
	}
	if scan.err != nil {
		n.warnf("tools: cannot read %s: %v", n.cfg.ToolsDir, scan.err)
		return true // nothing to retry until the directory changes
	}
	t0 := time.Now()
	found, probs := scan.found, scan.probs
	n.logProblems("tools", n.cfg.ToolsDir, probs)
	keep := invalidNames(probs, ".meta")

	var specs []raftfsm.ToolSpec
	for name, dt := range found {
		spec := raftfsm.ToolSpec{Name: name, Meta: dt.Meta, Sig: n.dirSig(name)}
		if dt.Exec != "" {
			spec.ExecHash, spec.Size = n.storeExec(dt.Exec)
		}
		cur, ok := n.fsm.Tool(name)
		if spec.Sig == nil && n.dirSigner != nil {
			spec.Sig = n.signOwn(cur, spec)
		}
		if ok && cur.Owner == n.cfg.Name && cur.Origin == raftfsm.OriginDir && bytes.Equal(cur.Meta, dt.Meta) && cur.ExecHash == spec.ExecHash && bytes.Equal(cur.Sig, spec.Sig) {
			continue
		}
		if err := n.fsm.CheckTool(name, spec.Meta, spec.ExecHash, spec.Sig); err != nil {
			// Left out of the batch, so the directory's other tools
			// publish; the leader and every node would refuse it.
			n.warnf("tools: %s is not published: %v", name, err)
			continue
		}
		n.logNotes(name, dt.Notes)
		specs = append(specs, spec)
	}
	var gone []string
	for _, t := range n.fsm.Tools() {
		if t.Owner == n.cfg.Name && t.Origin == raftfsm.OriginDir && found[t.Name].Name == "" && !keep[t.Name] {
			gone = append(gone, t.Name)
		}
	}
	t1 := time.Now()
	nspecs, ncmds := len(specs), 0
	defer func() {
		n.cfg.Logger.Debug("tools: synced", "dir", n.cfg.ToolsDir, "valid", len(found), "invalid", len(probs),
			"scan", scan.took.Round(10*time.Microsecond), "compare", t1.Sub(t0).Round(10*time.Microsecond),
			"published", nspecs, "withdrawn", len(gone), "commands", ncmds, "publish", time.Since(t1).Round(10*time.Microsecond))
	}()
	if len(specs) > 0 {
		// What is published resolves from the parses just made.
		n.catalog.Offer(found)
		defer n.catalog.DropHints()
	}
	// Batches name distinct tools, and the executables they name by
	// digest are in this node's store already, so they are proposed together: the leader validates them in
	// parallel and Raft writes them to its log in one go.
	var wg sync.WaitGroup
	var failed atomic.Bool
	slots := make(chan struct{}, publishInFlight)
	for len(specs) > 0 {
		ncmds++
		k, size := 0, 0
		for k < len(specs) && k < publishBatch && (k == 0 || size+len(specs[k].Meta) <= publishBatchBytes) {
			size += len(specs[k].Meta)
			k++
		}
		batch := specs[:k]
		specs = specs[k:]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			cmd := raftfsm.PublishTools{Owner: n.cfg.Name, Origin: raftfsm.OriginDir, Time: time.Now().UnixNano(), Tools: batch}
			if _, err := n.applyOwn("publish-tools", toolNames(batch), raftfsm.CmdPublishTools, cmd); err != nil {
				n.warnf("tools: publishing %d tools failed: %v (will retry)", len(batch), err)
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		return false
	}
	if len(gone) > 0 {
		if _, err := n.applyOwn("withdraw-tools", gone, raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{Owner: n.cfg.Name, Origin: raftfsm.OriginDir, Names: gone, Time: nowNano()}); err != nil {
			n.warnf("tools: withdrawing %s failed: %v (will retry)", strings.Join(gone, ", "), err)
			return false
		}
	}
	return true
}

// signOwn signs a tool of the tools directory with -sign-key: the
// signature the tool already carries when its content is unchanged (an
// ECDSA signature differs at every signing, and a rescan must make no
// version), else a new one.
func (n *Node) signOwn(cur *raftfsm.Tool, spec raftfsm.ToolSpec) []byte {
	if cur != nil && len(cur.Sig) > 0 && bytes.Equal(cur.Meta, spec.Meta) && cur.ExecHash == spec.ExecHash {
		return cur.Sig
	}
	sig, err := n.dirSigner.Sign(signing.Tool(spec.Name, spec.Meta, spec.ExecHash))
	if err != nil {
		n.warnf("tools: signing %s with -sign-key: %v", spec.Name, err)
		return nil
	}
	return sig
}

// maxSigFile bounds NAME.sig in a tools directory.
const maxSigFile = 16 << 10

// dirSig reads NAME.sig beside NAME.meta in the tools directory: the
// armored SSH signature over the tool's manifest; nil when there is none.
func (n *Node) dirSig(name string) []byte {
	p := filepath.Join(n.cfg.ToolsDir, name+".sig")
	fi, err := os.Stat(p)
	if err != nil {
		return nil
	}
	if fi.Size() > maxSigFile {
		n.warnf("tools: %s is %d bytes, not a signature (at most %d); %s is published unsigned", p, fi.Size(), maxSigFile, name)
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		n.warnf("tools: cannot read %s: %v", p, err)
		return nil
	}
	return b
}

// ExecHashOf is the content address of an executable.
func ExecHashOf(b []byte) string { return raftfsm.ExecHash(b) }

// storeExec puts an executable of the tools directory into the blob
// store, streamed (never whole in memory), and returns its digest and
// size; "" for a file over -max-exec-size or unreadable. While the file's
// size and modification time are unchanged and the store has its
// digest, it is not read again.
func (n *Node) storeExec(path string) (string, int64) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0
	}
	if fi.Size() > n.maxExec() {
		n.warnf("tools: %s is %d bytes, over the %d-byte -max-exec-size: publishing its metadata only", path, fi.Size(), n.maxExec())
		return "", 0
	}
	n.pub.mu.Lock()
	h, ok := n.pub.hashes[path]
	n.pub.mu.Unlock()
	if ok && h.size == fi.Size() && h.mtime.Equal(fi.ModTime()) && n.blobs.Store().Has(h.hash) {
		return h.hash, h.size
	}
	d, size, err := n.blobs.Store().PutFile(path, n.maxExec())
	if err != nil {
		n.warnf("tools: cannot store %s: %v", path, err)
		return "", 0
	}
	n.pub.mu.Lock()
	n.pub.hashes[path] = hashed{size: size, mtime: fi.ModTime(), hash: d}
	n.pub.mu.Unlock()
	return d, size
}

// syncProfiles does for the agents directory what syncTools does for
// tools.
func (n *Node) syncProfiles() bool {
	if n.cfg.AgentsDir == "" {
		return true
	}
	found, probs, err := registry.ScanProfiles(n.cfg.AgentsDir)
	if err != nil {
		n.warnf("agents: cannot read %s: %v", n.cfg.AgentsDir, err)
		return true
	}
	n.logProblems("agents", n.cfg.AgentsDir, probs)
	keep := invalidNames(probs, ".json")
	var specs []raftfsm.ProfileSpec
	for name, p := range found {
		if cur, ok := n.fsm.Profile(name); ok && cur.Owner == n.cfg.Name && cur.Origin == raftfsm.OriginDir && bytes.Equal(cur.Data, p.Data) {
			continue
		}
		specs = append(specs, raftfsm.ProfileSpec{Name: name, Data: p.Data, AutoLoad: p.Parsed.AutoLoad, Tools: p.Parsed.Tools})
	}
	var gone []string
	for _, p := range n.fsm.Profiles() {
		if _, ok := found[p.Name]; !ok && p.Owner == n.cfg.Name && p.Origin == raftfsm.OriginDir && !keep[p.Name] {
			gone = append(gone, p.Name)
		}
	}
	if len(specs) > 0 {
		if _, err := n.applyOwn("publish-profiles", profileNames(specs), raftfsm.CmdPublishProfiles, raftfsm.PublishProfiles{Owner: n.cfg.Name, Origin: raftfsm.OriginDir, Profiles: specs, Time: nowNano()}); err != nil {
			n.warnf("agents: publishing profiles failed: %v (will retry)", err)
			return false
		}
	}
	if len(gone) > 0 {
		if _, err := n.applyOwn("withdraw-profiles", gone, raftfsm.CmdWithdrawProfiles, raftfsm.WithdrawProfiles{Owner: n.cfg.Name, Origin: raftfsm.OriginDir, Names: gone}); err != nil {
			n.warnf("agents: withdrawing profiles failed: %v (will retry)", err)
			return false
		}
	}
	return true
}

// fetchSince starts fetching the executables of tools published after
// index that this node does not have; it returns the index it reached.
func (n *Node) fetchSince(index uint64) uint64 {
	reached := n.fsm.LastIndex()
	n.ensureAllBlobs(index)
	return reached
}
