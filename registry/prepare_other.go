//go:build !linux

package registry

// Without Landlock no call is sandboxed, and none is prepared ahead.

import "sync"

// prepState only tracks the work done after calls here.
type prepState struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (r *Runner) background(f func()) bool {
	r.prep.mu.Lock()
	if r.prep.closed {
		r.prep.mu.Unlock()
		return false
	}
	r.prep.wg.Add(1)
	r.prep.mu.Unlock()
	go func() {
		defer r.prep.wg.Done()
		f()
	}()
	return true
}

func (r *Runner) closePrepared() {
	r.prep.mu.Lock()
	r.prep.closed = true
	r.prep.mu.Unlock()
	r.prep.wg.Wait()
}

type prepared struct {
	scratch string
	group   *callGroup
}

func (r *Runner) takePrepared(*sandboxSpec) *prepared { return nil }
func (r *Runner) refill(*sandboxSpec, bool)           {}
func (p *prepared) closeRuleset()                     {}

func (p *prepared) callGroup() *callGroup { return nil }

func (r *Runner) preparedScratch() ([]string, int) { return nil, 0 }

func (p *prepared) callThread() *callThread { return nil }
