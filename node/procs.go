package node

import (
	"runtime"
	"sync"
	"time"
)

// A client's processors. An idle node's CPU is its wake-ups, and with a
// second processor each event (a gossip tick, a probe, a heartbeat of the
// stream) wakes a second thread besides the one that handles it: the
// runtime starts a spinning thread for the idle processor, which finds
// nothing and sleeps again. A client's own work is gossip, the stream and
// serving 9P; the tools it runs are child processes, which the setting
// does not limit. So an idle client runs on Config.ClientProcs processors.
// A server, which replicates Raft and serves the stream, and a client
// while it runs calls (and callProcsLinger after the last) run on the
// runtime's default: a call's fork, exec and wait are system calls that
// hold a processor, and the rest of the node should not wait for them.
// GOMAXPROCS is the process's, so only a process that runs one node sets
// ClientProcs (cmd/toolnode does, unless $GOMAXPROCS is set).

// callProcsLinger is how long a client keeps the default after its last
// call ended: calls come in bursts, and each change of GOMAXPROCS stops
// the world.
const callProcsLinger = 5 * time.Second

// procs applies Config.ClientProcs as the node's role and calls change.
type procs struct {
	mu     sync.Mutex
	on     bool        // the node has started: its role now decides
	client bool        // the node is a client
	calls  int         // calls running here
	low    bool        // ClientProcs is in force
	lower  *time.Timer // puts ClientProcs back after callProcsLinger

	// set and reset change the process's setting (GOMAXPROCS, back to
	// the default); nil: the runtime's. linger: 0 is callProcsLinger.
	set    func(n int)
	reset  func()
	linger time.Duration
}

// procsToLow and procsToDefault change the setting. p.mu is held.
func (n *Node) procsToLow() {
	p := &n.procs
	if p.set != nil {
		p.set(n.cfg.ClientProcs)
	} else {
		runtime.GOMAXPROCS(n.cfg.ClientProcs)
	}
	p.low = true
}

func (n *Node) procsToDefault() {
	p := &n.procs
	if p.reset != nil {
		p.reset()
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
	p.low = false
}

// applyProcs sets the processors for the node's role. It does nothing
// until the node has started (a start with state uses every processor:
// the catalog is built by GOMAXPROCS workers; a node that starts as a
// client has none, and took ClientProcs at once: startAsClient) or
// without ClientProcs.
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
	p.client = !n.rep.isServer.Load()
	switch {
	case p.client && !p.low && p.calls == 0 && p.lower == nil:
		n.procsToLow()
		n.logger.Printf("[DEBUG] procs: a client: GOMAXPROCS %d", n.cfg.ClientProcs)
	case !p.client && p.low:
		n.procsToDefault()
		n.logger.Printf("[DEBUG] procs: a server: GOMAXPROCS back to the default, %d", runtime.GOMAXPROCS(0))
	}
}

// startAsClient puts a node that starts as a client (it joins with no
// Raft state) on ClientProcs before its start, rather than after it:
// changing GOMAXPROCS stops the world and frees the caches of the
// processor it drops, which after a start cost a client ~3 ms of CPU
// (6 % of its start while fifty nodes formed a cluster); and a start on
// one processor wakes no second thread for each event it handles. Such a
// node has no state to build a catalog from: the catalog arrives with
// the stream, after the start. Should the leader add it to Raft, it goes
// back to the default as any server does.
func (n *Node) startAsClient() {
	if n.cfg.ClientProcs <= 0 {
		return
	}
	p := &n.procs
	p.mu.Lock()
	defer p.mu.Unlock()
	n.procsToLow()
}

// startProcs lets the role decide the processors from now on.
func (n *Node) startProcs() {
	n.procs.mu.Lock()
	n.procs.on = true
	n.procs.mu.Unlock()
	n.applyProcs()
}

// procsCall counts a call that starts (+1) or ends (-1) here: a client
// runs calls on the default, and goes back to ClientProcs callProcsLinger
// after the last one ended.
func (n *Node) procsCall(d int) {
	if n.cfg.ClientProcs <= 0 {
		return
	}
	p := &n.procs
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls += d
	if d > 0 {
		if p.lower != nil {
			p.lower.Stop()
			p.lower = nil
		}
		if p.low {
			n.procsToDefault()
		}
		return
	}
	if p.calls > 0 || !p.client || p.low || p.lower != nil {
		return
	}
	linger := p.linger
	if linger == 0 {
		linger = callProcsLinger
	}
	var t *time.Timer
	t = time.AfterFunc(linger, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.lower != t {
			return // a call came meanwhile
		}
		p.lower = nil
		if p.calls == 0 && p.client && !p.low && n.ctx.Err() == nil {
			n.procsToLow()
		}
	})
	p.lower = t
}
