package sandbox

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The test binary doubles as a probe tool: "sandbox.test probe WHAT
	// ARGS..." does one thing a sandboxed tool must not (see probe).
	if len(os.Args) > 2 && os.Args[1] == "probe" {
		os.Exit(probe(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
