package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/toolnode/toolnode/catalog"
	"github.com/toolnode/toolnode/logx"
	"github.com/toolnode/toolnode/mcphost"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/sandbox"
	"github.com/toolnode/toolnode/upstream"
)

// Wiring of package mcphost (DESIGN §9): the replicated definitions
// (m/NAME.json) run on this host where they match, their tools published
// as tools of origin mcp and visible here while a server running here
// offers them, their calls made through the server.

// upstreams is the node's share of the upstream MCP servers.
type upstreams struct {
	host *mcphost.Host
	defs chan struct{} // the definitions changed: Sync again
	dir  chan struct{} // the -mcp-servers directory changed
	pub  chan struct{} // a server's tools changed: publish them
	done chan struct{} // the loops ended
}

// setupUpstream makes the Host and tells the catalog which tools of
// origin mcp this host offers; before the catalog's first Rebuild.
func (n *Node) setupUpstream(h registry.Host) {
	n.up = upstreams{defs: make(chan struct{}, 1), dir: make(chan struct{}, 1), pub: make(chan struct{}, 1)}
	// A sandbox of its own, confined as the tools are: the servers'
	// processes are held by their threads, not by the calls' cgroups.
	sb := sandbox.New(sandbox.Config{Off: n.cfg.Yolo, ScratchDir: n.scratchDir(), Protected: n.protectedPaths()})
	n.up.host = mcphost.New(mcphost.Config{
		Host:     h,
		StateDir: filepath.Join(n.cfg.DataDir, "mcp"),
		Connect:  mcphost.Sandboxed(sb, logx.Writer(n.cfg.Logger, slog.LevelInfo)),
		Publish:  func(string, []upstream.Tool) { kick(n.up.pub) },
		Logf:     n.logger.Printf,
	})
	n.catalog.SetUpstream(n.up.host.Offers)
}

// startUpstream runs the loops: Sync on every change of the
// definitions, publishing the servers' tools, the -mcp-servers directory.
func (n *Node) startUpstream() {
	if n.cfg.McpServersDir != "" {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			err := registry.WatchDir(n.ctx, n.cfg.McpServersDir, n.cfg.Debounce, n.logger.Printf, func() { kick(n.up.dir) })
			if err != nil && n.ctx.Err() == nil {
				n.warnf("watching %s stopped: %v", n.cfg.McpServersDir, err)
			}
		}()
		kick(n.up.dir)
	}
	kick(n.up.defs)
	n.up.done = make(chan struct{})
	go func() {
		defer close(n.up.done)
		retry := time.NewTimer(time.Hour)
		defer retry.Stop()
		for {
			select {
			case <-n.ctx.Done():
				return
			case <-n.up.defs:
				n.up.host.Sync(n.serverDefs())
				kick(n.up.pub)
			case <-n.up.dir:
				if !n.syncServersDir() {
					retry.Reset(time.Second)
				}
			case <-n.up.pub:
				if !n.publishUpstreamTools() {
					retry.Reset(time.Second)
				}
			case <-retry.C:
				kick(n.up.dir)
				kick(n.up.pub)
			}
		}
	}()
}

// stopUpstream stops the servers running here; after n.ctx is done.
func (n *Node) stopUpstream() {
	if n.up.host == nil {
		return
	}
	if n.up.done != nil {
		select {
		case <-n.up.done:
		case <-time.After(5 * time.Second):
		}
	}
	n.up.host.Close()
}

// serverDefs are the replicated definitions by name.
func (n *Node) serverDefs() map[string][]byte {
	out := map[string][]byte{}
	for _, s := range n.fsm.Servers() {
		out[s.Name] = s.Data
	}
	return out
}

// publishUpstreamTools publishes the tools the servers running here offer
// that the cluster does not have as offered, and withdraws those of
// this node that a running server stopped offering; then re-resolves
// every tool of origin mcp here. It reports whether every write went
// through.
func (n *Node) publishUpstreamTools() bool {
	ok := true
	for _, srv := range n.up.host.Running() {
		tools := n.up.host.Tools(srv)
		if tools == nil {
			continue // not serving now: another host may still be
		}
		offered := map[string]bool{}
		var specs []raftfsm.ToolSpec
		for _, t := range tools {
			offered[t.Name] = true
			meta := mcphost.Meta(t)
			if cur, have := n.fsm.Tool(t.Name); have && cur.Origin == raftfsm.OriginMCP && bytes.Equal(cur.Meta, meta) {
				continue
			}
			specs = append(specs, raftfsm.ToolSpec{Name: t.Name, Meta: meta})
		}
		var gone []string
		for _, t := range n.fsm.Tools() {
			if s, _, _ := upstream.SplitToolName(t.Name); s == srv && t.Origin == raftfsm.OriginMCP && t.Owner == n.cfg.Name && !offered[t.Name] {
				gone = append(gone, t.Name)
			}
		}
		if len(specs) > 0 {
			if _, err := n.applyOwn("publish-tools", toolNames(specs), raftfsm.CmdPublishTools, raftfsm.PublishTools{Owner: n.cfg.Name, Origin: raftfsm.OriginMCP, Time: nowNano(), Tools: specs}); err != nil {
				n.warnf("mcp server %s: publishing its tools failed: %v (will retry)", srv, err)
				ok = false
			}
		}
		if len(gone) > 0 {
			if _, err := n.applyOwn("withdraw-tools", gone, raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{Owner: n.cfg.Name, Origin: raftfsm.OriginMCP, Names: gone}); err != nil {
				n.warnf("mcp server %s: withdrawing its tools failed: %v (will retry)", srv, err)
				ok = false
			}
		}
	}
	var names []string
	for _, t := range n.fsm.Tools() {
		if t.Origin == raftfsm.OriginMCP {
			names = append(names, t.Name)
		}
	}
	if len(names) > 0 {
		n.catalog.Update(names, n.liveTool)
		kick(n.metaKick)
	}
	return ok
}

