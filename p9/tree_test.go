package p9

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

func TestTree_ReadFiles(t *testing.T) {
	b := newFake()
	b.sessions["s1"]["empty"] = &fakeAgent{}
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	tests := []struct {
		name, path, want string
	}{
		{"tool index", "t/idx", "block\twaits until cancelled\necho\tprint the arguments\nfail\talways fails\n"},
		{"meta gets a newline", "t/echo.meta", `{"description":"print the arguments"}` + "\n"},
		{"meta keeps its newline", "t/fail.meta", "{\"description\":\"always fails\"}\n"},
		{"executable byte for byte", "t/echo", "#!/bin/sh\ncat\n"},
		{"profile", "a/coder.json", `{"autoLoad":["echo"]}` + "\n"},
		{"node", "node", "name n1\nos linux\n"},
		{"members", "cluster/members", "n1 127.0.0.1:7946 alive leader 3\n"},
		{"sessions", "session/idx", "s1\n"},
		{"loaded", "session/s1/agent/a1/toolsrv.loaded", "echo\n"},
		{"empty list is empty", "session/s1/agent/empty/toolsrv.loaded", ""},
		{"rev", "session/s1/agent/a1/toolsrv.rev", "7\n"},
		{"preamble", "session/s1/agent/a1/preamble", "tools: echo\n"},
		{"tools before write", "session/s1/agent/a1/tools", "echo\n"},
		// A read before any write is empty, so "9p rdwr" prints only answers.
		{"tools before write", "tools", ""},
		{"ctl before write", "session/s1/agent/a1/ctl", ""},
		{"call before write", "session/s1/agent/a1/call", ""},
		{"session/new before write", "session/new", ""},
		{"where before write", "cluster/where", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readFile(t, fs, tt.path); got != tt.want {
				t.Errorf("%s = %q; want %q", tt.path, got, tt.want)
			}
		})
	}
}

