package logx

import (
	"io"
	"log"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// The bridges against the loggers they replace, each writing one record
// to io.Discard: the node's Printf lines (log.Logger before, log.Logger
// through Writer into slog now), and Raft's (hclog's own text before,
// the adapter now), with slog called directly as the floor.

func BenchmarkLog(b *testing.B) {
	sl, _ := New(io.Discard, Text, slog.LevelInfo)
	b.Run("slog_direct", func(b *testing.B) {
		for b.Loop() {
			sl.Info("reconcile: added n2 as a voter")
		}
	})
	b.Run("stdlog_before", func(b *testing.B) {
		l := log.New(io.Discard, "", log.LstdFlags|log.Lmsgprefix)
		for b.Loop() {
			l.Printf("reconcile: added %s as a voter", "n2")
		}
	})
	b.Run("stdlog_via_Writer", func(b *testing.B) {
		l := log.New(Writer(sl, slog.LevelInfo), "", 0)
		for b.Loop() {
			l.Printf("reconcile: added %s as a voter", "n2")
		}
	})
	b.Run("hclog_before", func(b *testing.B) {
		h := hclog.New(&hclog.LoggerOptions{Name: "raft", Output: io.Discard, Level: hclog.Warn})
		for b.Loop() {
			h.Warn("appendEntries rejected, sending older logs", "peer", "n2", "next", 1)
		}
	})
	b.Run("hclog_via_Hclog", func(b *testing.B) {
		h := Hclog(sl, HclogOptions{Name: "raft", Quiet: true})
		for b.Loop() {
			h.Warn("appendEntries rejected, sending older logs", "peer", "n2", "next", 1)
		}
	})
	b.Run("hclog_dropped_debug", func(b *testing.B) {
		h := Hclog(sl, HclogOptions{Name: "raft", Quiet: true})
		for b.Loop() {
			h.Info("entering follower state", "follower", "n1", "leader-address", "x")
		}
	})
}
