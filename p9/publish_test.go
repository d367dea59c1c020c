package p9

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// create makes path open for writing with perm, failing the test on error.
func create(t *testing.T, fs *client.Fsys, path string, perm plan9.Perm) *client.Fid {
	t.Helper()
	fid, err := fs.Create(path, plan9.OWRITE, perm)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	return fid
}

func write(t *testing.T, fid *client.Fid, text string) {
	t.Helper()
	if _, err := fid.Write([]byte(text)); err != nil {
		t.Fatalf("write %q: %v", text, err)
	}
}

func wantLog(t *testing.T, b *fakeBackend, want ...string) {
	t.Helper()
	if got := b.published(); !slices.Equal(got, want) {
		t.Fatalf("published %q; want %q", got, want)
	}
}

func TestPublish_MetaCreateWriteClose(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	fid := create(t, fs, "t/new.meta", 0o644)
	// Before anything is written, the file can be walked to (9pfuse walks
	// to what it just created) but nothing is published.
	if _, err := fs.Stat("t/new.meta"); err != nil {
		t.Fatalf("stat of a created file: %v", err)
	}
	wantLog(t, b)
	doc := `{"description":"a new tool"}`
	write(t, fid, doc+"\n")
	// A whole JSON document is published when the write returns.
	wantLog(t, b, "meta new "+doc)
	if err := fid.Close(); err != nil {
		t.Fatalf("clunk: %v", err)
	}
	wantLog(t, b, "meta new "+doc)

	if got := readFile(t, fs, "t/new.meta"); got != doc+"\n" {
		t.Fatalf("t/new.meta = %q", got)
	}
	if got := readFile(t, fs, "t/idx"); !strings.Contains(got, "new\ta new tool\n") {
		t.Fatalf("t/idx = %q", got)
	}
	if got := dirNames(t, fs, "t"); !slices.Contains(got, "new.meta") || slices.Contains(got, "new") {
		t.Fatalf("ls t = %v", got)
	}
	// Another connection sees it too.
	if got := readFile(t, mount(t, addr), "t/new.meta"); got != doc+"\n" {
		t.Fatalf("t/new.meta on another connection = %q", got)
	}
}

