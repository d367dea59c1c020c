package raftlog

import (
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// Store is Raft's log and stable store in one directory.
type Store struct {
	wal   *wal.WAL
	meta  *metadb.BoltMetaDB
	cache *logCache
}

// Open opens (creating it if needed, mode 0700) the log in dir.
func Open(dir string, logger hclog.Logger) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft log directory: %w", err)
	}
	// The WAL does not close a meta store it did not make; holding our own
	// lets Close release its file lock.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithMetaStore(meta), wal.WithLogger(logger))
	if err != nil {
		meta.Close()
		return nil, fmt.Errorf("open raft log in %s: %w", dir, err)
	}
	s := &Store{wal: w, meta: meta, cache: newLogCache(w)}
	if err := s.check(); err != nil {
		s.Close()
		return nil, fmt.Errorf("raft log in %s: %w", dir, err)
	}
	return s, nil
}

// check reads the log's first and last entries, which Raft reads as it
// starts (and panics on if it cannot), so a damaged log is refused with
// an error that names it.
func (s *Store) check() error {
	first, err := s.wal.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.wal.LastIndex()
	if err != nil {
		return err
	}
	if last == 0 {
		return nil
	}
	for _, i := range []uint64{first, last} {
		var l raft.Log
		if err := s.wal.GetLog(i, &l); err != nil {
			return fmt.Errorf("entry %d of %d..%d unreadable: %w", i, first, last, err)
		}
	}
	return nil
}

// Logs is Raft's LogStore: the log behind the cache of recent entries.
func (s *Store) Logs() raft.LogStore { return s.cache }

// Stable is Raft's StableStore (current term, last vote).
func (s *Store) Stable() raft.StableStore { return s.wal }

// Close closes the log, then its meta database.
func (s *Store) Close() error {
	return errors.Join(s.wal.Close(), s.meta.Close())
}
