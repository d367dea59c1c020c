package procs

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// Linger is how long a client keeps the default after its last call
// ended: calls come in bursts, and each change of GOMAXPROCS stops the
// world.
const Linger = 5 * time.Second

// Procs applies ClientProcs as the node's role and calls change. Its
// zero value is not usable; make one with New.
type Procs struct {
	ctx         context.Context
	clientProcs int
	logf        func(format string, args ...any)

	mu     sync.Mutex
	on     bool        // the node has started: its role now decides
	client bool        // the node is a client
	calls  int         // calls running here
	low    bool        // ClientProcs is in force
	lower  *time.Timer // puts ClientProcs back after the linger

	// set and reset change the process's setting (GOMAXPROCS, back to
	// the default); nil: the runtime's. linger: 0 is Linger.
	set    func(n int)
	reset  func()
	linger time.Duration
}

// New makes the processors' rule of a node with clientProcs (0: none,
// the runtime's default always); it stops lowering them when ctx ends.
func New(ctx context.Context, clientProcs int, logf func(format string, args ...any)) *Procs {
	return &Procs{ctx: ctx, clientProcs: clientProcs, logf: logf}
}

// toLow and toDefault change the setting. p.mu is held.
func (p *Procs) toLow() {
	if p.set != nil {
		p.set(p.clientProcs)
	} else {
		runtime.GOMAXPROCS(p.clientProcs)
	}
	p.low = true
}

func (p *Procs) toDefault() {
	if p.reset != nil {
		p.reset()
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
	p.low = false
}

// Role sets the processors for the node's role. It does nothing until
// the node has started (a start with state uses every processor: the
// catalog is built by GOMAXPROCS workers; a node that starts as a client
// has none, and took ClientProcs at once: StartAsClient) or without
// ClientProcs.
func (p *Procs) Role(client bool) {
	if p.clientProcs <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return
	}
	p.client = client
	switch {
	case p.client && !p.low && p.calls == 0 && p.lower == nil:
		p.toLow()
		p.logf("[DEBUG] procs: a client: GOMAXPROCS %d", p.clientProcs)
	case !p.client && p.low:
		p.toDefault()
		p.logf("[DEBUG] procs: a server: GOMAXPROCS back to the default, %d", runtime.GOMAXPROCS(0))
	}
}

// StartAsClient puts a node that starts as a client (it joins with no
// Raft state) on ClientProcs before its start, rather than after it:
// changing GOMAXPROCS stops the world and frees the caches of the
// processor it drops, which after a start cost a client ~3 ms of CPU
// (6 % of its start while fifty nodes formed a cluster); and a start on
// one processor wakes no second thread for each event it handles. Such a
// node has no state to build a catalog from: the catalog arrives with
// the stream, after the start. Should the leader add it to Raft, it goes
// back to the default as any server does.
func (p *Procs) StartAsClient() {
	if p.clientProcs <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toLow()
}

// Start lets the role decide the processors from now on; client is the
// node's role at its start.
func (p *Procs) Start(client bool) {
	p.mu.Lock()
	p.on = true
	p.mu.Unlock()
	p.Role(client)
}

// Call counts a call that starts (+1) or ends (-1) here: a client runs
// calls on the default, and goes back to ClientProcs Linger after the
// last one ended.
func (p *Procs) Call(d int) {
	if p.clientProcs <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls += d
	if d > 0 {
		if p.lower != nil {
			p.lower.Stop()
			p.lower = nil
		}
		if p.low {
			p.toDefault()
		}
		return
	}
	if p.calls > 0 || !p.client || p.low || p.lower != nil {
		return
	}
	linger := p.linger
	if linger == 0 {
		linger = Linger
	}
	var t *time.Timer
	t = time.AfterFunc(linger, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.lower != t {
			return // a call came meanwhile
		}
		p.lower = nil
		if p.calls == 0 && p.client && !p.low && p.ctx.Err() == nil {
			p.toLow()
		}
	})
	p.lower = t
}
