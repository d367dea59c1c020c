package calls

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCallGate prices what a call pays on this node before its tool
// starts, side by side with nothing: a slot of the -max-calls queue taken
// and given back uncontended (queue), and the re-check of a session's cwd
// against the rules (cwd).
func BenchmarkCallGate(b *testing.B) {
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
		}
	})
	b.Run("queue", func(b *testing.B) {
		q := NewQueue(8, 10*time.Second)
		ctx := context.Background()
		for b.Loop() {
			if err := q.Acquire(ctx); err != nil {
				b.Fatal(err)
			}
			q.Release()
		}
	})
}
