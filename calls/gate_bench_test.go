package calls

import (
	"context"
	"os"
	"path/filepath"
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
	b.Run("cwd", func(b *testing.B) {
		root := b.TempDir()
		work := filepath.Join(root, "work", "src", "project")
		if err := os.MkdirAll(work, 0o755); err != nil {
			b.Fatal(err)
		}
		r := CwdRules{Node: "n1", DataDir: filepath.Join(root, "data"),
			ToolsDir: filepath.Join(root, "tools"), AgentsDir: filepath.Join(root, "agents")}
		for b.Loop() {
			if _, err := r.Check(work); err != nil {
				b.Fatal(err)
			}
		}
	})
}