func TestPublish_InvalidMetaRefusedOnWrite(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	fid := create(t, fs, "t/bad.meta", 0o644)
	_, err := fid.Write([]byte(`{"description": 5}`))
	wantErr(t, err, "description must be a string")
	// The refused write changed nothing, and the clunk adds nothing.
	if err := fid.Close(); err != nil {
		t.Fatalf("clunk after a refused write: %v", err)
	}
	wantLog(t, b)
	wantUnpublished(t, fs, "t/bad.meta")

	// The same on an existing tool: its metadata stays.
	fid, err = fs.Open("t/echo.meta", plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fid.Write([]byte(`{"description": ["x"]}`))
	wantErr(t, err, "description must be a string")
	fid.Close()
	wantLog(t, b)
	if got := readFile(t, fs, "t/echo.meta"); got != `{"description":"print the arguments"}`+"\n" {
		t.Fatalf("t/echo.meta = %q", got)
	}

	// A write refused, then a good one on the same fid: the good one counts.
	fid = create(t, fs, "t/retry.meta", 0o644)
	if _, err := fid.WriteAt([]byte(`{"description":1}`), 0); err == nil {
		t.Fatal("invalid write accepted")
	}
	if _, err := fid.WriteAt([]byte(`{"description":"ok"}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, `meta retry {"description":"ok"}`)
}

func TestPublish_IncompleteJSONAtClunk(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	fid := create(t, fs, "t/half.meta", 0o644)
	write(t, fid, `{"description":"half`)
	err := fid.Close()
	wantErr(t, err, "invalid JSON in t/half.meta: it is incomplete; nothing was published")
	wantLog(t, b)
	wantUnpublished(t, fs, "t/half.meta")

	// Not JSON at all: an error at clunk that says so.
	fid = create(t, fs, "a/broken.json", 0o644)
	_, err = fid.Write([]byte(`{"autoLoad": nope}`))
	wantErr(t, err, "invalid JSON in a/broken.json: byte 15 ('o') cannot continue a JSON value")
	wantErr(t, err, "nothing was published")
	if err := fid.Close(); err != nil {
		t.Fatalf("clunk after a refused write: %v", err)
	}
	wantLog(t, b)

	// The fid is clunked anyway: it can be used again for a new walk.
	if _, err := fs.Stat("a/coder.json"); err != nil {
		t.Fatal(err)
	}
}

func TestPublish_JSONInParts(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	fid := create(t, fs, "t/parts.meta", 0o644)
	parts := []string{`{"descr`, `iption":"in three`, ` parts"}`}
	for i, p := range parts {
		write(t, fid, p)
		if i < len(parts)-1 {
			wantLog(t, b)
		}
	}
	doc := strings.Join(parts, "")
	wantLog(t, b, "meta parts "+doc)
	// White space after the document changes nothing worth publishing.
	write(t, fid, "\n")
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, "meta parts "+doc)

	// Rewritten after it was published: published again, at once.
	fid, err := fs.Open("t/parts.meta", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	// The fid starts with the published text, and reads its own buffer.
	if got, err := readAll(fid, 100); err != nil || string(got) != doc+"\n" {
		t.Fatalf("read = %q, %v", got, err)
	}
	if _, err := fid.WriteAt([]byte(`{"description":"in three parts!"}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, "meta parts "+doc, `meta parts {"description":"in three parts!"}`)
}

// Writes go to the writer's buffer; everyone else sees the published
// executable until the clunk publishes the new one.
func TestPublish_ExecutableAtomic(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)
	other := mount(t, addr)
	old := "#!/bin/sh\ncat\n"

	fid, err := fs.Open("t/echo", plan9.ORDWR|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 3 {
		chunk := bytes.Repeat([]byte{byte('a' + i)}, 5000)
		chunk[len(chunk)-1] = '\n'
		write(t, fid, string(chunk))
		want = append(want, chunk...)
		if got := readFile(t, other, "t/echo"); got != old {
			t.Fatalf("after write %d another reader sees %q", i, got[:min(len(got), 20)])
		}
	}
	// The writer reads its own buffer.
	if got, err := readAll(fid, 4096); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("writer reads %d bytes, %v", len(got), err)
	}
	wantLog(t, b)
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, other, "t/echo"); got != string(want) {
		t.Fatalf("after clunk t/echo has %d bytes; want %d", len(got), len(want))
	}
	wantLog(t, b, fmt.Sprintf("exec echo 0755 %q", want))
}

func TestPublish_ExecutableLimit(t *testing.T) {
	b := newFake()
	b.maxExe = 100
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	fid := create(t, fs, "t/big", 0o755)
	write(t, fid, strings.Repeat("x", 60))
	_, err := fid.Write([]byte(strings.Repeat("y", 60)))
	wantErr(t, err, "executables are limited to 100 bytes")
	// A write at an offset past the limit, too.
	_, err = fid.WriteAt([]byte("z"), 1<<40)
	wantErr(t, err, "executables are limited to 100 bytes")
	// The upload failed: its clunk publishes nothing (no half executable).
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b)

	// Exactly the limit is fine.
	fid = create(t, fs, "t/big", 0o755)
	write(t, fid, strings.Repeat("x", 100))
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fs, "t/big"); len(got) != 100 {
		t.Fatalf("t/big has %d bytes", len(got))
	}

	// The Backend's refusal at clunk is the error of the Tclunk.
	fid = create(t, fs, "t/big2", 0o755)
	write(t, fid, strings.Repeat("x", 80))
	b.mu.Lock()
	b.maxExe = 50
	b.mu.Unlock()
	wantErr(t, fid.Close(), "executables are limited to 50 bytes")
	wantUnpublished(t, fs, "t/big2")

	// Metadata is limited to 1 MiB.
	fid = create(t, fs, "t/huge.meta", 0o644)
	_, err = fid.WriteAt([]byte("x"), jsonLimit)
	wantErr(t, err, "tool metadata is limited to 1 MiB")
	fid.Close()
}

func TestPublish_ExecutableMode(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	// Whatever the perm of the create, t/NAME is published 0755.
	fid := create(t, fs, "t/tool1", 0o750)
	// While it is being written, stat shows the mode it will have.
	if d, err := fs.Stat("t/tool1"); err != nil || d.Mode != 0o755 {
		t.Fatalf("stat during upload: %v, %v", d, err)
	}
	write(t, fid, "#!/bin/sh\necho hi\n")
	wantLog(t, b) // executables are published at clunk
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, `exec tool1 0755 "#!/bin/sh\necho hi\n"`)
	if d, err := fs.Stat("t/tool1"); err != nil || d.Mode != 0o755 || d.Length != 18 {
		t.Fatalf("stat t/tool1: %v, %v", d, err)
	}
	names := dirNames(t, fs, "t")
	if !slices.Contains(names, "tool1") || slices.Contains(names, "tool1.meta") {
		t.Fatalf("ls t = %v: want tool1 and no tool1.meta (its metadata is not published)", names)
	}

	// Created without an execute bit (cp of a script that has none):
	// published 0755 all the same.
	fid = create(t, fs, "t/plain", 0o644)
	write(t, fid, "data\n")
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	// chmod publishes it again with the new mode; FUSE sends S_IFREG.
	d := new(plan9.Dir)
	d.Null()
	d.Mode = 0o100700
	if err := fs.Wstat("t/plain", d); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, `exec tool1 0755 "#!/bin/sh\necho hi\n"`, `exec plain 0755 "data\n"`, `exec plain 0700 "data\n"`)
	if st, _ := fs.Stat("t/plain"); st == nil || st.Mode != 0o700 {
		t.Fatalf("mode after chmod: %v", st)
	}
	// The same mode again publishes nothing.
	if err := fs.Wstat("t/plain", d); err != nil {
		t.Fatal(err)
	}
	if n := len(b.published()); n != 3 {
		t.Fatalf("%d publishes after a chmod to the same mode", n)
	}

	// install(1): create, write, chmod the file by name (as FUSE sends
	// fchmod), then close: published once, with the new mode.
	fid = create(t, fs, "t/inst", 0o600)
	write(t, fid, "x\n")
	d.Mode = 0o750
	if err := fs.Wstat("t/inst", d); err != nil {
		t.Fatalf("chmod during upload: %v", err)
	}
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if got := b.published(); got[len(got)-1] != `exec inst 0750 "x\n"` || len(got) != 4 {
		t.Fatalf("published %q", got)
	}

	// Modes cannot be changed elsewhere in t/.
	d.Mode = 0o600
	wantErr(t, fs.Wstat("t/echo.meta", d), "cannot change the mode of t/echo.meta")
	d.Mode = plan9.DMDIR | 0o755
	wantErr(t, fs.Wstat("t/echo", d), "cannot change the mode of t/echo")
}

func TestPublish_Remove(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	if err := fs.Remove("t/echo"); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, fs, "t"); !slices.Equal(got, []string{"block.meta", "echo.meta", "fail.meta", "idx"}) {
		t.Fatalf("ls t after rm t/echo = %v", got)
	}
	if err := fs.Remove("t/echo.meta"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("a/coder.json"); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, "rmexec echo", "withdraw echo", "withdraw profile coder")
	if got := dirNames(t, fs, "t"); !slices.Equal(got, []string{"block.meta", "fail.meta", "idx"}) {
		t.Fatalf("ls t = %v", got)
	}
	if got := dirNames(t, fs, "a"); len(got) != 0 {
		t.Fatalf("ls a = %v", got)
	}
	wantErr(t, fs.Remove("t/idx"), "cannot remove t/idx: it is the tool index")
	wantErr(t, fs.Remove("t"), "cannot remove t")

	// A file removed between the walk and the remove: the error says so.
	r := dialRaw(t, addr)
	r.handshake()
	rx := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t", "fail.meta"}})
	if rx.Type != plan9.Rwalk {
		t.Fatal(rx)
	}
	if err := b.WithdrawTool("fail"); err != nil {
		t.Fatal(err)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tremove, Tag: 1, Fid: 1})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, `no tool "fail" in the cluster`) {
		t.Fatalf("remove of a withdrawn tool: %v", rx)
	}
	// The failed remove clunked the fid.
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 1}); rx.Type != plan9.Rerror {
		t.Fatalf("fid alive after Tremove: %v", rx)
	}

	// A remove of a fid open for writing drops its upload, and of a
	// file created and never published, the pending file (9pfuse
	// removes what it created when a later step fails).
	fid := create(t, fs, "t/gone", 0o755)
	write(t, fid, "x")
	if err := fid.Remove(); err != nil {
		t.Fatalf("remove of a pending file: %v", err)
	}
	if _, err := fs.Stat("t/gone"); err == nil {
		t.Fatal("t/gone exists after the remove of its upload")
	}
	wantLog(t, b, "rmexec echo", "withdraw echo", "withdraw profile coder", "withdraw fail")
}

// FUSE's setattr(size=0) before an open, and OTRUNC.
func TestPublish_Truncate(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)
	zero := new(plan9.Dir)
	zero.Null()
	zero.Length = 0

	// On a fid that is not open it is accepted and publishes nothing.
	for _, p := range []string{"t/echo.meta", "t/echo", "a/coder.json"} {
		if err := fs.Wstat(p, zero); err != nil {
			t.Fatalf("truncate %s: %v", p, err)
		}
	}
	wantLog(t, b)
	if got := readFile(t, fs, "t/echo"); got != "#!/bin/sh\ncat\n" {
		t.Fatalf("t/echo = %q", got)
	}
	wantErr(t, fs.Wstat("t/idx", zero), "permission denied: t/idx is read-only")

	// OTRUNC replaces the content.
	fid, err := fs.Open("t/echo.meta", plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	write(t, fid, `{"a":1}`)
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fs, "t/echo.meta"); got != `{"a":1}`+"\n" {
		t.Fatalf("t/echo.meta = %q", got)
	}

	// Open without OTRUNC, then Twstat length 0 on the open fid (FUSE's
	// ftruncate after open(O_TRUNC)): the buffer is emptied.
	fid, err = fs.Open("t/echo", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	if err := fid.Wstat(zero); err != nil {
		t.Fatal(err)
	}
	write(t, fid, "new\n")
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fs, "t/echo"); got != "new\n" {
		t.Fatalf("t/echo = %q", got)
	}

	// Without either, a write at 0 overwrites the start in place.
	fid, err = fs.Open("t/echo", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	write(t, fid, "N")
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fs, "t/echo"); got != "New\n" {
		t.Fatalf("t/echo = %q", got)
	}

	// An open for writing that writes nothing (or 0 bytes) publishes nothing.
	n := len(b.published())
	for _, mode := range []uint8{plan9.OWRITE, plan9.OWRITE | plan9.OTRUNC, plan9.ORDWR} {
		for _, p := range []string{"a/coder.json", "t/echo"} {
			fid, err := fs.Open(p, mode)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fid.WriteAt(nil, 0); err != nil {
				t.Fatal(err)
			}
			if err := fid.Close(); err != nil {
				t.Fatal(err)
			}
		}
		fid, err := fs.Open("a/coder.json", mode)
		if err != nil {
			t.Fatal(err)
		}
		if err := fid.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.published()) != n {
		t.Fatalf("opens without writes published: %q", b.published()[n:])
	}
}

func TestPublish_Profile(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	fid := create(t, fs, "a/reviewer.json", 0o644)
	write(t, fid, `{"autoLoad":["echo","fail"]}`)
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, `profile reviewer {"autoLoad":["echo","fail"]}`)
	if got := dirNames(t, fs, "a"); !slices.Equal(got, []string{"coder.json", "reviewer.json"}) {
		t.Fatalf("ls a = %v", got)
	}
	if got := readFile(t, fs, "a/reviewer.json"); got != `{"autoLoad":["echo","fail"]}`+"\n" {
		t.Fatalf("a/reviewer.json = %q", got)
	}
	// A profile the Backend refuses.
	fid = create(t, fs, "a/bad.json", 0o644)
	_, err := fid.Write([]byte(`{"autoLoad":"echo"}`))
	wantErr(t, err, "profile bad is invalid")
	fid.Close()
	wantUnpublished(t, fs, "a/bad.json")
	if err := fs.Remove("a/bad.json"); err != nil {
		t.Fatalf("rm of a pending profile: %v", err)
	}
	if err := fs.Remove("a/reviewer.json"); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, `profile reviewer {"autoLoad":["echo","fail"]}`, "withdraw profile reviewer")
	if got := dirNames(t, fs, "a"); !slices.Equal(got, []string{"coder.json"}) {
		t.Fatalf("ls a = %v", got)
	}
}

func TestPublish_CreateRefused(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	tests := []struct {
		path string
		perm plan9.Perm
		mode uint8
		err  string
	}{
		{"t/foo bar", 0o755, plan9.OWRITE, `t/ holds NAME.meta and NAME, where NAME is a letter or digit`},
		{"t/.hidden", 0o755, plan9.OWRITE, `invalid name ".hidden"`},
		{"t/-x.meta", 0o644, plan9.OWRITE, `invalid name "-x.meta"`},
		{"t/.meta", 0o644, plan9.OWRITE, `invalid name ".meta"`},
		{"t/" + strings.Repeat("a", 129), 0o755, plan9.OWRITE, "invalid name"},
		{"t/idx", 0o644, plan9.OWRITE, "permission denied: cannot create t/idx: it is the tool index"},
		{"t/idx.meta", 0o644, plan9.OWRITE, "invalid name: cannot create t/idx.meta: no tool may be named idx"},
		{"t/dir", plan9.DMDIR | 0o755, plan9.OREAD, `permission denied: cannot make directory "dir" in t`},
		{"t/x.meta", 0o644, plan9.OWRITE | plan9.ORCLOSE, "invalid open mode: t/x.meta cannot be removed on close"},
		{"a/foo.txt", 0o644, plan9.OWRITE, `a/ holds NAME.json, where NAME is a letter or digit`},
		{"a/.json", 0o644, plan9.OWRITE, `invalid name ".json"`},
		{"a/x y.json", 0o644, plan9.OWRITE, `invalid name "x y.json"`},
		{"cluster/x", 0o644, plan9.OWRITE, "permission denied: cannot create \"x\" in cluster: the files of the tree are fixed"},
		{"node/x", 0o644, plan9.OWRITE, "node is not a directory"},
	}
	for _, tt := range tests {
		fid, err := fs.Create(tt.path, tt.mode, tt.perm)
		if err == nil {
			fid.Close()
			t.Errorf("create %s succeeded", tt.path)
			continue
		}
		if !strings.Contains(err.Error(), tt.err) {
			t.Errorf("create %s: %v; want %q", tt.path, err, tt.err)
		}
	}
	// The longest name is fine; so are dots, dashes and underscores.
	for _, name := range []string{strings.Repeat("a", 128), "x.y-z_1", "0start"} {
		fid := create(t, fs, "t/"+name, 0o755)
		write(t, fid, "x")
		if err := fid.Close(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := len(b.published()); n != 3 {
		t.Fatalf("%d publishes; want 3", n)
	}
	// Create on an open directory fid is refused.
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "t", plan9.OREAD)
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: "x.meta", Perm: 0o644, Mode: plan9.OWRITE})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "fid 1 is open") {
		t.Fatalf("create on an open fid: %v", rx)
	}
}

// The 9P exchange of a 9pfuse create: Tcreate on a clone of the
// directory, Tstat of the open fid, a walk to the new name for an
// unopened fid, writes, Tclunk.
func TestPublish_RawCreateSequence(t *testing.T) {
	b := newFake()
	s, addr := startServer(t, b, Options{PendingTTL: 200 * time.Millisecond})
	r := dialRaw(t, addr)
	r.handshake()
	rx := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}})
	if rx.Type != plan9.Rwalk {
		t.Fatal(rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: "tool", Perm: 0o755, Mode: plan9.OWRITE})
	if rx.Type != plan9.Rcreate || rx.Iounit == 0 {
		t.Fatalf("create: %v", rx)
	}
	qid := rx.Qid
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 1})
	if rx.Type != plan9.Rstat {
		t.Fatalf("stat of the created fid: %v", rx)
	}
	d, err := plan9.UnmarshalDir(rx.Stat)
	if err != nil || d.Name != "tool" || d.Mode != 0o755 || d.Qid != qid {
		t.Fatalf("stat %v, %v", d, err)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 2, Wname: []string{"t", "tool"}})
	if rx.Type != plan9.Rwalk || len(rx.Wqid) != 2 || rx.Wqid[1] != qid {
		t.Fatalf("walk to the created file: %v", rx)
	}
	for i, s := range []string{"#!/bin/sh\n", "echo ok\n"} {
		rx = r.rpc(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 1, Offset: uint64(10 * i), Data: []byte(s)})
		if rx.Type != plan9.Rwrite || int(rx.Count) != len(s) {
			t.Fatalf("write: %v", rx)
		}
	}
	if rx = r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1}); rx.Type != plan9.Rclunk {
		t.Fatalf("clunk: %v", rx)
	}
	wantLog(t, b, `exec tool 0755 "#!/bin/sh\necho ok\n"`)
	// The unopened fid now opens the published file.
	if rx = r.rpc(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 2, Mode: plan9.OREAD}); rx.Type != plan9.Ropen {
		t.Fatalf("open: %v", rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 2, Count: 100})
	if rx.Type != plan9.Rread || string(rx.Data) != "#!/bin/sh\necho ok\n" {
		t.Fatalf("read: %v", rx)
	}

	// A created file that is clunked unwritten stays pending (its
	// close is no error), then is dropped once PendingTTL has passed.
	r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 3, Wname: []string{"a"}})
	if rx = r.rpc(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 3, Name: "p.json", Perm: 0o644, Mode: plan9.OWRITE}); rx.Type != plan9.Rcreate {
		t.Fatalf("create: %v", rx)
	}
	if rx = r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 3}); rx.Type != plan9.Rclunk {
		t.Fatalf("clunk of an empty created file: %v", rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 4, Wname: []string{"a", "p.json"}})
	if rx.Type != plan9.Rwalk || len(rx.Wqid) != 2 {
		t.Fatalf("a/p.json is not pending after its create: %v", rx)
	}
	r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 4})
	waitFor(t, "a/p.json to be dropped", func() bool { return !s.isPending("a/p.json") })
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 4, Wname: []string{"a", "p.json"}})
	if rx.Type == plan9.Rwalk && len(rx.Wqid) == 2 {
		t.Fatalf("a/p.json after PendingTTL: %v", rx)
	}
	wantLog(t, b, `exec tool 0755 "#!/bin/sh\necho ok\n"`)
}

// A connection that ends before its clunk publishes nothing; its pending
// file is forgotten.
func TestPublish_ConnectionEndsBeforeClunk(t *testing.T) {
	b := newFake()
	s, addr := startServer(t, b, Options{PendingTTL: 200 * time.Millisecond})
	r := dialRaw(t, addr)
	r.handshake()
	r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}})
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: "lost", Perm: 0o755, Mode: plan9.OWRITE}); rx.Type != plan9.Rcreate {
		t.Fatal(rx)
	}
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 1, Data: []byte("x")}); rx.Type != plan9.Rwrite {
		t.Fatal(rx)
	}
	r.nc.Close()
	waitFor(t, "the connection's handles to be released", func() bool { return s.handles.Load() == 0 })
	wantLog(t, b)
	waitFor(t, "t/lost to be dropped", func() bool { return !s.isPending("t/lost") })
	wantLog(t, b)
}

// Writers of one file on many connections at once: each clunk publishes
// one whole executable, never a mix.
func TestPublish_ConcurrentWriters(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		fs := mount(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fid, err := fs.Create("t/shared", plan9.OWRITE, 0o755)
			if err != nil {
				errs <- err
				return
			}
			body := bytes.Repeat([]byte{byte('a' + i)}, 20000)
			if _, err := fid.Write(body); err != nil {
				errs <- err
			}
			if err := fid.Close(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	exe, ok := b.exeBytes("shared")
	if !ok || len(exe) != 20000 || bytes.Count(exe, exe[:1]) != 20000 {
		t.Fatalf("t/shared is not one writer's executable")
	}
	if got := len(b.published()); got != n {
		t.Fatalf("%d publishes; want %d", got, n)
	}
}

// All unfinished uploads together are bounded: past the limit a write
// fails and says so; once another upload closes, writes go through again.
func TestPublish_UploadMemoryBounded(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{MaxUploadBytes: 1000})
	fs := mount(t, addr)
	a, err := fs.Create("t/big1", plan9.OWRITE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(make([]byte, 800)); err != nil {
		t.Fatal(err)
	}
	b, err := fs.Create("t/big2", plan9.OWRITE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(make([]byte, 300)); err == nil || !strings.Contains(err.Error(), "unfinished uploads") {
		t.Fatalf("a write past the node's upload limit: %v", err)
	}
	a.Close()
	if _, err := b.Write(make([]byte, 300)); err != nil {
		t.Fatalf("after the other upload closed: %v", err)
	}
	b.Close()
}

// wantUnpublished checks that path has no published content: it does
// not exist, or it is a pending file, empty.
func wantUnpublished(t testing.TB, fs *client.Fsys, path string) {
	t.Helper()
	d, err := fs.Stat(path)
	if err != nil {
		return
	}
	if d.Length != 0 {
		t.Fatalf("%s has length %d; want nothing published", path, d.Length)
	}
	if got := readFile(t, fs, path); got != "" {
		t.Fatalf("%s = %q; want nothing published", path, got)
	}
}

// Files created and never written are bounded: past maxPendingFiles a
// create fails with a text 9pfuse maps to EAGAIN, and works again once
// one is removed (the control: the same create, with the table no
// longer full).
func TestPublish_PendingFilesBounded(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{PendingTTL: time.Hour})
	r := dialRaw(t, addr)
	r.handshake()
	create := func(name string) *plan9.Fcall {
		r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}}, plan9.Rwalk)
		rx := r.rpc(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: name, Perm: 0o666, Mode: plan9.OREAD})
		r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1})
		return rx
	}
	for i := range maxPendingFiles {
		if rx := create(fmt.Sprintf("p%d.meta", i)); rx.Type != plan9.Rcreate {
			t.Fatalf("create %d: %v", i, rx)
		}
	}
	rx := create("one-more.meta")
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "temporarily unavailable") || fuseErrno(rx.Ename) != syscall.EAGAIN {
		t.Fatalf("create past the limit: %v", rx)
	}
	// Creating a pending name again is not a new file.
	if rx := create("p0.meta"); rx.Type != plan9.Rcreate {
		t.Fatalf("create of a pending name: %v", rx)
	}
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 2, Wname: []string{"t", "p1.meta"}}, plan9.Rwalk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tremove, Tag: 1, Fid: 2}, plan9.Rremove)
	if rx := create("one-more.meta"); rx.Type != plan9.Rcreate {
		t.Fatalf("create after a remove: %v", rx)
	}
	wantLog(t, b)
}

// The JSON check follows writes in pieces, rewrites and holes: a valid
// document written in any order is accepted, and a write that makes the
// text invalid is refused at once, changing nothing.
func TestPublish_JSONPrefixCheck(t *testing.T) {
	b := newFake()
	var logMu sync.Mutex
	var logged []string
	logf := func(format string, args ...any) {
		logMu.Lock()
		logged = append(logged, fmt.Sprintf(format, args...))
		logMu.Unlock()
	}
	_, addr := startServer(t, b, Options{Logf: logf})
	fs := mount(t, addr)

	fid := create(t, fs, "t/p.meta", 0o644)
	for _, w := range []struct {
		off  int64
		data string
		ok   bool
	}{
		{0, `{"descr`, true},
		{7, `iption":`, true},
		{15, `x`, false},   // not a value
		{15, ` "ok`, true}, // the refused write left nothing
		{0, `[`, false},    // a rewrite of the start that breaks the object
		{0, `{`, true},     // one that keeps it
	} {
		_, err := fid.WriteAt([]byte(w.data), w.off)
		if (err == nil) != w.ok {
			t.Fatalf("write %q at %d: %v", w.data, w.off, err)
		}
		if err != nil {
			wantErr(t, err, "invalid JSON in t/p.meta")
		}
	}
	// A hole: the end written first, then the middle.
	if _, err := fid.WriteAt([]byte(`"}`), 21); err != nil {
		t.Fatalf("write past the end: %v", err)
	}
	if _, err := fid.WriteAt([]byte(`!!`), 19); err != nil {
		t.Fatalf("write into the hole: %v", err)
	}
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	wantLog(t, b, `meta p {"description": "ok!!"}`)
	// Each refusal left a log line naming the file and the cause.
	logMu.Lock()
	defer logMu.Unlock()
	if len(logged) != 2 || !strings.Contains(logged[0], "refused a write to t/p.meta: invalid JSON in t/p.meta: byte 16 ('x')") {
		t.Fatalf("log = %q", logged)
	}
}