// A reader paging with offsets sees one text; a read at 0 starts over.
func TestTree_ReadAtOffsets(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)
	fid, err := fs.Open("t/idx", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	want := "block\twaits until cancelled\necho\tprint the arguments\nfail\talways fails\n"

	var got []byte
	buf := make([]byte, 5)
	for off := int64(0); ; {
		n, err := fid.ReadAt(buf, off)
		got = append(got, buf[:n]...)
		off += int64(n)
		if off == 5 {
			// The catalog changes mid-read: the reader still sees one text.
			b.mu.Lock()
			b.tools["aaa"] = &fakeTool{desc: "new", meta: []byte("{}")}
			b.mu.Unlock()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != want {
		t.Fatalf("paged read = %q; want %q", got, want)
	}
	// Reading at an offset past the end is empty, not an error.
	if n, err := fid.ReadAt(buf, 10000); n != 0 || err != io.EOF {
		t.Fatalf("read past end = %d, %v", n, err)
	}
	// A read from 0 again sees the new catalog.
	again, err := readAll(fid, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(again), "aaa\tnew\n") {
		t.Fatalf("reread = %q; want the new tool first", again)
	}

	// rev on an open fid follows the agent.
	rev, err := fs.Open("session/s1/agent/a1/toolsrv.rev", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer rev.Close()
	for _, want := range []uint64{7, 8, 12} {
		b.setRev("s1", "a1", want)
		n, err := rev.ReadAt(buf[:5], 0)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if got := string(buf[:n]); got != strconv.FormatUint(want, 10)+"\n" {
			t.Fatalf("rev = %q; want %d", got, want)
		}
	}
}

func dirNames(t *testing.T, fs *client.Fsys, path string) []string {
	t.Helper()
	fid, err := fs.Open(path, plan9.OREAD)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer fid.Close()
	ds, err := fid.Dirreadall()
	if err != nil {
		t.Fatalf("dirread %s: %v", path, err)
	}
	var names []string
	for _, d := range ds {
		names = append(names, d.Name)
	}
	return names
}

func TestTree_DirListings(t *testing.T) {
	b := newFake()
	b.sessions["s1"]["b2"] = &fakeAgent{}
	b.sessions["s0"] = map[string]*fakeAgent{}
	b.profiles["zeta"] = []byte("{}")
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	tests := []struct {
		path string
		want []string
	}{
		{"/", []string{"a", "cluster", "events", "m", "node", "session", "t", "token", "tools", "trust", "v"}},
		{"t", []string{"block.meta", "echo", "echo.meta", "fail.meta", "idx"}},
		{"a", []string{"coder.json", "zeta.json"}},
		{"cluster", []string{"members", "where"}},
		{"session", []string{"idx", "new", "s0", "s1"}},
		{"session/s1", []string{"agent", "ctl"}},
		{"session/s1/agent", []string{"a1", "b2", "new"}},
		{"session/s0/agent", []string{"new"}},
		{"session/s1/agent/a1", []string{"call", "ctl", "preamble", "tools", "toolsrv.loaded", "toolsrv.rev"}},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.path, "/", "_"), func(t *testing.T) {
			if got := dirNames(t, fs, tt.path); !slices.Equal(got, tt.want) {
				t.Errorf("ls %s = %v; want %v", tt.path, got, tt.want)
			}
		})
	}
}

func TestTree_Stat(t *testing.T) {
	b := newFake()
	s, addr := startServer(t, b, Options{Owner: "alice"})
	fs := mount(t, addr)

	tests := []struct {
		path string
		mode plan9.Perm
	}{
		{"/", plan9.DMDIR | 0o555},
		{"t", plan9.DMDIR | 0o755},
		{"a", plan9.DMDIR | 0o755},
		{"session/s1/agent/a1", plan9.DMDIR | 0o555},
		{"t/idx", 0o444},
		{"t/echo", 0o755},
		{"t/echo.meta", 0o644},
		{"a/coder.json", 0o644},
		{"tools", 0o666},
		{"events", 0o444},
		{"session/s1/ctl", 0o222},
		{"session/s1/agent/a1/call", 0o666},
		{"session/s1/agent/a1/toolsrv.rev", 0o444},
	}
	seen := map[uint64]string{}
	for _, tt := range tests {
		d, err := fs.Stat(tt.path)
		if err != nil {
			t.Fatalf("stat %s: %v", tt.path, err)
		}
		if d.Mode != tt.mode {
			t.Errorf("%s mode = %v; want %v", tt.path, d.Mode, tt.mode)
		}
		// Files of t/ and a/ have their true length, the rest 0.
		var length uint64
		if strings.HasPrefix(tt.path, "t/") || strings.HasPrefix(tt.path, "a/") {
			length = uint64(len(readFile(t, fs, tt.path)))
		}
		if d.Length != length || d.Uid != "alice" || d.Gid != "alice" || d.Mtime != s.mtime {
			t.Errorf("%s: stat %v", tt.path, d)
		}
		isDir := tt.mode&plan9.DMDIR != 0
		if (d.Qid.Type&plan9.QTDIR != 0) != isDir {
			t.Errorf("%s qid type %#x", tt.path, d.Qid.Type)
		}
		if p, dup := seen[d.Qid.Path]; dup {
			t.Errorf("%s and %s share qid path %#x", p, tt.path, d.Qid.Path)
		}
		seen[d.Qid.Path] = tt.path
		// Qids are stable: the same on another connection.
		d2, err := mount(t, addr).Stat(tt.path)
		if err != nil || d2.Qid != d.Qid {
			t.Errorf("%s qid %v then %v (%v)", tt.path, d.Qid, d2.Qid, err)
		}
	}
	if d, _ := fs.Stat("/"); d == nil || d.Name != "/" {
		t.Errorf("root stat %v", d)
	}
}

// Directory reads honour 9P offsets: whole entries, restart at 0.
func TestTree_DirReadOffsets(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "session/s1/agent/a1", plan9.OREAD)

	whole := r.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 0, Count: 8000})
	if whole.Type != plan9.Rread {
		t.Fatalf("read: %v", whole)
	}
	var sizes []int
	for b := whole.Data; len(b) > 0; {
		n := int(b[0]) | int(b[1])<<8
		sizes = append(sizes, n+2)
		b = b[n+2:]
	}
	if len(sizes) != 6 {
		t.Fatalf("%d entries; want 6", len(sizes))
	}
	// Reads that fit two entries, continuing where the last ended.
	var paged []byte
	off := uint64(0)
	for {
		rx := r.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: off, Count: uint32(sizes[0] + sizes[1] + 1)})
		if rx.Type != plan9.Rread {
			t.Fatalf("read at %d: %v", off, rx)
		}
		if len(rx.Data) == 0 {
			break
		}
		paged = append(paged, rx.Data...)
		off += uint64(len(rx.Data))
	}
	if !bytes.Equal(paged, whole.Data) {
		t.Fatalf("paged directory differs from a whole read")
	}
	// Restart at 0.
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 0, Count: 8000})
	if !bytes.Equal(rx.Data, whole.Data) {
		t.Fatalf("reread at 0 differs")
	}
	// An offset inside an entry, and a count too small for one entry.
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 3, Count: 8000})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "offsets must be 0 or where the previous read ended") {
		t.Fatalf("read at 3: %v", rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 1, Offset: 0, Count: 10})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "too small") {
		t.Fatalf("read of 10: %v", rx)
	}
}

