package p9

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The events file keeps the newest max events, however many one entry
// adds at once.
func TestEventRing_KeepsNewest(t *testing.T) {
	l := NewEventRing(100)
	batch := make([]Event, 250)
	for i := range batch {
		batch[i] = Event{Kind: "tool+", Name: fmt.Sprint(i)}
	}
	l.AddAll(batch)
	for i := range 120 {
		l.Add("tool-", fmt.Sprint(i))
	}
	if l.LastEvent() != 370 {
		t.Fatalf("last index %d, want 370", l.LastEvent())
	}
	got, _ := l.Events(context.Background(), 0)
	if len(got) != 100 || got[0].Index != 271 || got[99].Index != 370 || got[99].Name != "119" {
		t.Fatalf("kept %d events, %v … %v; want 100, 271 … 370", len(got), got[0], got[len(got)-1])
	}
	if got, _ := l.Events(context.Background(), 365); len(got) != 5 {
		t.Fatalf("since 365: %d events, want 5", len(got))
	}
}

// Events blocks until an event comes, and returns nothing once its
// context is done.
func TestEventRing_Blocks(t *testing.T) {
	l := NewEventRing(10)
	got := make(chan []Event, 1)
	go func() {
		evs, _ := l.Events(context.Background(), 0)
		got <- evs
	}()
	l.Add("node+", "n2")
	select {
	case evs := <-got:
		if len(evs) != 1 || evs[0].Index != 1 || evs[0].Name != "n2" {
			t.Fatalf("a waiting reader got %v, want node+ n2 at 1", evs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting reader was not woken by Add")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if evs, err := l.Events(ctx, 1); evs != nil || err != nil {
		t.Fatalf("Events with a done context = %v, %v; want nil, nil", evs, err)
	}
}
