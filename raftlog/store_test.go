package raftlog

import (
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func storeRange(t *testing.T, s *Store, from, to, term uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("%d@%d", i, term))})
	}
	if err := s.Logs().StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

func checkRange(t *testing.T, s *Store, from, to uint64, term func(uint64) uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := s.Logs().GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if want := fmt.Sprintf("%d@%d", i, term(i)); string(l.Data) != want {
			t.Fatalf("entry %d holds %q, want %q", i, l.Data, want)
		}
	}
}

// A follower whose uncommitted suffix is replaced by a new leader's
// entries (Raft's DeleteRange of the log's tail) reads its whole log
// again after a restart: the truncated segment is sealed with an index
// of what it keeps.
func TestStore_TailTruncationSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 1, 10, 1)
	if err := s.Logs().DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 8, 12, 2)
	if err := s.Stable().SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	term := func(i uint64) uint64 {
		if i >= 8 {
			return 2
		}
		return 1
	}
	checkRange(t, s, 1, 12, term)
	if last, _ := s.Logs().LastIndex(); last != 12 {
		t.Fatalf("last index %d after reopen, want 12", last)
	}
	if v, err := s.Stable().GetUint64([]byte("CurrentTerm")); err != nil || v != 2 {
		t.Fatalf("current term %d (%v) after reopen, want 2", v, err)
	}
	// And the log goes on: append, truncate again, reopen again.
	storeRange(t, s, 13, 14, 2)
	if err := s.Logs().DeleteRange(14, 14); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, s, 1, 13, term)
}

// A log compacted after a snapshot (DeleteRange of its head) keeps the
// rest across a reopen.
func TestStore_HeadTruncationSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 1, 20, 1)
	if err := s.Logs().DeleteRange(1, 15); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if first, _ := s.Logs().FirstIndex(); first != 16 {
		t.Fatalf("first index %d after reopen, want 16", first)
	}
	checkRange(t, s, 16, 20, func(uint64) uint64 { return 1 })
}

// Open refuses a directory it cannot use with an error, not a panic.
func TestStore_OpenRefusesAFile(t *testing.T) {
	dir := t.TempDir() + "/file"
	if err := writeFile(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, hclog.NewNullLogger()); err == nil {
		t.Fatal("a log opened on a regular file")
	}
}

func writeFile(p string) error { return os.WriteFile(p, []byte("x"), 0o600) }
