package main

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]int64{"1": 1, "4096": 4096, "16MiB": 16 << 20, "16M": 16 << 20, "2GiB": 2 << 30, "512KiB": 512 << 10, "1gb": 1 << 30}
	for in, want := range good {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "MiB", "12TiB", "1.5MiB", "99999999999GiB"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}
