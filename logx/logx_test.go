package logx

import (
	"bytes"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// record is one JSON line of a logger made by New.
type record map[string]any

func records(t *testing.T, buf *bytes.Buffer) []record {
	t.Helper()
	var out []record
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func TestWriterLevelsAndTimestamps(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, JSON, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	// As memberlist makes its logger: the log package's date and time.
	std := log.New(Writer(l, slog.LevelInfo), "", log.LstdFlags|log.Lmicroseconds)
	std.Printf("[DEBUG] memberlist: dropped at info")
	std.Printf("[INFO] memberlist: an info")
	std.Printf("[WARN] memberlist: a warning")
	std.Printf("[ERR] memberlist: an error")
	std.Printf("[ERROR] other: an error")
	std.Printf("plain line\nsecond line")
	std.Printf("[NOTALEVEL] kept as is")

	want := []struct{ level, msg string }{
		{"INFO", "memberlist: an info"},
		{"WARN", "memberlist: a warning"},
		{"ERROR", "memberlist: an error"},
		{"ERROR", "other: an error"},
		{"INFO", "plain line\nsecond line"},
		{"INFO", "[NOTALEVEL] kept as is"},
	}
	got := records(t, &buf)
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["msg"] != w.msg {
			t.Errorf("record %d = %v %q, want %v %q", i, got[i]["level"], got[i]["msg"], w.level, w.msg)
		}
	}
}

func TestAdjustedWriter(t *testing.T) {
	var buf bytes.Buffer
	l, _ := New(&buf, JSON, slog.LevelInfo)
	w := AdjustedWriter(l, slog.LevelInfo, func(level slog.Level, msg string) slog.Level {
		if strings.Contains(msg, "expected") {
			return slog.LevelInfo
		}
		return level
	})
	log.New(w, "", 0).Printf("[ERR] memberlist: expected at stop")
	log.New(w, "", 0).Printf("[ERR] memberlist: a real error")
	got := records(t, &buf)
	if len(got) != 2 || got[0]["level"] != "INFO" || got[1]["level"] != "ERROR" || got[0]["msg"] != "memberlist: expected at stop" {
		t.Errorf("records = %v, want the expected one at INFO, the other at ERROR", got)
	}
}

func TestStripTimestamp(t *testing.T) {
	for in, want := range map[string]string{
		"2026/11/30 11:33:52 msg":        "msg",
		"2026/11/30 11:33:52.123456 msg": "msg",
		"2026/11/30 msg":                 "2026/11/30 msg",
		"msg":                            "msg",
		"2026/11/30 11:33:52":            "2026/11/30 11:33:52",
	} {
		if got := stripTimestamp(in); got != want {
			t.Errorf("stripTimestamp(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHclog(t *testing.T) {
	var buf bytes.Buffer
	l, _ := New(&buf, JSON, slog.LevelInfo)
	h := Hclog(l, HclogOptions{Name: "raft", Quiet: true, Adjust: func(level slog.Level, msg string, _ []any) slog.Level {
		if msg == "expected" {
			return slog.LevelInfo
		}
		return level
	}})
	h.Info("narration") // Quiet: debug, dropped at info
	h.Warn("a warning", "peer", "n2", "error", errors.New("boom"), "n", 3)
	h.Error("expected")
	h.Named("wal").With("seg", 7).Error("an error", "fmt", hclog.Fmt("%d-%s", 1, "x"))
	h.StandardLogger(nil).Printf("[WARN] from a std logger")
	if h.IsInfo() || !h.IsWarn() || h.GetLevel() != hclog.Warn {
		t.Errorf("Quiet at info: IsInfo %v IsWarn %v GetLevel %v; want false true warn", h.IsInfo(), h.IsWarn(), h.GetLevel())
	}

	got := records(t, &buf)
	if len(got) != 4 {
		t.Fatalf("%d records, want 4:\n%s", len(got), buf.String())
	}
	if r := got[0]; r["level"] != "WARN" || r["msg"] != "raft: a warning" || r["peer"] != "n2" || r["error"] != "boom" || r["n"] != 3.0 {
		t.Errorf("warning = %v", r)
	}
	if r := got[1]; r["level"] != "INFO" || r["msg"] != "raft: expected" {
		t.Errorf("adjusted error = %v, want INFO", r)
	}
	if r := got[2]; r["level"] != "ERROR" || r["msg"] != "raft.wal: an error" || r["seg"] != 7.0 || r["fmt"] != "1-x" {
		t.Errorf("named error = %v", r)
	}
	if r := got[3]; r["level"] != "WARN" || r["msg"] != "raft: from a std logger" {
		t.Errorf("standard logger line = %v", r)
	}

	// Not quiet, at debug: hclog's info is info, its debug is debug.
	buf.Reset()
	l, _ = New(&buf, JSON, slog.LevelDebug)
	h = Hclog(l, HclogOptions{Name: "x"})
	h.Info("i")
	h.Debug("d")
	got = records(t, &buf)
	if len(got) != 2 || got[0]["level"] != "INFO" || got[1]["level"] != "DEBUG" {
		t.Errorf("records = %v, want INFO then DEBUG", got)
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"debug", "INFO", "warn", "error"} {
		if _, err := ParseLevel(s); err != nil {
			t.Errorf("ParseLevel(%q): %v", s, err)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) is no error")
	}
	if _, err := New(&bytes.Buffer{}, "xml", slog.LevelInfo); err == nil {
		t.Error("New with format xml is no error")
	}
	var buf bytes.Buffer
	l, _ := New(&buf, Text, slog.LevelInfo)
	l.Info("a b", "k", "v")
	if got := buf.String(); !strings.Contains(got, `level=INFO msg="a b" k=v`) || strings.Count(got, "\n") != 1 {
		t.Errorf("text record = %q", got)
	}
}
