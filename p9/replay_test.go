package p9

import (
	"strings"
	"syscall"
	"testing"

	"9fans.net/go/plan9"
)

// The exact 9P message sequences of the clients docs/tree.md names,
// replayed by hand: plan9port's 9pfuse (src/cmd/9pfuse/main.c: fuselookup,
// _fusecreate, fusesetattr, _fuseopenfid, fusewrite, fuserelease) under the
// Linux FUSE driver, and plan9port's 9p (src/cmd/9p.c: xcreate, xwrite,
// xrdwr, through lib9pclient). Each asserts what the client's user sees.

// fuseErrno is the errno 9pfuse gives the kernel for an error text: the
// first phrase of its table (src/cmd/9pfuse/errstr.c) found in the text,
// ignoring case; ERANGE when none is.
func fuseErrno(text string) syscall.Errno {
	table := []struct {
		phrase string
		errno  syscall.Errno
	}{
		{"permitted", syscall.EPERM}, {"permission", syscall.EACCES}, {"access", syscall.EACCES},
		{"exists", syscall.EEXIST}, {"exist", syscall.ENOENT}, {"no such", syscall.ENOENT},
		{"not found", syscall.ENOENT}, {"not implemented", syscall.ENOSYS}, {"input/output", syscall.EIO},
		{"timeout", syscall.ETIMEDOUT}, {"timed out", syscall.ETIMEDOUT}, {"i/o", syscall.EIO},
		{"too long", syscall.E2BIG}, {"interrupt", syscall.EINTR}, {"no such", syscall.ENODEV},
		{"bad file", syscall.EBADF}, {" fid ", syscall.EBADF}, {"temporar", syscall.EAGAIN},
		{"memory", syscall.ENOMEM}, {"is a directory", syscall.EISDIR}, {"directory", syscall.ENOTDIR},
		{"argument", syscall.EINVAL}, {"pipe", syscall.EPIPE}, {"in use", syscall.EBUSY},
		{"busy", syscall.EBUSY}, {"illegal", syscall.EINVAL}, {"invalid", syscall.EINVAL},
		{"read-only", syscall.EROFS}, {"read only", syscall.EROFS}, {"stale ", syscall.ESTALE},
		{"proto", syscall.EPROTO}, {"entry", syscall.ENOENT},
	}
	low := strings.ToLower(text)
	for _, e := range table {
		if strings.Contains(low, e.phrase) {
			return e.errno
		}
	}
	return syscall.ERANGE
}

// kernelErrno is the errno the Linux kernel's 9P client (net/9p/error.c)
// gives an error text under 9P2000: exact strings only; the ones the
// tree sends exactly.
func kernelErrno(text string) syscall.Errno {
	switch text {
	case "file does not exist":
		return syscall.ENOENT
	case "permission denied":
		return syscall.EACCES
	case "file already exists":
		return syscall.EEXIST
	}
	return 0
}

// rpcOK sends f and fails the test unless the reply is of type want.
func (r *rawConn) rpcOK(f *plan9.Fcall, want uint8) *plan9.Fcall {
	r.t.Helper()
	rx := r.rpc(f)
	if rx.Type != want {
		r.t.Fatalf("%v: got %v", f, rx)
	}
	return rx
}

// rpcErr sends f and returns the text of the Rerror it must get.
func (r *rawConn) rpcErr(f *plan9.Fcall) string {
	r.t.Helper()
	rx := r.rpc(f)
	if rx.Type != plan9.Rerror {
		r.t.Fatalf("%v: got %v, want an error", f, rx)
	}
	return rx.Ename
}

