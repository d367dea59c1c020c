package node

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolnode/toolnode/p9"
)

// The events file keeps the newest max events, however many one entry
// adds at once.
func TestEventLog_KeepsNewest(t *testing.T) {
	l := newEventLog(100)
	batch := make([]p9.Event, 250)
	for i := range batch {
		batch[i] = p9.Event{Kind: "tool+", Name: fmt.Sprint(i)}
	}
	l.addAll(batch)
	for i := range 120 {
		l.add("tool-", fmt.Sprint(i))
	}
	if l.lastIndex() != 370 {
		t.Fatalf("last index %d, want 370", l.lastIndex())
	}
	got := l.since(context.Background(), 0)
	if len(got) != 100 || got[0].Index != 271 || got[99].Index != 370 || got[99].Name != "119" {
		t.Fatalf("kept %d events, %v … %v; want 100, 271 … 370", len(got), got[0], got[len(got)-1])
	}
	if got := l.since(context.Background(), 365); len(got) != 5 {
		t.Fatalf("since 365: %d events, want 5", len(got))
	}
}
