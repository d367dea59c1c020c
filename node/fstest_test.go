package node

import (
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// p9FS is an fs.FS of a directory of a 9P tree, read through the
// independent 9fans client: what a program sees through a mount, without
// FUSE. Files implement io.ReaderAt and io.Seeker (a seek from the end
// asks the server the file's length), so fstest checks stat lengths.
type p9FS struct {
	fsys *client.Fsys
	root string
}

func (f p9FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	fid, err := f.fsys.Open(path.Join(f.root, name), plan9.OREAD)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	d, err := fid.Stat()
	if err != nil {
		fid.Close()
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return &p9File{Fid: fid, dir: d.Mode&plan9.DMDIR != 0}, nil
}

type p9File struct {
	*client.Fid
	dir     bool
	entries []fs.DirEntry // directories: read at the first ReadDir
	read    bool
}

func (f *p9File) Stat() (fs.FileInfo, error) {
	d, err := f.Fid.Stat()
	if err != nil {
		return nil, err
	}
	return p9Info{d}, nil
}

func (f *p9File) Read(b []byte) (int, error) {
	if f.dir {
		return 0, &fs.PathError{Op: "read", Err: fs.ErrInvalid}
	}
	if len(b) == 0 {
		return 0, nil // the 9fans client sends the read, and an empty reply is its EOF
	}
	return f.Fid.Read(b)
}

func (f *p9File) ReadDir(n int) ([]fs.DirEntry, error) {
	if !f.read {
		dirs, err := f.Fid.Dirreadall()
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			f.entries = append(f.entries, fs.FileInfoToDirEntry(p9Info{d}))
		}
		f.read = true
	}
	if n <= 0 {
		out := f.entries
		f.entries = nil
		return out, nil
	}
	if len(f.entries) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(f.entries))
	out := f.entries[:n]
	f.entries = f.entries[n:]
	return out, nil
}

// p9Info is a 9P directory entry as an fs.FileInfo.
type p9Info struct{ d *plan9.Dir }

func (i p9Info) Name() string       { return i.d.Name }
func (i p9Info) Size() int64        { return int64(i.d.Length) }
func (i p9Info) ModTime() time.Time { return time.Unix(int64(i.d.Mtime), 0) }
func (i p9Info) IsDir() bool        { return i.d.Mode&plan9.DMDIR != 0 }
func (i p9Info) Sys() any           { return i.d }
func (i p9Info) Mode() fs.FileMode {
	m := fs.FileMode(i.d.Mode & 0o777)
	if i.IsDir() {
		m |= fs.ModeDir
	}
	return m
}

// t/ and a/ pass testing/fstest.TestFS through a 9P client: every file's
// stat length and mtime agree with what a read returns and with the
// directory listing, for tools of every kind: with their own executable,
// with a cmd only, with variants (resolved or not on this host), and
// published through 9P; and for profiles from the agents directory and
// through 9P.
func TestNode_FSTest(t *testing.T) {
	root := t.TempDir()
	tools, agents := filepath.Join(root, "tools"), filepath.Join(root, "agents")
	for _, d := range []string{tools, agents} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Its own executable.
	writeTool(t, tools, "hello", `{"description":"say hello","args":{"type":"object"}}`, "#!/bin/sh\necho hello\n")
	// A cmd only.
	writeTool(t, tools, "when", `{"description":"the date","cmd":"date -u"}`, "")
	// Variants: one this host matches, and a tool none of whose variants match.
	writeTool(t, tools, "shell", `{"description":"run sh","variants":[{"match":{"binary":"sh"},"cmd":"sh -c 'cat'"}]}`, "")
	writeTool(t, tools, "nowhere", `{"description":"runs nowhere","variants":[{"match":{"os":"plan9"},"cmd":"true"}]}`, "")
	if err := os.WriteFile(filepath.Join(agents, "coder.json"), []byte(`{"autoLoad":["hello"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, filepath.Join(root, "data"), tools, agents)
	fsys := mount(t, n.P9Addr())

	// Published through 9P: metadata, an executable, a profile.
	for _, f := range []struct{ path, data string }{
		{"t/up", "#!/bin/sh\necho up\n"},
		{"t/up.meta", `{"description":"uploaded"}` + "\n"},
		{"a/rev.json", `{"autoLoad":["up"]}` + "\n"},
	} {
		fid, err := fsys.Create(f.path, plan9.OWRITE, 0o644)
		if err != nil {
			t.Fatalf("create %s: %v", f.path, err)
		}
		if _, err := fid.Write([]byte(f.data)); err != nil {
			t.Fatalf("write %s: %v", f.path, err)
		}
		if err := fid.Close(); err != nil {
			t.Fatalf("close %s: %v", f.path, err)
		}
	}
	waitFor(t, "the tools in t/idx", 10*time.Second, func() bool {
		idx := readFile(t, fsys, "t/idx")
		return strings.Contains(idx, "hello\t") && strings.Contains(idx, "shell\t") && strings.Contains(idx, "up\t")
	})

	tfiles := []string{"idx", "hello", "hello.meta", "when.meta", "shell.meta", "nowhere.meta", "up", "up.meta"}
	if err := fstest.TestFS(p9FS{fsys, "t"}, tfiles...); err != nil {
		t.Errorf("t/: %v", err)
	}
	if err := fstest.TestFS(p9FS{fsys, "a"}, "coder.json", "rev.json"); err != nil {
		t.Errorf("a/: %v", err)
	}

	// The lengths are the published sizes; mtimes are stable and t/idx
	// takes the newest of its tools'.
	var newest uint32
	for _, name := range tfiles {
		d, err := fsys.Stat("t/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fsys, "t/"+name); d.Length != uint64(len(got)) {
			t.Errorf("t/%s: length %d, read %d bytes", name, d.Length, len(got))
		}
		if name != "idx" && name != "nowhere.meta" {
			newest = max(newest, d.Mtime)
		}
		again, _ := fsys.Stat("t/" + name)
		if again.Mtime != d.Mtime {
			t.Errorf("t/%s: mtime changed between stats: %d, %d", name, d.Mtime, again.Mtime)
		}
	}
	if d, _ := fsys.Stat("t/idx"); d.Mtime != newest {
		t.Errorf("t/idx mtime %d; want the newest of its tools', %d", d.Mtime, newest)
	}
	if d, _ := fsys.Stat("t/up"); d.Mode != 0o755 {
		t.Errorf("t/up created 0644: mode %v, want 0755", d.Mode)
	}
	names, err := fs.ReadDir(p9FS{fsys, "t"}, ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range names {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, []string{"hello", "hello.meta", "idx", "nowhere.meta", "shell.meta", "up", "up.meta", "when.meta"}) {
		t.Errorf("ls t = %v", got)
	}

	// rm t/NAME.meta withdraws the whole tool, its executable included.
	if err := fsys.Remove("t/up.meta"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"t/up.meta", "t/up"} {
		if _, err := fsys.Stat(p); err == nil {
			t.Errorf("stat %s after rm t/up.meta: %v", p, err)
		}
	}
}
