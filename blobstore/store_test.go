package blobstore

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPutVerifies(t *testing.T) {
	s := open(t)
	data := []byte("#!/bin/sh\necho hi\n")
	d := Digest(data)
	got, n, err := s.Put(bytes.NewReader(data), d, int64(len(data)), 1<<20)
	if err != nil || got != d || n != int64(len(data)) {
		t.Fatalf("Put = %s, %d, %v", got, n, err)
	}
	fi, err := os.Stat(s.Path(d))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %v, want read-only 0555", fi.Mode())
	}
	b, _ := os.ReadFile(s.Path(d))
	if !bytes.Equal(b, data) {
		t.Errorf("stored %q", b)
	}
	if size, ok := s.Stat(d); !ok || size != int64(len(data)) {
		t.Errorf("Stat = %d, %v", size, ok)
	}
}

// A bad digest, a short or long stream, or one past the bound stores
// nothing and leaves no temporary file.
func TestPutRefusesAndLeavesNothing(t *testing.T) {
	s := open(t)
	data := []byte("content")
	other := Digest([]byte("other"))
	cases := []struct {
		name      string
		want      string
		size, max int64
		err       error
	}{
		{"wrong digest", other, -1, 0, ErrDigest},
		{"short", Digest(data), 10, 0, ErrDigest},
		{"long", Digest(data), 3, 0, ErrDigest},
		{"over max", "", -1, 3, ErrTooLarge},
	}
	for _, c := range cases {
		_, _, err := s.Put(bytes.NewReader(data), c.want, c.size, c.max)
		if !errors.Is(err, c.err) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
		}
	}
	if s.Has(Digest(data)) || s.Has(other) {
		t.Error("a refused Put is visible")
	}
	ents, _ := os.ReadDir(s.dir)
	if len(ents) != 0 {
		t.Errorf("left %d files", len(ents))
	}
}

// A write that breaks off midway is never visible under the digest.
func TestPartialWriteNeverVisible(t *testing.T) {
	s := open(t)
	data := bytes.Repeat([]byte("x"), 1<<16)
	d := Digest(data)
	r := io.MultiReader(bytes.NewReader(data[:1000]), errReader{})
	if _, _, err := s.Put(r, d, int64(len(data)), 0); err == nil {
		t.Fatal("a broken stream was stored")
	}
	if s.Has(d) {
		t.Fatal("a partial write is visible")
	}
	// A crash mid-write leaves a temporary file; Open removes it.
	tmp, err := s.Temp()
	if err != nil {
		t.Fatal(err)
	}
	tmp.WriteAt(data[:10], 0)
	s2, err := Open(filepath.Dir(s.dir))
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(s2.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("Open left %s", e.Name())
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// Many writers of the same digest at once all succeed, and the file is
// whole.
func TestConcurrentPutSameDigest(t *testing.T) {
	s := open(t)
	data := bytes.Repeat([]byte("0123456789"), 100000)
	d := Digest(data)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.Put(bytes.NewReader(data), d, int64(len(data)), 0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	b, _ := os.ReadFile(s.Path(d))
	if !bytes.Equal(b, data) {
		t.Error("the stored file is not whole")
	}
	l, _ := s.List()
	if len(l) != 1 {
		t.Errorf("List = %v", l)
	}
}

// A Temp written at offsets commits under the digest of its first size
// bytes; over max it stores nothing.
func TestTempCommit(t *testing.T) {
	s := open(t)
	tmp, _ := s.Temp()
	tmp.WriteAt([]byte("world"), 6)
	tmp.WriteAt([]byte("hello "), 0)
	tmp.WriteAt([]byte("!!!"), 11)
	d, err := tmp.Commit(11, 100)
	if err != nil || d != Digest([]byte("hello world")) {
		t.Fatalf("Commit = %s, %v", d, err)
	}
	tmp, _ = s.Temp()
	tmp.WriteAt([]byte("hello world"), 0)
	if _, err := tmp.Commit(11, 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Commit over max: %v", err)
	}
	if l, _ := s.List(); len(l) != 1 {
		t.Errorf("List = %v", l)
	}
}
