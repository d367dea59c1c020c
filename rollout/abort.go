package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolnode/toolnode/raftfsm"
)

// ReportEvery is how often a canary node reports new outcomes and the
// leader looks for failing canaries.
const ReportEvery = time.Second

// NoteCall counts one call of t run here, with its outcome, when t is the
// canary version live on this node.
func (s *Service) NoteCall(t *raftfsm.Tool, err error) {
	c, ok := s.cfg.FSM.Canary(t.Name)
	if !ok || !c.On(s.cfg.Node) || c.Tool.Version != t.Version {
		return
	}
	s.tally.mu.Lock()
	defer s.tally.mu.Unlock()
	if s.tally.out == nil {
		s.tally.out = map[string]outcome{}
	}
	o := s.tally.out[t.Name]
	if o.version != t.Version {
		o = outcome{version: t.Version}
	}
	o.calls++
	if err != nil {
		o.failed++
	}
	s.tally.out[t.Name] = o
}

// Watch reports this node's canary outcomes and, on the leader, aborts
// the failing canaries, every ReportEvery until ctx ends.
func (s *Service) Watch(ctx context.Context) {
	tick := time.NewTicker(ReportEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.report()
		if s.cfg.Leading() {
			s.abortFailing()
		}
	}
}

// report proposes the outcomes counted since the last report.
func (s *Service) report() {
	s.tally.mu.Lock()
	out := s.tally.out
	s.tally.out = nil
	s.tally.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(out)) {
		o := out[name]
		_, err := s.cfg.Apply(Caller{}, raftfsm.CmdCanaryReport, raftfsm.CanaryReport{
			Name: name, Version: o.version, Node: s.cfg.Node, Calls: o.calls, Failed: o.failed,
		})
		if err != nil {
			// A canary promoted or aborted since: nothing to count.
			s.cfg.Logf("versions: the report of %d calls (%d failed) of canary %s version %d was not counted: %v", o.calls, o.failed, name, o.version, err)
		}
	}
}

// abortFailing aborts every failing canary; run on the leader.
func (s *Service) abortFailing() {
	for _, c := range s.cfg.FSM.Canaries() {
		if !c.Failing() {
			continue
		}
		start := time.Now()
		reason := fmt.Sprintf("%d of its %d calls failed", c.Failed, c.Calls)
		err := s.Abort(Caller{}, c.Name, "automatic: "+reason)
		s.cfg.Record(start, "node:"+s.cfg.Node, "abort", c.Name+"@"+strconv.FormatUint(c.Tool.Version, 10)+" (automatic: "+reason+")", err)
		if err == nil {
			s.cfg.Logf("versions: aborted the canary of %s, version %d on %s: %s (more than half of at least %d)", c.Name, c.Tool.Version, strings.Join(c.Nodes, ","), reason, raftfsm.FailMinCalls)
		}
	}
}
