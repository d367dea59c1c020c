package raftlog

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps Raft's most recent entries in memory in front of the
// log on disk, as consul and nomad do with raft.LogCache: the leader reads
// each entry back to send it to the followers (and to name its term in a
// commit notice), and a follower reads each committed entry
// back to apply it. Without it each of those is a read of the log file
// (a pread per entry) on the write's path. Writes go to the log first and
// are cached only once it has stored them (fsync'd), so nothing is read
// from the cache that is not durable.
//
// Unlike raft.LogCache it bounds its memory by size as well as by count:
// an entry over logCacheEntryMax (a large batch of tool metadata) is not
// cached and is read from disk when asked for, so the cache holds at most
// logCacheSize × logCacheEntryMax bytes of commands.
type logCache struct {
	raft.LogStore // the log on disk

	mu   sync.RWMutex
	ring [logCacheSize]*raft.Log
}

const (
	// logCacheSize is a few times hashicorp/raft's MaxAppendEntries (64),
	// the most a leader sends or a follower applies at once.
	logCacheSize = 512
	// logCacheEntryMax bounds the size of a cached entry's command.
	logCacheEntryMax = 64 << 10
)

var (
	_ raft.LogStore          = (*logCache)(nil)
	_ raft.MonotonicLogStore = (*logCache)(nil)
)

func newLogCache(s raft.LogStore) *logCache { return &logCache{LogStore: s} }

// IsMonotonic is the log's: raft-wal's log has no gaps, and Raft must know
// (it then removes every older entry after restoring a snapshot).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(index uint64, l *raft.Log) error {
	c.mu.RLock()
	e := c.ring[index%logCacheSize]
	c.mu.RUnlock()
	if e != nil && e.Index == index {
		*l = *e
		return nil
	}
	return c.LogStore.GetLog(index, l)
}

func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	for _, l := range logs {
		slot := &c.ring[l.Index%logCacheSize]
		if len(l.Data) <= logCacheEntryMax {
			*slot = l
		} else {
			*slot = nil
		}
	}
	c.mu.Unlock()
	return nil
}

// DeleteRange forgets every cached entry, as raft.LogCache does: Raft
// deletes a range to truncate a conflicting suffix or compact the log,
// rarely, and the entries after it are cached again as they are written.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.ring = [logCacheSize]*raft.Log{}
	c.mu.Unlock()
	return c.LogStore.DeleteRange(min, max)
}
