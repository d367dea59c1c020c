//go:build linux

package sandbox

import (
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Calls prepared ahead. Most of what a sandboxed call needs before its
// tool can start does not depend on the tool: a scratch directory, the
// call's cgroups, and the Landlock ruleset that grants the read view
// (one landlock_add_rule per granted tree, ~150 of them), the scratch
// directory and the devices. A Sandbox makes these ahead, after the call
// before has answered, so that a call takes them ready and only adds its
// own few rules (its cwd, its executable) before landlock_restrict_self.
// Not while the tool of the call before runs: on a host with few cores
// that work took the core the tool needed, and the tool waited for it
// (its time runnable but not running, BENCHMARKS.md). Only when calls
// running at once have taken every ready one of their kind does the
// making start beside their tools.
// The ruleset is the one the call would have built: a prepared call is
// used only while the walks it was filled from are still the views'
// current ones and the layout has not changed since (isCurrent), else it
// is thrown away and the call builds its own. Each is used once: its
// scratch directory is the call's alone.

// Calls prepared per kind: those with no cwd around a protected path
// share one kind; each cached view of a cwd around a protected path is
// one more, for maxPrepTrees of them.
const (
	prepDepth     = 2
	prepTreeDepth = 1
	maxPrepTrees  = 8
)

// prepared is one call made ready.
type prepared struct {
	scratch string
	group   *callGroup
	thread  *callThread // in group, ready to be confined; nil once taken
	ruleset int
	walks   []*fsRules // of the view and the tree, as newRuleset returned them
	// readableMissing: a readable tree did not exist when the ruleset was
	// made; the call that takes it grants them again.
	readableMissing bool
}

type prepSlot struct {
	ready   []*prepared
	filling bool
}

// prepState is a Sandbox's prepared calls, by the view of the cwd they
// grant (nil: none).
type prepState struct {
	mu     sync.Mutex
	slots  map[*fsView]*prepSlot // guarded by mu
	closed bool                  // guarded by mu
	wg     sync.WaitGroup        // the goroutines that fill or throw away

	taken, missed atomic.Int64 // calls that found one ready, and not
}

// prepKey is the kind of call sb is: the view of its cwd (nil: none), and
// whether calls of its kind are prepared at all.
func prepKey(sb *sandboxSpec) (*fsView, bool) {
	switch {
	case len(sb.transient) > 0 || len(sb.trees) > 1:
		return nil, false
	case len(sb.trees) == 1:
		return sb.trees[0], true
	}
	return nil, true
}

// takePrepared returns a call of sb's kind made ready, or nil: none is
// ready, or the layout changed since they were made (they are thrown
// away). sb gets its ruleset and scratch directory.
func (s *Sandbox) takePrepared(sb *sandboxSpec) *prepared {
	key, ok := prepKey(sb)
	if !ok {
		return nil
	}
	ps := &s.prep
	ps.mu.Lock()
	slot := ps.slots[key]
	if slot == nil || len(slot.ready) == 0 || ps.closed {
		ps.mu.Unlock()
		ps.missed.Add(1)
		return nil
	}
	p := slot.ready[len(slot.ready)-1]
	slot.ready = slot.ready[:len(slot.ready)-1]
	ps.mu.Unlock()
	views := []*fsView{sb.view, key}
	for i, w := range p.walks {
		if views[i] != nil && !views[i].isCurrent(w) {
			s.throwAway(key, p)
			ps.missed.Add(1)
			return nil
		}
	}
	ps.taken.Add(1)
	sb.ruleset, sb.prepared, sb.scratch = p.ruleset, true, p.scratch
	if p.readableMissing {
		sb.ro = append(sb.ro, sb.readable...)
	}
	return p
}

// throwAway discards p and every call of its kind made ready, in the
// background: they were filled from the same walks.
func (s *Sandbox) throwAway(key *fsView, p *prepared) {
	ps := &s.prep
	ps.mu.Lock()
	var stale []*prepared
	if slot := ps.slots[key]; slot != nil {
		stale, slot.ready = slot.ready, nil
	}
	stale = append(stale, p)
	if ps.closed {
		ps.mu.Unlock()
		for _, q := range stale {
			q.discard()
		}
		return
	}
	ps.wg.Add(1)
	ps.mu.Unlock()
	go func() {
		defer ps.wg.Done()
		for _, q := range stale {
			q.discard()
		}
	}()
}

// refill makes calls of sb's kind ready, up to their depth, in the
// background; one goroutine at a time per kind. With ifNone it does so
// only when none of the kind is ready.
func (s *Sandbox) refill(sb *sandboxSpec, ifNone bool) {
	key, ok := prepKey(sb)
	if !ok || s.cfg.Off {
		return
	}
	depth := prepDepth
	if key != nil {
		depth = prepTreeDepth
	}
	ps := &s.prep
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return
	}
	slot := ps.slots[key]
	if slot == nil {
		if key != nil && len(ps.slots) > maxPrepTrees {
			return
		}
		if ps.slots == nil {
			ps.slots = make(map[*fsView]*prepSlot)
		}
		slot = &prepSlot{}
		ps.slots[key] = slot
	}
	if slot.filling || len(slot.ready) >= depth || ifNone && len(slot.ready) > 0 {
		return
	}
	slot.filling = true
	ps.wg.Add(1)
	spec := sandboxSpec{view: sb.view, readable: sb.readable}
	if key != nil {
		spec.trees = []*fsView{key}
	}
	go func() {
		defer ps.wg.Done()
		for {
			p, err := s.prepare(spec)
			ps.mu.Lock()
			if err != nil || ps.closed || len(slot.ready) >= depth {
				slot.filling = false
				ps.mu.Unlock()
				if p != nil {
					p.discard()
				}
				return
			}
			slot.ready = append(slot.ready, p)
			full := len(slot.ready) >= depth
			if full {
				slot.filling = false
			}
			ps.mu.Unlock()
			if full {
				return
			}
		}
	}()
}

