package p9

import (
	"context"
	"sync"
)

// EventRing is an EventLog kept in memory: a bounded ring of the newest
// events, numbered in the order they were added. Readers that fall more
// than the ring's size behind skip to the oldest kept event.
type EventRing struct {
	mu   sync.Mutex
	ring []Event
	max  int
	last uint64
	wake chan struct{} // closed and replaced on every add
}

var _ EventLog = (*EventRing)(nil)

// NewEventRing returns an empty ring that keeps the newest max events.
func NewEventRing(max int) *EventRing {
	return &EventRing{max: max, wake: make(chan struct{})}
}

// Add adds one event.
func (l *EventRing) Add(kind, name string) {
	l.AddAll([]Event{{Kind: kind, Name: name}})
}

// AddAll adds events (their Index is set here) and wakes readers once.
// The ring grows to twice its size before the oldest are dropped, so
// that an entry of thousands of events is not copied for each one.
func (l *EventRing) AddAll(events []Event) {
	if len(events) == 0 {
		return
	}
	l.mu.Lock()
	for _, e := range events {
		l.last++
		e.Index = l.last
		l.ring = append(l.ring, e)
	}
	if len(l.ring) > 2*l.max {
		l.ring = append(l.ring[:0], l.ring[len(l.ring)-l.max:]...)
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// kept is the newest max events; l.mu is held.
func (l *EventRing) kept() []Event {
	return l.ring[max(0, len(l.ring)-l.max):]
}

// LastEvent is the newest event's index.
func (l *EventRing) LastEvent() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// Events returns the events after index, blocking until there is one or
// ctx is done (then nil, nil).
func (l *EventRing) Events(ctx context.Context, after uint64) ([]Event, error) {
	for {
		l.mu.Lock()
		var out []Event
		for _, e := range l.kept() {
			if e.Index > after {
				out = append(out, e)
			}
		}
		wake := l.wake
		l.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-wake:
		}
	}
}
