//go:build !linux

package sandbox

// Without Landlock no call is sandboxed, and none is prepared ahead.

import "sync"

// prepState only tracks the work done after calls here.
type prepState struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func (s *Sandbox) background(f func()) bool {
	s.prep.mu.Lock()
	if s.prep.closed {
		s.prep.mu.Unlock()
		return false
	}
	s.prep.wg.Add(1)
	s.prep.mu.Unlock()
	go func() {
		defer s.prep.wg.Done()
		f()
	}()
	return true
}

func (s *Sandbox) closePrepared() {
	s.prep.mu.Lock()
	s.prep.closed = true
	s.prep.mu.Unlock()
	s.prep.wg.Wait()
}

type prepared struct {
	scratch string
	group   *callGroup
}

func (s *Sandbox) takePrepared(*sandboxSpec) *prepared { return nil }
func (s *Sandbox) refill(*sandboxSpec, bool)           {}
func (p *prepared) closeRuleset()                      {}

func (p *prepared) callGroup() *callGroup { return nil }

func (s *Sandbox) preparedScratch() ([]string, int) { return nil, 0 }

func (p *prepared) callThread() *callThread { return nil }
