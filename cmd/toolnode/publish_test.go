package main

import "testing"

func TestPublishReport(t *testing.T) {
	v := func(n, state string) []string { return []string{n, state, "alice", "2026-12-01T19:03:00Z", "-", "-"} }
	for _, c := range []struct {
		before, after [][]string
		want          string
	}{
		{nil, [][]string{v("1", "live")}, "greet: version 1, live"},
		{[][]string{v("1", "live")}, [][]string{v("1", "live")}, "greet: no new version: identical to the live one (version 1)"},
		{[][]string{v("2", "live"), v("1", "old")}, [][]string{v("4", "live"), v("3", "old"), v("2", "old"), v("1", "old")},
			"greet: versions 3 and 4; version 4 is live"},
		{[][]string{v("1", "live")}, [][]string{v("2", "canary"), v("1", "live")}, "greet: version 2, canary"},
		{nil, [][]string{{"1", "live", "bob", "2026-12-01T19:03:00Z", "-", "alice"}}, "greet: version 1, live, signed by alice"},
	} {
		if got := publishReport("greet", c.before, c.after); got != c.want {
			t.Errorf("publishReport(%q, %q) = %q, want %q", c.before, c.after, got, c.want)
		}
	}
}
