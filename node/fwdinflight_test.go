package node

import "testing"

// TestFwdInflightHoldsNotices: while a follower has other forwarded
// writes in flight, a finished one's notice is held; the last to finish
// tells of the highest committed entry, whatever order they finish in,
// and a write that asked for no notice (a load) or failed (index 0) still
// lets the held one go.
func TestFwdInflightHoldsNotices(t *testing.T) {
	var f fwdInflight
	if got := f.end("", 7); got != 7 {
		t.Fatalf("no follower named: told %d, want 7 at once (the leader nudges)", got)
	}
	f.begin("n2")
	if got := f.end("n2", 5); got != 5 {
		t.Fatalf("a lone write: told %d, want 5", got)
	}

	f.begin("n2")
	f.begin("n2")
	f.begin("n3")
	f.begin("n2")
	if got := f.end("n2", 9); got != 0 {
		t.Fatalf("told %d with two writes of n2 in flight, want it held", got)
	}
	if got := f.end("n3", 8); got != 8 {
		t.Fatalf("n3: told %d, want 8: another follower's writes do not hold it", got)
	}
	if got := f.end("n2", 6); got != 0 {
		t.Fatalf("told %d with a write of n2 in flight, want it held", got)
	}
	if got := f.end("n2", 0); got != 9 {
		t.Fatalf("the last write (no notice of its own): told %d, want the held 9", got)
	}

	f.begin("n2")
	if got := f.end("n2", 0); got != 0 {
		t.Fatalf("a load alone: told %d, want none", got)
	}
	if len(f.m) != 0 {
		t.Fatalf("%d followers left tracked with nothing in flight", len(f.m))
	}
}