// syncServersDir publishes the definitions of the -mcp-servers
// directory (NAME.json) and withdraws those this node published from it
// that are gone. A definition that is not one is logged and left out.
func (n *Node) syncServersDir() bool {
	dir := n.cfg.McpServersDir
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	if err != nil {
		n.warnf("mcp servers: cannot read %s: %v", dir, err)
		return true
	}
	found := map[string]bool{}
	ok := true
	for _, e := range ents {
		name, isJSON := strings.CutSuffix(e.Name(), ".json")
		if !isJSON || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			n.warnf("mcp servers: %v", err)
			continue
		}
		if _, err := upstream.Parse(name, data); err != nil {
			n.warnf("mcp servers: %s not published: %v", filepath.Join(dir, e.Name()), err)
			found[name] = true // keep what was published before
			continue
		}
		found[name] = true
		if cur, have := n.fsm.Server(name); have && bytes.Equal(cur.Data, data) {
			continue
		}
		if _, err := n.applyOwn("put-server", []string{name}, raftfsm.CmdPutServer, raftfsm.PutServer{Owner: n.cfg.Name, Origin: raftfsm.OriginDir, Time: nowNano(), Name: name, Data: data}); err != nil {
			n.warnf("mcp servers: publishing %s failed: %v (will retry)", name, err)
			ok = false
		}
	}
	for _, s := range n.fsm.Servers() {
		if !found[s.Name] && s.Owner == n.cfg.Name && s.Origin == raftfsm.OriginDir {
			if _, err := n.applyOwn("drop-server", []string{s.Name}, raftfsm.CmdDropServer, raftfsm.DropServer{Owner: n.cfg.Name, Origin: raftfsm.OriginDir, Name: s.Name}); err != nil {
				n.warnf("mcp servers: withdrawing %s failed: %v (will retry)", s.Name, err)
				ok = false
			}
		}
	}
	return ok
}

// upstreamChanged is the FSM observer's part: a definition changed.
func (n *Node) upstreamChanged() {
	if n.up.defs != nil {
		kick(n.up.defs)
	}
}

// runUpstream is the run of a call of a tool of origin mcp offered here:
// a slot of the call queue, the call timeout, the server's tools/call.
func (n *Node) runUpstream(ctx context.Context, e *catalog.Entry, args []byte, lines sandbox.LineFunc) ([]byte, error) {
	name := e.Tool.Name
	n.metrics.Running(1)
	defer n.metrics.Running(-1)
	if err := n.calls.Acquire(ctx); err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	defer n.calls.Release()
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	var progress upstream.Progress
	if lines != nil {
		// The server's progress reaches the MCP session as a tool's
		// "progress N/M MESSAGE" line on fd 3 does.
		progress = func(p, total float64, msg string) {
			line := "progress " + strconv.FormatFloat(p, 'f', -1, 64)
			if total > 0 {
				line += "/" + strconv.FormatFloat(total, 'f', -1, 64)
			}
			if msg != "" {
				line += " " + msg
			}
			lines(sandbox.FdSide, line)
		}
	}
	out, err := n.up.host.Call(ctx, name, args, progress)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("tool %q timed out after %s: %w", name, n.cfg.CallTimeout, err)
	}
	n.metrics.Call(name, n.cfg.Name, time.Since(start), err)
	return out, err
}

// The m/ files (p9.Servers).

func (n *Node) ServerNames() []string {
	var out []string
	for _, s := range n.fsm.Servers() {
		out = append(out, s.Name)
	}
	return out
}

func (n *Node) ServerDef(name string) ([]byte, bool) {
	s, ok := n.fsm.Server(name)
	if !ok {
		return nil, false
	}
	return s.Data, true
}

func (n *Node) ServerTime(name string) time.Time {
	if s, ok := n.fsm.Server(name); ok && s.Time > 0 {
		return time.Unix(0, s.Time)
	}
	return time.Time{}
}

func (n *Node) PublishServer(name string, data []byte) error {
	return n.publishServer(caller{}, name, data)
}

func (n *Node) publishServer(c caller, name string, data []byte) error {
	if _, err := upstream.Parse(name, data); err != nil {
		n.logger.Printf("m/%s.json refused: %v", name, err)
		return fmt.Errorf("%v; nothing was published", err)
	}
	_, err := n.applyFor(c, raftfsm.CmdPutServer, raftfsm.PutServer{Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name, Data: data})
	return err
}

func (n *Node) WithdrawServer(name string) error { return n.withdrawServer(caller{}, name) }

func (n *Node) withdrawServer(c caller, name string) error {
	if _, ok := n.fsm.Server(name); !ok {
		return fmt.Errorf("file does not exist: no mcp server %q in the cluster", name)
	}
	_, err := n.applyFor(c, raftfsm.CmdDropServer, raftfsm.DropServer{Name: name})
	return err
}

func (a auditBackend) PublishServer(name string, data []byte) error {
	start := time.Now()
	err := a.Node.publishServer(a.caller(), name, data)
	a.record(start, a.who, "put-server", name, err)
	return err
}

func (a auditBackend) WithdrawServer(name string) error {
	start := time.Now()
	err := a.Node.withdrawServer(a.caller(), name)
	a.record(start, a.who, "drop-server", name, err)
	return err
}
