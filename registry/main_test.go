package registry

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The test binary doubles as a tool: "registry.test dial HOST:PORT"
	// connects over TCP and prints "ok", or exits 1.
	if len(os.Args) == 3 && os.Args[1] == "dial" {
		c, err := net.Dial("tcp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = c.Close()
		fmt.Println("ok")
		os.Exit(0)
	}
	code := m.Run()
	removeBenchFixture()
	os.Exit(code)
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