func TestTree_WalkErrors(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	fs := mount(t, addr)
	tests := []struct {
		path, want string
	}{
		{"session/nope/ctl", "file does not exist"},
		{"session/s1/agent/zz/call", "file does not exist"},
		{"t/nope.meta", "file does not exist"},
		{"t/nope", "file does not exist"},
		{"t/fail", "file does not exist"},
		{"a/nope.json", "file does not exist"},
		{"cluster/x", "file does not exist"},
		{"node/x", "node is not a directory"},
	}
	for _, tt := range tests {
		_, err := fs.Stat(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			// The 9fans client reports a partial walk as "not found";
			// the first failing element gives our text.
			if err == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("stat %s: %v; want %q", tt.path, err, tt.want)
			}
		}
	}

	// Raw walks show the texts and the partial-walk rules.
	r := dialRaw(t, addr)
	r.handshake()
	for _, tt := range tests {
		elems := strings.Split(tt.path, "/")
		fid := uint32(0)
		if len(elems) > 1 {
			rx := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 9, Wname: elems[:len(elems)-1]})
			if rx.Type == plan9.Rerror {
				if !strings.Contains(rx.Ename, tt.want) {
					t.Errorf("walk %s: %q; want %q", tt.path, rx.Ename, tt.want)
				}
				continue
			}
			if len(rx.Wqid) != len(elems)-1 {
				// A partial walk: fid 9 was not made.
				if rx2 := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 9}); rx2.Type != plan9.Rerror {
					t.Errorf("partial walk of %s made fid 9", tt.path)
				}
				continue
			}
			fid = 9
		}
		rx := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: fid, Newfid: 10, Wname: elems[len(elems)-1:]})
		if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, tt.want) {
			t.Errorf("walk %s: %v; want %q", tt.path, rx, tt.want)
		}
		if fid == 9 {
			r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 9})
		}
	}

	// Partial walk: Rwalk with the qids so far, newfid not made.
	rx := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 5, Wname: []string{"session", "s1", "nope", "x"}})
	if rx.Type != plan9.Rwalk || len(rx.Wqid) != 2 {
		t.Fatalf("partial walk: %v", rx)
	}
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 5}); rx.Type != plan9.Rerror {
		t.Fatalf("newfid exists after a partial walk: %v", rx)
	}
	// "..", clone, walk onto itself.
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 5, Wname: []string{"session", "s1", "..", "..", "t", "..", ".."}})
	if rx.Type != plan9.Rwalk || len(rx.Wqid) != 7 {
		t.Fatalf("walk with ..: %v", rx)
	}
	root := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 0})
	five := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 5})
	if !bytes.Equal(root.Stat, five.Stat) {
		t.Fatalf("walking back with .. does not reach the root")
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 5, Newfid: 6})
	if rx.Type != plan9.Rwalk || len(rx.Wqid) != 0 {
		t.Fatalf("clone: %v", rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 6, Newfid: 6, Wname: []string{"node"}})
	if rx.Type != plan9.Rwalk || len(rx.Wqid) != 1 {
		t.Fatalf("walk onto itself: %v", rx)
	}
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 6}); rx.Type != plan9.Rstat {
		t.Fatalf("stat after walk onto itself: %v", rx)
	}
	// newfid in use; too many names; walking an open fid.
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 5, Wname: []string{"t"}})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "fid 5 is already in use") {
		t.Fatalf("newfid in use: %v", rx)
	}
	// The 9fans client will not send 17 names: build the frame by hand.
	many := []byte{0, 0, 0, 0, plan9.Twalk, 1, 0, 0, 0, 0, 0, 7, 0, 0, 0, 17, 0}
	for range 17 {
		many = append(many, 2, 0, '.', '.')
	}
	binary.LittleEndian.PutUint32(many, uint32(len(many)))
	r.sendBytes(many)
	rx = r.recv()
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "at most 16") {
		t.Fatalf("17 names: %v", rx)
	}
	r.walkOpen(8, "node", plan9.OREAD)
	rx = r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 8, Newfid: 9})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "is open") {
		t.Fatalf("walk of an open fid: %v", rx)
	}
}

