package raftlog

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// countingStore counts the reads that reach the log behind the cache.
type countingStore struct {
	raft.LogStore
	reads int
}

func (s *countingStore) IsMonotonic() bool { return s.LogStore.(raft.MonotonicLogStore).IsMonotonic() }

func (s *countingStore) GetLog(index uint64, l *raft.Log) error {
	s.reads++
	return s.LogStore.GetLog(index, l)
}

func openTestWAL(t *testing.T) *wal.WAL {
	t.Helper()
	dir := t.TempDir()
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(filepath.Join(dir), wal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Close()
		meta.Close()
	})
	return w
}

// TestLogCache: recent entries are read from memory once the log has
// stored them, a large one from the log, and nothing after DeleteRange;
// the log's monotonic promise is passed on (Raft relies on it after a
// snapshot restore).
func TestLogCache(t *testing.T) {
	store := &countingStore{LogStore: openTestWAL(t)}
	c := newLogCache(store)
	if !c.IsMonotonic() {
		t.Fatal("raft-wal is monotonic; the cache must say so")
	}
	if newLogCache(raft.NewInmemStore()).IsMonotonic() {
		t.Fatal("an in-memory store is not monotonic; the cache must not claim it")
	}
	big := bytes.Repeat([]byte("x"), logCacheEntryMax+1)
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("one")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: big},
		{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte("three")},
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	get := func(i uint64) raft.Log {
		t.Helper()
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		return l
	}
	if l := get(3); string(l.Data) != "three" || l.Term != 2 || store.reads != 0 {
		t.Fatalf("entry 3 = %q term %d, %d reads of the log; want it from memory", l.Data, l.Term, store.reads)
	}
	if l := get(2); !bytes.Equal(l.Data, big) || store.reads != 1 {
		t.Fatalf("entry 2: %d bytes, %d reads of the log; want the large entry read from the log", len(l.Data), store.reads)
	}
	// Entry 1's slot taken by a later entry: entry 1 comes from the log.
	for i := uint64(4); i <= 1+logCacheSize; i++ {
		if err := c.StoreLog(&raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte("later")}); err != nil {
			t.Fatal(err)
		}
	}
	if l := get(1); string(l.Data) != "one" || store.reads != 2 {
		t.Fatalf("entry 1 = %q, %d reads of the log; want it read from the log", l.Data, store.reads)
	}
	if l := get(1 + logCacheSize); string(l.Data) != "later" || store.reads != 2 {
		t.Fatalf("entry %d = %q, %d reads of the log; want it from memory", 1+logCacheSize, l.Data, store.reads)
	}
	// Raft truncates the log's tail (a conflicting suffix): nothing of the
	// cache is read after it.
	last := uint64(1 + logCacheSize)
	if err := c.DeleteRange(last, last); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := c.GetLog(last, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("entry %d after DeleteRange: %v, %q; want ErrLogNotFound", last, err, l.Data)
	}
	if l := get(last - 1); string(l.Data) != "later" || store.reads != 4 {
		t.Fatalf("entry %d = %q, %d reads of the log; want it read from the log after DeleteRange", last-1, l.Data, store.reads)
	}
}

// TestLogCacheFailedStore: entries the log refused are not cached.
func TestLogCacheFailedStore(t *testing.T) {
	c := newLogCache(openTestWAL(t))
	if err := c.StoreLogs([]*raft.Log{{Index: 5, Term: 1, Type: raft.LogCommand, Data: []byte("gap")}}); err != nil {
		t.Skipf("raft-wal refused a first entry at 5: %v", err)
	}
	if err := c.StoreLogs([]*raft.Log{{Index: 7, Term: 1, Type: raft.LogCommand, Data: []byte("after a gap")}}); err == nil {
		t.Fatal("raft-wal took an entry after a gap")
	}
	var l raft.Log
	if err := c.GetLog(7, &l); err == nil {
		t.Fatalf("entry 7 = %q: a refused entry was cached", l.Data)
	}
}
