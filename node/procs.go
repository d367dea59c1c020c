package node

import (
	"runtime"
	"sync"
)

// A client's processors. An idle node's CPU is its wake-ups, and with a
// second processor each event (a gossip tick, a probe, a heartbeat of the
// stream) wakes a second thread besides the one that handles it: the
// runtime starts a spinning thread for the idle processor, which finds
// nothing and sleeps again. A client's own work is gossip, the stream and
// serving 9P; the tools it runs are child processes, which the setting
// does not limit. So a client runs on Config.ClientProcs processors and a
// server, which replicates Raft and serves the stream, on the runtime's
// default. GOMAXPROCS is the process's, so only a process that runs one
// node sets ClientProcs (cmd/toolnode does, unless $GOMAXPROCS is set).

// procs applies Config.ClientProcs as the node's role changes.
type procs struct {
	mu     sync.Mutex
	on     bool // the node has started: its role now decides
	client bool // ClientProcs is in force
}

// setGOMAXPROCS and defaultGOMAXPROCS change the process's setting; tests
// replace them.
var (
	setGOMAXPROCS     = func(n int) { runtime.GOMAXPROCS(n) }
	defaultGOMAXPROCS = runtime.SetDefaultGOMAXPROCS
)

// applyProcs sets the processors for the node's role. It does nothing
// until the node has started (a start uses every processor: the catalog
// is built by GOMAXPROCS workers) or without ClientProcs.
func (n *Node) applyProcs() {
	if n.cfg.ClientProcs <= 0 {
		return
	}
	p := &n.procs
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	client := !n.rep.isServer.Load()
	switch {
	case client && !p.client:
		setGOMAXPROCS(n.cfg.ClientProcs)
		n.logger.Printf("[DEBUG] procs: a client: GOMAXPROCS %d", n.cfg.ClientProcs)
	case !client && p.client:
		defaultGOMAXPROCS()
		n.logger.Printf("[DEBUG] procs: a server: GOMAXPROCS back to the default, %d", runtime.GOMAXPROCS(0))
	}
	p.client = client
}

// startProcs lets the role decide the processors from now on.
func (n *Node) startProcs() {
	n.procs.mu.Lock()
	n.procs.on = true
	n.procs.mu.Unlock()
	n.applyProcs()
}