func TestTree_OpenModes(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	fs := mount(t, addr)
	tests := []struct {
		path string
		mode uint8
		err  string
	}{
		{"node", plan9.OWRITE, "permission denied: node is read-only"},
		{"node", plan9.ORDWR, "permission denied: node is read-only"},
		{"node", plan9.OREAD | plan9.OTRUNC, "permission denied: node is read-only"},
		{"t/idx", plan9.OWRITE, "permission denied: t/idx is read-only"},
		{"session/s1/ctl", plan9.OREAD, "permission denied: session/s1/ctl is write-only"},
		{"session/s1/ctl", plan9.OWRITE, ""},
		{"t", plan9.OWRITE, "t is a directory"},
		{"t", plan9.OREAD, ""},
		{"t/echo", plan9.OEXEC, ""},
		{"node", plan9.OEXEC, ""},
		{"tools", plan9.OWRITE | plan9.OTRUNC, ""},
		{"tools", plan9.ORDWR, ""},
		{"node", plan9.OREAD | plan9.ORCLOSE, "cannot be removed"},
	}
	for _, tt := range tests {
		fid, err := fs.Open(tt.path, tt.mode)
		if tt.err == "" {
			if err != nil {
				t.Errorf("open %s mode %#x: %v", tt.path, tt.mode, err)
				continue
			}
			fid.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("open %s mode %#x: %v; want %q", tt.path, tt.mode, err, tt.err)
		}
		if fid != nil {
			fid.Close()
		}
	}
	// A fid opened for reading cannot write, and the other way round.
	fid, err := fs.Open("tools", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fid.WriteAt([]byte("echo"), 0)
	wantErr(t, err, "not opened for writing")
	fid.Close()
	fid, err = fs.Open("tools", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fid.ReadAt(make([]byte, 10), 0)
	wantErr(t, err, "not opened for reading")
	fid.Close()
	// Create and remove are refused with a hint; remove clunks the fid.
	_, err = fs.Create("session/x", plan9.OREAD, 0o666)
	wantErr(t, err, "session/new")
	err = fs.Remove("session/s1")
	wantErr(t, err, `write "kill" to session/s1/ctl`)
	err = fs.Remove("node")
	wantErr(t, err, "cannot remove node")
}

func TestAnswerFiles(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)

	tests := []struct {
		name, path, write, want, err string
	}{
		{"tool doc", "tools", "echo", "echo: prints its arguments\n", ""},
		{"tool doc keeps newline", "tools", "fail\n", "fail: fails\n", ""},
		{"two docs", "tools", "echo\nfail\n", "echo: prints its arguments\nfail: fails\n", ""},
		{"no such tool", "tools", "nope", "", `no tool "nope" in the cluster`},
		{"where", "cluster/where", "echo\n", "n1\nn2\n", ""},
		{"where nobody", "cluster/where", "block", "", ""},
		{"where unknown", "cluster/where", "nope", "", `no tool "nope" in the cluster`},
		{"new session", "session/new", "name=s2 agent=coder\n", "s2\n", ""},
		{"new session exists", "session/new", "name=s1", "", `session "s1" already exists`},
		{"new session bad spec", "session/new", "s3", "", `write "name=S [agent=PROFILE] [cwd=DIR]"`},
		{"new session unknown key", "session/new", "name=s3 color=red", "", `unknown key "color"`},
		{"new agent", "session/s1/agent/new", "name=b1", "b1\n", ""},
		{"new agent bad", "session/s1/agent/new", "profile", "", `"profile" is not KEY=VALUE: write "name=A [profile=P]"`},
		{"load", "session/s1/agent/a1/ctl", "tool_load fail", "loaded fail\n", ""},
		{"load unknown", "session/s1/agent/a1/ctl", "tool_load nope", "", `no tool "nope" in the cluster`},
		{"unload", "session/s1/agent/a1/ctl", "tool_unload fail\n", "unloaded fail\n", ""},
		{"tools_all", "session/s1/agent/a1/ctl", "tools_all", "block\twaits until cancelled\t\necho\tprint the arguments\tn1,n2\nfail\talways fails\tn1,\n", ""},
		{"several commands", "session/s1/agent/a1/ctl", "tool_load fail\n\ntool_unload fail\n", "loaded fail\nunloaded fail\n", ""},
		{"stop at first error", "session/s1/agent/a1/ctl", "tool_load block\nbogus\ntool_load fail", "", `unknown command "bogus"`},
		{"tool_load without name", "session/s1/agent/a1/ctl", "tool_load", "", "tool_load needs a tool name"},
		{"load by tools", "session/s1/agent/a1/tools", "fail\n", "echo\nblock\nfail\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rdwr(fs, tt.path, tt.write)
			if tt.err != "" {
				wantErr(t, err, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("answer %q; want %q", got, tt.want)
			}
		})
	}
	// "stop at first error" loaded block before failing.
	if got := readFile(t, fs, "session/s1/agent/a1/toolsrv.loaded"); got != "echo\nblock\nfail\n" {
		t.Fatalf("loaded = %q", got)
	}
	// A new write replaces the answer; a failed write clears it.
	fid, err := fs.Open("tools", plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()
	for _, step := range []struct{ write, want string }{
		{"echo", "echo: prints its arguments\n"},
		{"fail", "fail: fails\n"},
		{"nope", ""},
	} {
		fid.WriteAt([]byte(step.write), 0)
		got, err := readAll(fid, 3) // small reads: the answer is paged
		if err != nil || string(got) != step.want {
			t.Fatalf("after %q: %q, %v; want %q", step.write, got, err, step.want)
		}
	}
	// The answer is per fid.
	other, err := fs.Open("tools", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(other, 100); len(got) != 0 {
		t.Fatalf("another fid sees %q", got)
	}
	other.Close()

	// session ctl kill, agent ctl kill.
	if _, err := rdwr(fs, "session/s1/agent/b1/ctl", "kill"); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, fs, "session/s1/agent"); !slices.Equal(got, []string{"a1", "new"}) {
		t.Fatalf("agents after kill = %v", got)
	}
	ctl, err := fs.Open("session/s2/ctl", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ctl.Write([]byte("stop"))
	wantErr(t, err, `unknown command "stop"`)
	if _, err := ctl.Write([]byte("kill\n")); err != nil {
		t.Fatal(err)
	}
	ctl.Close()
	if _, err := fs.Stat("session/s2"); err == nil {
		t.Fatal("session s2 still exists")
	}
}

func TestCall(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)
	const path = "session/s1/agent/a1/call"

	tests := []struct {
		name, write, want, err string
	}{
		{"args", `echo {"a": 1}`, `{"a": 1}`, ""},
		{"no args", "echo", "{}", ""},
		{"no args newline", "echo\n", "{}", ""},
		{"args newline", "echo {\"x\":[1,2]}\n", `{"x":[1,2]}`, ""},
		{"failure", "fail {}", "", "tool fail exited with status 1: boom"},
		{"unknown", "nope", "", `no tool "nope" in the cluster`},
		{"bad json", "echo {\"a\":}", "", "the arguments of echo are not valid JSON"},
		{"not an object", "echo [1]", "", "must be a JSON object"},
		{"text after", `echo {} {}`, "", "text after the JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rdwr(fs, path, tt.write)
			if tt.err != "" {
				wantErr(t, err, tt.err)
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("call %q = %q, %v; want %q", tt.write, got, err, tt.want)
			}
		})
	}

	t.Run("big output byte for byte", func(t *testing.T) {
		got, err := rdwr(fs, path, "big")
		if err != nil || got != strings.Repeat("0123456789", 10000) {
			t.Fatalf("big: %d bytes, %v", len(got), err)
		}
	})

	t.Run("split writes", func(t *testing.T) {
		fid, err := fs.Open(path, plan9.ORDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer fid.Close()
		parts := []string{`echo {"k":`, ` "v", "n"`, `: [1, 2`, "]}\n"}
		off := int64(0)
		calls := b.callCount()
		for i, p := range parts {
			if _, err := fid.WriteAt([]byte(p), off); err != nil {
				t.Fatalf("part %d: %v", i, err)
			}
			off += int64(len(p))
			if i < len(parts)-1 {
				if b.callCount() != calls {
					t.Fatalf("call ran after part %d", i)
				}
				_, err := fid.ReadAt(make([]byte, 10), 0)
				wantErr(t, err, `the call request for "echo" is incomplete`)
			}
		}
		got, err := readAll(fid, 1000)
		if err != nil || string(got) != `{"k": "v", "n": [1, 2]}` {
			t.Fatalf("answer %q, %v", got, err)
		}
		// A write that does not continue the request is refused.
		fid.WriteAt([]byte(`echo {"a":`), 0)
		_, err = fid.WriteAt([]byte(`1}`), 50)
		wantErr(t, err, "does not continue the call request")
	})

	t.Run("large arguments split by the client", func(t *testing.T) {
		fid, err := fs.Open(path, plan9.ORDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer fid.Close()
		args := `{"data":"` + strings.Repeat("x", 200000) + `"}`
		if _, err := fid.WriteAt([]byte("echo "+args), 0); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(fid, 60000)
		if err != nil || string(got) != args {
			t.Fatalf("answer of %d bytes, %v", len(got), err)
		}
	})

	t.Run("1 MiB cap", func(t *testing.T) {
		fid, err := fs.Open(path, plan9.ORDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer fid.Close()
		args := `{"data":"` + strings.Repeat("x", 1<<20) + `"}`
		_, err = fid.WriteAt([]byte("echo "+args), 0)
		wantErr(t, err, "call arguments are limited to 1 MiB")
		// Just under the cap is fine.
		args = `{"data":"` + strings.Repeat("x", 1<<20-20) + `"}`
		if _, err := fid.WriteAt([]byte("echo "+args), 0); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("truncate resets a partial request", func(t *testing.T) {
		fid, err := fs.Open(path, plan9.ORDWR)
		if err != nil {
			t.Fatal(err)
		}
		defer fid.Close()
		fid.WriteAt([]byte(`echo {"a":`), 0)
		d := new(plan9.Dir)
		d.Null()
		d.Length = 0
		if err := fid.Wstat(d); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(fid, 1000)
		if err != nil || len(got) != 0 {
			t.Fatalf("after truncate: %q, %v", got, err)
		}
	})
}

// A call that blocks is stopped by Tflush, and by closing the connection.
func TestCall_Flush(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "session/s1/agent/a1/call", plan9.ORDWR)
	r.send(&plan9.Fcall{Type: plan9.Twrite, Tag: 7, Fid: 1, Offset: 0, Data: []byte("block")})
	waitFor(t, "the call to start", func() bool { return b.callCount() == 1 })
	r.send(&plan9.Fcall{Type: plan9.Tflush, Tag: 8, Oldtag: 7})
	rx := r.recv()
	if rx.Tag == 7 {
		if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "context canceled") {
			t.Fatalf("flushed call: %v", rx)
		}
		rx = r.recv()
	}
	if rx.Type != plan9.Rflush || rx.Tag != 8 {
		t.Fatalf("want Rflush, got %v", rx)
	}
	// The tag is free again.
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 7, Fid: 1})
	if rx.Type != plan9.Rstat {
		t.Fatalf("stat with the flushed tag: %v", rx)
	}
}

func TestEvents(t *testing.T) {
	b := newFake()
	b.addEvent("tool+", "old") // before the open: not seen
	_, addr := startServer(t, b, Options{EventWait: 200 * time.Millisecond})
	fs := mount(t, addr)
	fid, err := fs.Open("events", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer fid.Close()

	// Nothing happens: the read returns 0 bytes after EventWait.
	start := time.Now()
	n, err := fid.ReadAt(make([]byte, 100), 0)
	if n != 0 || err != io.EOF {
		t.Fatalf("idle read = %d, %v; want EOF", n, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("idle read returned after %v", d)
	}

	// A read blocks until an event comes.
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 100)
		for {
			n, err := fid.Read(buf)
			if n > 0 || (err != nil && err != io.EOF) {
				got <- string(buf[:n])
				return
			}
		}
	}()
	b.addEvent("tool+", "echo")
	select {
	case line := <-got:
		if line != "2 tool+ echo\n" {
			t.Fatalf("event = %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}

	// Several events, read with a small count: whole lines, the rest kept.
	b.addEvent("load", "a1")
	b.addEvent("agent-", "a2")
	b.addEvent("node+", "n3")
	var all string
	buf := make([]byte, 13)
	for len(all) < len("3 load a1\n4 agent- a2\n5 node+ n3\n") {
		n, err := fid.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(buf[:n]), "\n") {
			t.Fatalf("read %q is not whole lines", buf[:n])
		}
		all += string(buf[:n])
	}
	if all != "3 load a1\n4 agent- a2\n5 node+ n3\n" {
		t.Fatalf("events = %q", all)
	}
	b.addEvent("tool-", "a-rather-long-tool-name")
	_, err = fid.Read(make([]byte, 5))
	wantErr(t, err, "too small for the next event line")
}

// Tflush of a blocked events read answers at once.
func TestEvents_Flush(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{EventWait: time.Minute})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "events", plan9.OREAD)
	r.send(&plan9.Fcall{Type: plan9.Tread, Tag: 3, Fid: 1, Count: 100})
	// The duplicate tag is refused while the read waits.
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 3, Fid: 1})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "tag 3 is already in use") {
		t.Fatalf("duplicate tag: %v", rx)
	}
	start := time.Now()
	r.send(&plan9.Fcall{Type: plan9.Tflush, Tag: 4, Oldtag: 3})
	rx = r.recv()
	if rx.Tag == 3 {
		rx = r.recv()
	}
	if rx.Type != plan9.Rflush || time.Since(start) > 5*time.Second {
		t.Fatalf("flush: %v after %v", rx, time.Since(start))
	}
	// A flush of a tag not in flight answers at once.
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Tflush, Tag: 5, Oldtag: 99}); rx.Type != plan9.Rflush {
		t.Fatalf("flush of nothing: %v", rx)
	}
}