func statOf(t testing.TB, rx *plan9.Fcall) *plan9.Dir {
	t.Helper()
	d, err := plan9.UnmarshalDir(rx.Stat)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// truncStat is the Twstat the kernel's truncation of an open(O_TRUNC)
// becomes in 9pfuse (FATTR_SIZE with FATTR_MTIME and FATTR_CTIME): length
// 0 and a new mtime.
func truncStat(t testing.TB) []byte {
	t.Helper()
	d := new(plan9.Dir)
	d.Null()
	d.Length = 0
	d.Mtime = 1700000000
	b, err := d.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cp hello.meta hello MNT/t/ through 9pfuse: the lookup's walk fails with
// a text 9pfuse maps to ENOENT, so the kernel sends CREATE: a clone of the
// directory's fid, Tcreate with the open mode and the source's mode,
// Tstat of the open fid, a walk to the new name for the node id, the
// writes, then the release's Tclunk, which publishes.
func TestReplay_9pfuseCreate(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	r := dialRaw(t, addr)
	r.handshake()
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}}, plan9.Rwalk)

	doc := `{"description":"say hello"}` + "\n"
	exe := "#!/bin/sh\necho hello\n"
	for _, f := range []struct {
		name, data string
		perm       plan9.Perm
	}{{"hello.meta", doc, 0o644}, {"hello", exe, 0o644}} {
		// LOOKUP
		ename := r.rpcErr(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 1, Newfid: 2, Wname: []string{f.name}})
		if fuseErrno(ename) != syscall.ENOENT || kernelErrno(ename) != syscall.ENOENT {
			t.Fatalf("lookup of a missing %s: %q is errno %v under 9pfuse, %v under the kernel; want ENOENT", f.name, ename, fuseErrno(ename), kernelErrno(ename))
		}
		// CREATE (O_WRONLY|O_CREAT|O_TRUNC: 9pfuse drops O_CREAT and O_TRUNC)
		r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 1, Newfid: 3}, plan9.Rwalk)
		r.rpcOK(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 3, Name: f.name, Perm: f.perm, Mode: plan9.OWRITE}, plan9.Rcreate)
		if d := statOf(t, r.rpcOK(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 3}, plan9.Rstat)); d.Length != 0 {
			t.Fatalf("stat of the created fid: %v", d)
		}
		r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 1, Newfid: 4, Wname: []string{f.name}}, plan9.Rwalk)
		// WRITE, in pieces as the kernel splits them.
		for off := 0; off < len(f.data); off += 8 {
			end := min(off+8, len(f.data))
			rx := r.rpcOK(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 3, Offset: uint64(off), Data: []byte(f.data[off:end])}, plan9.Rwrite)
			if int(rx.Count) != end-off {
				t.Fatalf("write: %v", rx)
			}
		}
		// GETATTR on the open file (fstat): the length written so far.
		if d := statOf(t, r.rpcOK(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 3}, plan9.Rstat)); d.Length != uint64(len(f.data)) {
			t.Fatalf("fstat during the upload: length %d, want %d", d.Length, len(f.data))
		}
		// RELEASE
		r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 3}, plan9.Rclunk)
		// GETATTR on the node: published, with its true length; an
		// executable is 0755 whatever mode it was created with.
		d := statOf(t, r.rpcOK(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 4}, plan9.Rstat))
		if d.Length != uint64(len(f.data)) {
			t.Errorf("%s: length %d after the copy, want %d", f.name, d.Length, len(f.data))
		}
		if f.name == "hello" && d.Mode != 0o755 {
			t.Errorf("t/hello published with mode %v, want 0755", d.Mode)
		}
		r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 4}, plan9.Rclunk)
	}
	wantLog(t, b, `meta hello {"description":"say hello"}`, `exec hello 0755 "#!/bin/sh\necho hello\n"`)
}

