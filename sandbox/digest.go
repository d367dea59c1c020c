package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
)

// digestCacheMax bounds the DigestCache; past it the cache starts over.
const digestCacheMax = 4096

// DigestCache checks executables against the SHA-256 they were published
// with, before each run. Hashing a file on every call would cost a read of
// the whole file, so the digest of a file is remembered under its
// identity — device, inode, size, modification and change times — and a
// file is hashed again only when one of those changed: any write, chmod,
// or replacement by rename does. It is safe for concurrent use.
type DigestCache struct {
	mu sync.Mutex
	m  map[fileID]string // guarded by mu
}

// Verify returns nil when the file at path has the hex SHA-256 want, else
// an error wrapping ErrExecDigest (or the error of reading it).
func (c *DigestCache) Verify(path, want string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("executable %s: %w: it is not a regular file", path, ErrExecDigest)
	}
	id, cacheable := fileIDOf(fi)
	got := ""
	if cacheable {
		c.mu.Lock()
		got = c.m[id]
		c.mu.Unlock()
	}
	if got == "" {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return fmt.Errorf("executable %s: %w", path, err)
		}
		got = hex.EncodeToString(h.Sum(nil))
		if cacheable {
			c.mu.Lock()
			if c.m == nil || len(c.m) >= digestCacheMax {
				c.m = make(map[fileID]string)
			}
			c.m[id] = got
			c.mu.Unlock()
		}
	}
	if got != want {
		return fmt.Errorf("executable %s: %w: its SHA-256 is %s, but %s was published; it was changed after it was written, and was not run", path, ErrExecDigest, got, want)
	}
	return nil
}