func TestWstat(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	fs := mount(t, addr)
	null := func() *plan9.Dir { d := new(plan9.Dir); d.Null(); return d }

	tests := []struct {
		name, path string
		edit       func(d *plan9.Dir)
		err        string
	}{
		{"sync", "node", func(d *plan9.Dir) {}, ""},
		{"sync dir", "t", func(d *plan9.Dir) {}, ""},
		{"truncate", "tools", func(d *plan9.Dir) { d.Length = 0 }, ""},
		{"truncate call", "session/s1/agent/a1/call", func(d *plan9.Dir) { d.Length = 0 }, ""},
		{"truncate read-only", "node", func(d *plan9.Dir) { d.Length = 0 }, "permission denied: node is read-only"},
		{"extend", "tools", func(d *plan9.Dir) { d.Length = 5 }, "can only be truncated to length 0"},
		{"touch", "cluster/where", func(d *plan9.Dir) { d.Mtime = 12345; d.Atime = 12345 }, ""},
		{"touch read-only", "t/idx", func(d *plan9.Dir) { d.Mtime = 12345 }, "permission denied: t/idx is read-only"},
		{"rename", "tools", func(d *plan9.Dir) { d.Name = "x" }, "cannot rename tools"},
		{"same name", "tools", func(d *plan9.Dir) { d.Name = "tools" }, ""},
		{"chmod", "tools", func(d *plan9.Dir) { d.Mode = 0o600 }, "cannot change the mode of tools: it is -rw-rw-rw-"},
		{"chown", "tools", func(d *plan9.Dir) { d.Uid = "bob" }, "cannot change the owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := null()
			tt.edit(d)
			err := fs.Wstat(tt.path, d)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, tt.err)
		})
	}
}

