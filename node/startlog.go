package node

import (
	"log/slog"
	"time"
)

// startSteps times the steps of a node's start and logs each at DEBUG
// ("start: STEP" with how long it took and the time since New began),
// so a slow start can be read off the log (-log-level debug).
// The same type times the stop ("stop: STEP", newStopSteps).
type startSteps struct {
	log    *slog.Logger
	prefix string
	since  string
	begin  time.Time
	last   time.Time
}

func newStartSteps(l *slog.Logger) *startSteps {
	now := time.Now()
	return &startSteps{log: l, prefix: "start: ", since: "since-new", begin: now, last: now}
}

func newStopSteps(l *slog.Logger) *startSteps {
	now := time.Now()
	return &startSteps{log: l, prefix: "stop: ", since: "since-close", begin: now, last: now}
}

// step logs that the step named what has just ended, with args.
func (s *startSteps) step(what string, args ...any) {
	if s == nil {
		return
	}
	now := time.Now()
	s.log.Debug(s.prefix+what, append([]any{"took", now.Sub(s.last).Round(10 * time.Microsecond), s.since, now.Sub(s.begin).Round(10 * time.Microsecond)}, args...)...)
	s.last = now
}
