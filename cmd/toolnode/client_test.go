package main

import (
	"testing"
	"time"

	"9fans.net/go/plan9"
)

func TestLsTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.Local)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 11, 3, 9, 5, 0, 0, time.Local), "Nov  3 09:05"},
		{time.Date(2026, 12, 1, 9, 5, 0, 0, time.Local), "Dec  1 09:05"}, // the future is recent, as plan9port has it
		{time.Date(2025, 1, 2, 9, 5, 0, 0, time.Local), "Jan  2  2025"},
	} {
		if got := lsTime(uint32(c.t.Unix()), now); got != c.want {
			t.Errorf("lsTime(%v) = %q, want %q", c.t, got, c.want)
		}
	}
}

func TestQuote9(t *testing.T) {
	for in, want := range map[string]string{
		"echo.meta": "echo.meta",
		"":          "''",
		"a b":       "'a b'",
		"it's":      "'it''s'",
	} {
		if got := quote9(in); got != want {
			t.Errorf("quote9(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStatLine(t *testing.T) {
	d := &plan9.Dir{
		Name: "t", Uid: "u", Gid: "g", Muid: "m",
		Qid:  plan9.Qid{Path: 0xaf63e94c860202a3, Type: plan9.QTDIR},
		Mode: plan9.DMDIR | 0o755, Atime: 1, Mtime: 2, Length: 3,
	}
	want := "'t' 'u' 'g' 'm' q (af63e94c860202a3 0 d) m 020000000755 at 1 mt 2 l 3 t 0 d 0"
	if got := statLine(d); got != want {
		t.Errorf("statLine = %q\nwant        %q", got, want)
	}
}
