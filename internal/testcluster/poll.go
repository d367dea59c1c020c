package testcluster

import (
	"fmt"
	"testing"
	"time"
)

// Tick is how often Poll and Eventually look at their condition.
const Tick = 10 * time.Millisecond

// UntilTick is how often Until looks at its check, which asks a node
// over the network.
const UntilTick = 50 * time.Millisecond

// Poll looks at cond every Tick until it holds or d has passed, and
// reports whether it held. cond is looked at once more at the deadline.
func Poll(d time.Duration, cond func() bool) bool { return pollEvery(d, Tick, cond) }

func pollEvery(d, tick time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(tick)
	}
}

// Eventually polls cond until it holds, and fails tb when d passes first,
// with the message format and args give and how long it waited.
func Eventually(tb testing.TB, d time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	if !Poll(d, cond) {
		tb.Fatalf("not within %v: %s", d, fmt.Sprintf(format, args...))
	}
}

// Until polls check every UntilTick until it holds and returns how long
// that took; when d passes first it fails tb with what and what check
// last said it saw.
func Until(tb testing.TB, d time.Duration, what string, check func() (bool, string)) time.Duration {
	tb.Helper()
	start := time.Now()
	var seen string
	if !pollEvery(d, UntilTick, func() bool {
		var ok bool
		ok, seen = check()
		return ok
	}) {
		tb.Fatalf("%s: not within %v; last seen:\n%s", what, d, seen)
	}
	return time.Since(start)
}