// Walking into a killed session fails; an open fid of it fails on read.
func TestTree_Dynamic(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)
	rev, err := fs.Open("session/s1/agent/a1/toolsrv.rev", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	defer rev.Close()
	if err := b.KillSession("s1"); err != nil {
		t.Fatal(err)
	}
	_, err = fs.Open("session/s1/agent/a1/toolsrv.rev", plan9.OREAD)
	if err == nil {
		t.Fatal("walk into a killed session succeeded")
	}
	buf := make([]byte, 10)
	rev.ReadAt(buf, 0) // the snapshot made at open
	_, err = rev.ReadAt(buf, 0)
	wantErr(t, err, `session "s1" does not exist`)
}

// Every request is handled and answered even when Backend.Call is slow:
// other connections are not held up by a connection's blocked calls.
func TestServer_ConnectionsIndependent(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{MaxInflight: 2})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "session/s1/agent/a1/call", plan9.ORDWR)
	r.walkOpen(2, "session/s1/agent/a1/call", plan9.ORDWR)
	r.send(&plan9.Fcall{Type: plan9.Twrite, Tag: 10, Fid: 1, Data: []byte("block")})
	r.send(&plan9.Fcall{Type: plan9.Twrite, Tag: 11, Fid: 2, Data: []byte("block")})
	waitFor(t, "both calls to run", func() bool { return b.callCount() == 2 })
	// This connection is full; another one is served.
	fs := mount(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan string, 1)
	go func() {
		fid, err := fs.Open("session/s1/agent/a1/toolsrv.rev", plan9.OREAD)
		if err != nil {
			done <- err.Error()
			return
		}
		defer fid.Close()
		b, err := readAll(fid, 100)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(b)
	}()
	select {
	case got := <-done:
		if got != "7\n" {
			t.Fatalf("rev = %q", got)
		}
	case <-ctx.Done():
		t.Fatal("second connection not served")
	}
}