// cp short.meta MNT/t/long.meta through 9pfuse, and echo '{bad' > it:
// the kernel opens the existing file (Topen OWRITE on a clone, no
// OTRUNC) and truncates it through setattr, which 9pfuse sends on the
// node's own fid (a Twstat of length 0) or, for a bare size change, as
// an open with OTRUNC on another clone that it clunks at once. The
// truncation may come before or after the open of the fid written on.
func TestReplay_9pfuseTruncate(t *testing.T) {
	long := `{"description":"a long description of the tool"}` + "\n"
	short := `{"description":"short"}` + "\n"
	sequences := []struct {
		name string
		// truncate runs the truncation; fid 2 is the node's fid, fid 3
		// the one written on (open when open is set).
		truncate  func(r *rawConn)
		openFirst bool
	}{
		{"wstat on the node's fid, then open", func(r *rawConn) {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twstat, Tag: 1, Fid: 2, Stat: truncStat(r.t)}, plan9.Rwstat)
		}, false},
		{"open, then wstat on the node's fid", func(r *rawConn) {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twstat, Tag: 1, Fid: 2, Stat: truncStat(r.t)}, plan9.Rwstat)
		}, true},
		{"open, then OTRUNC on a clone clunked at once", func(r *rawConn) {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 2, Newfid: 5}, plan9.Rwalk)
			r.rpcOK(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 5, Mode: plan9.OWRITE | plan9.OTRUNC}, plan9.Ropen)
			r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 5}, plan9.Rclunk)
		}, true},
		{"OTRUNC on a clone clunked at once, then open", func(r *rawConn) {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 2, Newfid: 5}, plan9.Rwalk)
			r.rpcOK(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 5, Mode: plan9.OWRITE | plan9.OTRUNC}, plan9.Ropen)
			r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 5}, plan9.Rclunk)
		}, false},
	}
	// copy replays one copy of data over t/x.meta; it returns the error
	// of the first refused write, if any.
	copyOver := func(r *rawConn, data string, truncate func(*rawConn), openFirst bool) string {
		r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 2, Wname: []string{"t", "x.meta"}}, plan9.Rwalk)
		open := func() {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 2, Newfid: 3}, plan9.Rwalk)
			r.rpcOK(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 3, Mode: plan9.OWRITE}, plan9.Ropen)
		}
		if openFirst {
			open()
		}
		if truncate != nil {
			truncate(r)
		}
		if !openFirst {
			open()
		}
		var refused string
		for off := 0; off < len(data) && refused == ""; off += 10 {
			end := min(off+10, len(data))
			rx := r.rpc(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 3, Offset: uint64(off), Data: []byte(data[off:end])})
			if rx.Type == plan9.Rerror {
				refused = rx.Ename
			}
		}
		if rx := r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 3}); rx.Type != plan9.Rclunk && refused == "" {
			refused = rx.Ename
		}
		r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 2}, plan9.Rclunk)
		return refused
	}
	for _, seq := range sequences {
		t.Run(seq.name, func(t *testing.T) {
			b := newFake()
			_, addr := startServer(t, b, Options{})
			fs := mount(t, addr)
			if err := b.PublishToolMeta("x", []byte(long)); err != nil {
				t.Fatal(err)
			}
			r := dialRaw(t, addr)
			r.handshake()
			if err := copyOver(r, short, seq.truncate, seq.openFirst); err != "" {
				t.Fatalf("cp short.meta: %s", err)
			}
			if got := readFile(t, fs, "t/x.meta"); got != short {
				t.Fatalf("t/x.meta = %q after cp of a shorter file; want %q", got, short)
			}
			// echo '{bad' > t/x.meta: refused at the write, with a text
			// 9pfuse maps to EINVAL; the published file is unchanged.
			ename := copyOver(r, "{bad\n", seq.truncate, seq.openFirst)
			if !strings.Contains(ename, "invalid JSON in t/x.meta") || fuseErrno(ename) != syscall.EINVAL {
				t.Fatalf("echo '{bad' > t/x.meta: %q (errno %v); want an invalid JSON error, EINVAL", ename, fuseErrno(ename))
			}
			if got := readFile(t, fs, "t/x.meta"); got != short {
				t.Fatalf("t/x.meta = %q after a refused write; want %q", got, short)
			}
		})
	}
	// Control: without the truncation the old tail stays after the short
	// text, and what is published is not the short file.
	t.Run("control: no truncation", func(t *testing.T) {
		b := newFake()
		_, addr := startServer(t, b, Options{})
		fs := mount(t, addr)
		b.PublishToolMeta("x", []byte(long))
		r := dialRaw(t, addr)
		r.handshake()
		copyOver(r, short, nil, false)
		if got := readFile(t, fs, "t/x.meta"); got == short {
			t.Fatalf("t/x.meta = %q: the copy without a truncation was exact", got)
		}
	})
}

