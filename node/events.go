package node

import (
	"context"
	"sync"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// eventLog is the node's events stream: a bounded ring of the newest
// events, numbered by this node in the order it saw them. Readers that
// fall more than the ring's size behind skip to the oldest kept event.
type eventLog struct {
	mu   sync.Mutex
	ring []p9.Event
	max  int
	last uint64
	wake chan struct{} // closed and replaced on every add
}

func newEventLog(max int) *eventLog {
	return &eventLog{max: max, wake: make(chan struct{})}
}

func (l *eventLog) add(kind, name string) {
	l.addAll([]p9.Event{{Kind: kind, Name: name}})
}

// addAll adds events (their Index is set here) and wakes readers once.
// The ring grows to twice its size before the oldest are dropped, so
// that an entry of thousands of events is not copied for each one.
func (l *eventLog) addAll(events []p9.Event) {
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
func (l *eventLog) kept() []p9.Event {
	return l.ring[max(0, len(l.ring)-l.max):]
}

func (l *eventLog) lastIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// since returns the events after index, blocking until there is one or
// ctx is done (then nil).
func (l *eventLog) since(ctx context.Context, after uint64) []p9.Event {
	for {
		l.mu.Lock()
		var out []p9.Event
		for _, e := range l.kept() {
			if e.Index > after {
				out = append(out, e)
			}
		}
		wake := l.wake
		l.mu.Unlock()
		if len(out) > 0 {
			return out
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// Changed is the FSM observer: it records the events of an applied entry
// and refreshes this node's view of the tools it names.
func (n *Node) Changed(events []raftfsm.Event) {
	var tools []string
	trust := false
	seen := make([]p9.Event, 0, len(events))
	for _, e := range events {
		switch e.Kind {
		case "token+":
			continue // tokens are not in the events file
		case "token-":
			n.tokenRevoked(e.Name)
			continue
		case "trust+", "trust-":
			trust = true // nor are trusted keys
			continue
		}
		seen = append(seen, p9.Event{Kind: e.Kind, Name: e.Name})
		if e.Kind == "tool+" || e.Kind == "tool-" {
			tools = append(tools, e.Name)
		}
		if e.Kind == "tool+" {
			n.observePublished(e.Name)
		}
	}
	n.events.addAll(seen)
	if len(tools) > 0 {
		n.catalog.Update(tools, n.liveTool)
		kick(n.metaKick)
	}
	if trust {
		n.trustChanged()
	}
}

// trustChanged re-resolves every tool against the keys trusted now: a
// tool whose live version no trusted key signed leaves t/ here, with a
// log line naming it, and one signed by a key just added comes back.
func (n *Node) trustChanged() {
	if !n.catalog.IsHeld() {
		n.catalog.Rebuild(n.liveTools, n.liveTool)
	}
	for _, t := range n.fsm.Tools() {
		if !t.Published() {
			continue
		}
		if err := n.fsm.TrustError(t); err != nil {
			n.logger.Printf("tool %s is not served or run here: %v", t.Name, err)
		}
	}
	kick(n.metaKick)
}

// Restored is the FSM observer for a snapshot restore: everything is
// re-resolved.
func (n *Node) Restored() {
	if !n.catalog.IsHeld() {
		n.catalog.Rebuild(n.liveTools, n.liveTool)
	}
	n.blobs.MarkRescan() // its tools' indexes may be older than any seen
	kick(n.metaKick)
	n.tokensRestored()
}
