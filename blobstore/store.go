package blobstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrDigest is the error of bytes that do not match the digest or size
// they were stored under.
var ErrDigest = errors.New("digest mismatch")

// ErrTooLarge is the error of content beyond a store call's size bound.
var ErrTooLarge = errors.New("too large")

// tmpPrefix starts the names of temporary files.
const tmpPrefix = ".tmp-"

// Store is a directory of content-addressed files. It is safe for
// concurrent use.
type Store struct {
	dir string // DIR/sha256
}

// Open opens (creating it if needed) the store in dir and removes the
// temporary files a crash left.
func Open(dir string) (*Store, error) {
	d := filepath.Join(dir, "sha256")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			os.Remove(filepath.Join(d, e.Name()))
		}
	}
	return &Store{dir: d}, nil
}

// ValidDigest reports whether s is a hex SHA-256: 64 lowercase hex digits.
func ValidDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Digest is the hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Path is where the file of digest d is (whether or not it is there).
func (s *Store) Path(d string) string { return filepath.Join(s.dir, d) }

// Stat reports the size of the file of digest d, and whether the store
// has it.
func (s *Store) Stat(d string) (int64, bool) {
	if !ValidDigest(d) {
		return 0, false
	}
	fi, err := os.Stat(s.Path(d))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// Has reports whether the store has digest d.
func (s *Store) Has(d string) bool {
	_, ok := s.Stat(d)
	return ok
}

// Open opens the file of digest d for reading.
func (s *Store) Open(d string) (*os.File, error) {
	if !ValidDigest(d) {
		return nil, fmt.Errorf("blob store: %q is not a SHA-256 digest", d)
	}
	return os.Open(s.Path(d))
}

// Remove deletes the file of digest d; a missing one is no error.
func (s *Store) Remove(d string) error {
	if !ValidDigest(d) {
		return nil
	}
	if err := os.Remove(s.Path(d)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Entry is one stored file.
type Entry struct {
	Digest string
	Size   int64
	// Stored is when it was stored (its modification time).
	Stored time.Time
}

// List returns the stored files (temporary ones excluded).
func (s *Store) List() ([]Entry, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range ents {
		if !ValidDigest(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, Entry{Digest: e.Name(), Size: fi.Size(), Stored: fi.ModTime()})
	}
	return out, nil
}

// Put stores what r yields. With want set, the content must have that
// digest; with size ≥ 0, exactly that many bytes; and never more than max
// (when max > 0). It reads r to its end (or past a bound, then fails) and
// returns the digest and size stored. Nothing is visible under the digest
// unless every check passed.
func (s *Store) Put(r io.Reader, want string, size, max int64) (string, int64, error) {
	t, err := s.Temp()
	if err != nil {
		return "", 0, err
	}
	defer t.Close()
	limit := max
	if size >= 0 && (limit <= 0 || size < limit) {
		limit = size
	}
	var src io.Reader = r
	if limit > 0 {
		src = io.LimitReader(r, limit+1)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(t.f, h), src)
	if err != nil {
		return "", n, fmt.Errorf("blob store: %w", err)
	}
	if max > 0 && n > max {
		return "", n, fmt.Errorf("blob store: %w: more than %d bytes", ErrTooLarge, max)
	}
	if size >= 0 && n != size {
		return "", n, fmt.Errorf("blob store: %w: %d bytes arrived, %d were expected", ErrDigest, n, size)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && got != want {
		return "", n, fmt.Errorf("blob store: %w: the content's SHA-256 is %s, %s was expected", ErrDigest, got, want)
	}
	if err := t.install(got); err != nil {
		return "", n, err
	}
	return got, n, nil
}

// PutFile stores a copy of the file at path (at most max bytes when
// max > 0) and returns its digest and size.
func (s *Store) PutFile(path string, max int64) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return s.Put(f, "", -1, max)
}

// Temp is a temporary file of the store, written at offsets (an upload
// through 9P), then committed under its digest or discarded.
type Temp struct {
	s    *Store
	f    *os.File
	done bool
}

// Temp makes a temporary file in the store.
func (s *Store) Temp() (*Temp, error) {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return &Temp{s: s, f: f}, nil
}

// WriteAt writes at off.
func (t *Temp) WriteAt(p []byte, off int64) (int, error) { return t.f.WriteAt(p, off) }

// ReadAt reads at off.
func (t *Temp) ReadAt(p []byte, off int64) (int, error) { return t.f.ReadAt(p, off) }

// Truncate sets the file's length.
func (t *Temp) Truncate(n int64) error { return t.f.Truncate(n) }

// Commit hashes the first size bytes of the file (the rest is cut),
// checks them against max (when max > 0), and stores them under their
// digest, which it returns. The Temp is used up either way.
func (t *Temp) Commit(size, max int64) (string, error) {
	defer t.Close()
	if max > 0 && size > max {
		return "", fmt.Errorf("blob store: %w: %d bytes, over the %d-byte limit", ErrTooLarge, size, max)
	}
	if err := t.f.Truncate(size); err != nil {
		return "", fmt.Errorf("blob store: %w", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(t.f, 0, size)); err != nil {
		return "", fmt.Errorf("blob store: %w", err)
	}
	d := hex.EncodeToString(h.Sum(nil))
	return d, t.install(d)
}

// install syncs the file, makes it read-only and renames it to digest d.
func (t *Temp) install(d string) error {
	if t.done {
		return errors.New("blob store: temporary file already used")
	}
	if err := t.f.Chmod(0o555); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	t.done = true
	if err := os.Rename(t.f.Name(), t.s.Path(d)); err != nil {
		os.Remove(t.f.Name())
		return fmt.Errorf("blob store: %w", err)
	}
	syncDir(t.s.dir)
	return nil
}

// Close discards the temporary file unless it was stored.
func (t *Temp) Close() error {
	if t.done {
		return nil
	}
	t.done = true
	t.f.Close()
	return os.Remove(t.f.Name())
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