// 9p create t/hello.meta; 9p write t/hello.meta < hello.meta: create
// opens with OREAD, perm 0666, and clunks; write walks to the name, opens
// OWRITE|OTRUNC, writes in 4096-byte pieces (or once with 0 bytes when
// stdin is empty) and clunks, which publishes.
func TestReplay_9pCreateWrite(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	r := dialRaw(t, addr)
	r.handshake()
	for _, name := range []string{"hello.meta", "hello"} {
		r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}}, plan9.Rwalk)
		r.rpcOK(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: name, Perm: 0o666, Mode: plan9.OREAD}, plan9.Rcreate)
		// A read on the created fid sees the empty file.
		if rx := r.rpcOK(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Count: 100}, plan9.Rread); len(rx.Data) != 0 {
			t.Fatalf("read of a new file: %q", rx.Data)
		}
		r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1}, plan9.Rclunk)
	}
	wantLog(t, b) // an empty file publishes nothing
	// Pending files are listed and read empty, length 0.
	fs := mount(t, addr)
	if names := dirNames(t, fs, "t"); !strings.Contains(strings.Join(names, " "), "hello hello.meta") {
		t.Fatalf("ls t = %v", names)
	}
	wantUnpublished(t, fs, "t/hello.meta")

	for _, f := range []struct{ name, data string }{
		{"hello.meta", `{"description":"say hello"}`},
		{"hello", "#!/bin/sh\necho hello\n"},
	} {
		r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 2, Wname: []string{"t", f.name}}, plan9.Rwalk)
		r.rpcOK(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 2, Mode: plan9.OWRITE | plan9.OTRUNC}, plan9.Ropen)
		r.rpcOK(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 2, Offset: 0, Data: []byte(f.data)}, plan9.Rwrite)
		r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 2}, plan9.Rclunk)
	}
	wantLog(t, b, `meta hello {"description":"say hello"}`, `exec hello 0755 "#!/bin/sh\necho hello\n"`)

	// 9p write with empty stdin: one write of 0 bytes; nothing is
	// published and the close is no error.
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"a"}}, plan9.Rwalk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: "p.json", Perm: 0o666, Mode: plan9.OREAD}, plan9.Rcreate)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1}, plan9.Rclunk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 2, Wname: []string{"a", "p.json"}}, plan9.Rwalk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 2, Mode: plan9.OWRITE | plan9.OTRUNC}, plan9.Ropen)
	r.rpcOK(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 2, Offset: 0, Data: nil}, plan9.Rwrite)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 2}, plan9.Rclunk)
	wantLog(t, b, `meta hello {"description":"say hello"}`, `exec hello 0755 "#!/bin/sh\necho hello\n"`)
}

// 9p rdwr session/new: open ORDWR, then loop: read at 0 and print, read
// a line from stdin, write it (without its newline) at the fid's offset.
// The first read comes before any write and must print nothing.
func TestReplay_9pRdwr(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	r := dialRaw(t, addr)
	r.handshake()
	for _, path := range []string{"session/new", "tools", "cluster/where", "session/s1/agent/a1/ctl", "session/s1/agent/a1/call"} {
		r.walkOpen(1, path, plan9.ORDWR)
		if rx := r.rpcOK(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 0, Count: 4096}, plan9.Rread); len(rx.Data) != 0 {
			t.Errorf("%s: the read before any write returned %q; want nothing", path, rx.Data)
		}
		r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1}, plan9.Rclunk)
	}

	r.walkOpen(1, "session/new", plan9.ORDWR)
	var off uint64
	var out []string
	for _, line := range []string{"name=r1", "name=r2"} {
		rx := r.rpcOK(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 0, Count: 4096}, plan9.Rread)
		out = append(out, string(rx.Data))
		r.rpcOK(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 1, Offset: off, Data: []byte(line)}, plan9.Rwrite)
		off += uint64(len(line))
	}
	rx := r.rpcOK(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 0, Count: 4096}, plan9.Rread)
	out = append(out, string(rx.Data))
	if got := strings.Join(out, "|"); got != "|r1\n|r2\n" {
		t.Fatalf("9p rdwr printed %q; want nothing, then each answer", got)
	}
}

