package node

import (
	"io"

	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// Over 9P an executable and the .meta closed after it are one version; a
// lone .meta is one; a lone executable is one, published with the live
// metadata once no .meta close came for it (DESIGN §8); a lone
// executable of a tool with no metadata is dropped.
func TestNode_PublishTogetherOneVersion(t *testing.T) {
	n1, logs := startBlobMember(t, "n1", t.TempDir())
	fsys := mount(t, n1.P9Addr())
	idx := func() []string {
		t.Helper()
		return strings.Split(strings.TrimSuffix(readFile(t, fsys, "v/g/idx"), "\n"), "\n")
	}
	exe1 := []byte("#!/bin/sh\necho one\n")
	meta1 := []byte(`{"description":"g one"}`)
	if err := put9(fsys, "t/g", 0o755, exe1); err != nil {
		t.Fatal(err)
	}
	if err := put9(fsys, "t/g.meta", 0o644, meta1); err != nil {
		t.Fatal(err)
	}
	if got := idx(); len(got) != 1 || !strings.HasPrefix(got[0], "1 live ") || !strings.Contains(got[0], sha256Of(exe1)) {
		t.Fatalf("t/g and t/g.meta closed together made %q, want one version", got)
	}
	if got := readFile(t, fsys, "t/g"); got != string(exe1) {
		t.Fatalf("t/g = %q", got)
	}

	meta2 := []byte(`{"description":"g two"}`)
	if err := put9(fsys, "t/g.meta", 0o644, meta2); err != nil {
		t.Fatal(err)
	}
	if got := idx(); len(got) != 2 || !strings.HasPrefix(got[0], "2 live ") || !strings.Contains(got[0], sha256Of(exe1)) {
		t.Fatalf("a lone t/g.meta made %q, want version 2 with the live executable", got)
	}

	// An executable with a .meta that does not parse: both refused, the
	// executable not published later either.
	if err := put9(fsys, "t/g", 0o755, []byte("#!/bin/sh\necho bad\n")); err != nil {
		t.Fatal(err)
	}
	if err := put9(fsys, "t/g.meta", 0o644, []byte(`{"description": 5}`)); err == nil || !strings.Contains(err.Error(), "invalid tool metadata") {
		t.Fatalf("a .meta that does not parse: %v", err)
	}
	waitFor(t, "the staged executable dropped", 5*time.Second, func() bool {
		return strings.Contains(logs.String(), "dropped with the refused t/g.meta")
	})

	// A lone executable of a tool with no metadata, then one of g.
	if err := put9(fsys, "t/nometa", 0o755, exe1); err != nil {
		t.Fatal(err)
	}
	exe3 := []byte("#!/bin/sh\necho three\n")
	if err := put9(fsys, "t/g", 0o755, exe3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lone executable published as version 3", stagedTTL+10*time.Second, func() bool {
		got := idx()
		return len(got) == 3 && strings.HasPrefix(got[0], "3 live ") && strings.Contains(got[0], sha256Of(exe3))
	})
	if got := strings.TrimSpace(readFile(t, fsys, "t/g.meta")); got != string(meta2) {
		t.Fatalf("the lone executable's version has metadata %q, want the live %q", got, meta2)
	}
	if got := readFile(t, fsys, "t/g"); got != string(exe3) {
		t.Fatalf("t/g = %q", got)
	}
	if strings.Contains(readFile(t, fsys, "t/idx"), "nometa") {
		t.Fatal("a lone executable of a tool with no metadata was published")
	}
	waitFor(t, "the drop logged", 5*time.Second, func() bool {
		return strings.Contains(logs.String(), "t/nometa: executable "+sha256Of(exe1)) && strings.Contains(logs.String(), "has no live metadata")
	})
}

func sha256Of(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// put9Exec writes a tool's executable, then closes its live metadata
// again: one version, published at once (a lone executable waits for
// stagedTTL).
func put9Exec(fsys *client.Fsys, name string, exe []byte) error {
	if err := put9(fsys, "t/"+name, 0o755, exe); err != nil {
		return err
	}
	fid, err := fsys.Open("t/"+name+".meta", plan9.OREAD)
	if err != nil {
		return err
	}
	meta, err := io.ReadAll(fid)
	fid.Close()
	if err != nil {
		return err
	}
	return put9(fsys, "t/"+name+".meta", 0o644, meta)
}