// prepare makes one call of spec's kind ready: its scratch directory, its
// cgroups and its ruleset. An error leaves nothing behind; the call that
// would have taken it makes its own and meets the error itself.
func (s *Sandbox) prepare(spec sandboxSpec) (*prepared, error) {
	abi, err := Status()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.cfg.ScratchDir, 0o700); err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp(s.cfg.ScratchDir, "call-")
	if err != nil {
		return nil, err
	}
	p := &prepared{scratch: scratch, ruleset: -1}
	if p.group, err = s.containment().newCall(); err != nil {
		p.discard()
		return nil, err
	}
	if p.thread, err = newCallThread(true, p.group); err != nil {
		p.discard()
		return nil, err
	}
	spec.scratch = scratch
	if p.ruleset, p.walks, err = newRuleset(&spec, abi); err != nil {
		p.discard()
		return nil, err
	}
	for _, d := range spec.readable {
		if _, err := os.Stat(d); err != nil {
			p.readableMissing = true
			break
		}
	}
	return p, nil
}

// discard removes what p made.
func (p *prepared) discard() {
	if p.thread != nil {
		p.thread.discard()
		p.thread = nil
	}
	p.closeRuleset()
	p.group.finish()
	removeAll(p.scratch)
}

// closeRuleset closes p's ruleset; the call that took it does once its
// tool started.
func (p *prepared) closeRuleset() {
	if p != nil && p.ruleset >= 0 {
		_ = unix.Close(p.ruleset)
		p.ruleset = -1
	}
}

// background runs f in a goroutine that Close waits for, unless the
// Sandbox is closed: then it returns false.
func (s *Sandbox) background(f func()) bool {
	ps := &s.prep
	ps.mu.Lock()
	if ps.closed {
		ps.mu.Unlock()
		return false
	}
	ps.wg.Add(1)
	ps.mu.Unlock()
	go func() {
		defer ps.wg.Done()
		f()
	}()
	return true
}

// closePrepared stops making calls ready and throws away those that are.
func (s *Sandbox) closePrepared() {
	ps := &s.prep
	ps.mu.Lock()
	ps.closed = true
	ps.mu.Unlock()
	ps.wg.Wait()
	ps.mu.Lock()
	slots := ps.slots
	ps.slots = nil
	ps.mu.Unlock()
	for _, slot := range slots {
		for _, p := range slot.ready {
			p.discard()
		}
	}
}

// preparedScratch lists the scratch directories of the calls made ready,
// and how many descriptors they hold.
func (s *Sandbox) preparedScratch() (dirs []string, fds int) {
	ps := &s.prep
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, slot := range ps.slots {
		for _, p := range slot.ready {
			dirs = append(dirs, p.scratch)
			fds += 1 + p.group.fds()
		}
	}
	return dirs, fds
}

// callGroup is p's cgroups; nil for no p.
func (p *prepared) callGroup() *callGroup {
	if p == nil {
		return nil
	}
	return p.group
}

// callThread is p's thread; nil for no p.
func (p *prepared) callThread() *callThread {
	if p == nil {
		return nil
	}
	return p.thread
}