// A publish that fails at the close is the error of the Tclunk (9p write
// exits non-zero with it), with a text 9pfuse maps to EINVAL; the fid is
// clunked all the same and nothing is published.
func TestReplay_FailedPublishAtClose(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	r := dialRaw(t, addr)
	r.handshake()
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}}, plan9.Rwalk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: "half.meta", Perm: 0o666, Mode: plan9.OREAD}, plan9.Rcreate)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1}, plan9.Rclunk)
	r.walkOpen(2, "t/half.meta", plan9.OWRITE|plan9.OTRUNC)
	// Every write is a valid beginning: accepted.
	r.rpcOK(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 2, Offset: 0, Data: []byte(`{"description":"half`)}, plan9.Rwrite)
	ename := r.rpcErr(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 2})
	if !strings.Contains(ename, "invalid JSON in t/half.meta: it is incomplete") || fuseErrno(ename) != syscall.EINVAL {
		t.Fatalf("clunk: %q (errno %v)", ename, fuseErrno(ename))
	}
	if ename := r.rpcErr(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 2}); !strings.Contains(ename, "fid 2 is not in use") {
		t.Fatalf("fid alive after a failed clunk: %q", ename)
	}
	wantLog(t, b)

	// The Backend's refusal at close: an executable over its limit.
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t"}}, plan9.Rwalk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 1, Name: "big", Perm: 0o755, Mode: plan9.OWRITE}, plan9.Rcreate)
	r.rpcOK(&plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 1, Offset: 0, Data: []byte("#!/bin/sh\n")}, plan9.Rwrite)
	b.mu.Lock()
	b.maxExe = 4
	b.mu.Unlock()
	if ename := r.rpcErr(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 1}); !strings.Contains(ename, "limited to 4 bytes") {
		t.Fatalf("clunk: %q", ename)
	}
	wantLog(t, b)
}

// The errno each kind of refusal becomes under 9pfuse, and, for the texts
// the kernel knows, under v9fs.
func TestReplay_Errno(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	r := dialRaw(t, addr)
	r.handshake()
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 10, Wname: []string{"t"}}, plan9.Rwalk)
	r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 11, Wname: []string{"session"}}, plan9.Rwalk)
	tests := []struct {
		what string
		fc   func() *plan9.Fcall
		want syscall.Errno
	}{
		{"walk to a missing tool", func() *plan9.Fcall {
			return &plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 10, Newfid: 9, Wname: []string{"nope.meta"}}
		}, syscall.ENOENT},
		{"walk to a missing session", func() *plan9.Fcall {
			return &plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 11, Newfid: 9, Wname: []string{"nope"}}
		}, syscall.ENOENT},
		{"mkdir in t/", func() *plan9.Fcall {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 8, Wname: []string{"t"}}, plan9.Rwalk)
			return &plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 8, Name: "d", Perm: plan9.DMDIR | 0o755, Mode: plan9.OREAD}
		}, syscall.EACCES},
		{"a bad name", func() *plan9.Fcall {
			return &plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 8, Name: ".x", Perm: 0o644, Mode: plan9.OWRITE}
		}, syscall.EINVAL},
		{"rm t/idx", func() *plan9.Fcall {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 7, Wname: []string{"t", "idx"}}, plan9.Rwalk)
			return &plan9.Fcall{Type: plan9.Tremove, Tag: 1, Fid: 7}
		}, syscall.EACCES},
		{"write to t/idx", func() *plan9.Fcall {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 7, Wname: []string{"t", "idx"}}, plan9.Rwalk)
			return &plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 7, Mode: plan9.OWRITE}
		}, syscall.EACCES},
		{"rename", func() *plan9.Fcall {
			d := new(plan9.Dir)
			d.Null()
			d.Name = "other.meta"
			st, _ := d.Bytes()
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 6, Wname: []string{"t", "echo.meta"}}, plan9.Rwalk)
			return &plan9.Fcall{Type: plan9.Twstat, Tag: 1, Fid: 6, Stat: st}
		}, syscall.EACCES},
		{"a metadata file the Backend refuses", func() *plan9.Fcall {
			r.rpcOK(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 5, Wname: []string{"t"}}, plan9.Rwalk)
			r.rpcOK(&plan9.Fcall{Type: plan9.Tcreate, Tag: 1, Fid: 5, Name: "v.meta", Perm: 0o644, Mode: plan9.OWRITE}, plan9.Rcreate)
			return &plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 5, Data: []byte(`{"description":1}`)}
		}, syscall.EINVAL},
	}
	for _, tt := range tests {
		ename := r.rpcErr(tt.fc())
		if got := fuseErrno(ename); got != tt.want {
			t.Errorf("%s: %q is %v under 9pfuse; want %v", tt.what, ename, got, tt.want)
		}
		if strings.HasPrefix(tt.what, "walk") && kernelErrno(ename) != tt.want {
			t.Errorf("%s: %q is not %v under v9fs", tt.what, ename, tt.want)
		}
	}
}
