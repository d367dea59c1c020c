package p9

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/knusbaum/go9p/proto"
)

// frame builds a raw message: size[4] type[1] tag[2] body.
func frame(typ uint8, tag uint16, body ...byte) []byte {
	b := make([]byte, 7, 7+len(body))
	binary.LittleEndian.PutUint32(b, uint32(7+len(body)))
	b[4] = typ
	binary.LittleEndian.PutUint16(b[5:], tag)
	return append(b, body...)
}

func mustBytes(t testing.TB, f *plan9.Fcall) []byte {
	b, err := f.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stillServes checks the connection still answers a Tstat of fid 0.
func (r *rawConn) stillServes() {
	r.t.Helper()
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 2, Fid: 0})
	if rx.Type != plan9.Rstat {
		r.t.Fatalf("connection no longer serves: %v", rx)
	}
}

func TestHardening_BadFrames(t *testing.T) {
	b := newFake()
	s, addr := startServer(t, b, Options{})
	tests := []struct {
		name     string
		versions bool   // handshake first
		send     []byte // raw bytes
		rerror   string // expected Rerror text, with the connection going on; "" = closed
		tag      uint16
	}{
		{name: "size 0", versions: true, send: []byte{0, 0, 0, 0}},
		{name: "size 3", versions: true, send: []byte{3, 0, 0, 0, 1, 2, 3}},
		{name: "size 6", versions: true, send: []byte{6, 0, 0, 0, plan9.Tclunk, 0}},
		{name: "size over msize", versions: true, send: []byte{0x29, 0x23, 0, 0, plan9.Twrite}},
		{name: "size over MaxMsize before Tversion", send: []byte{0, 0, 1, 0, plan9.Tversion}},
		{name: "size 2^32-1", send: []byte{0xff, 0xff, 0xff, 0xff}},
		{name: "unknown type", versions: true, send: frame(200, 5, 1, 2, 3), rerror: "message type 200 is not a 9P2000 request", tag: 5},
		{name: "Terror", versions: true, send: frame(plan9.Terror, 5), rerror: "not a 9P2000 request", tag: 5},
		{name: "R-message", versions: true, send: frame(plan9.Rread, 6, 0, 0, 0, 0), rerror: "is a reply", tag: 6},
		{name: "Rversion", versions: true, send: frame(plan9.Rversion, 6, 0, 0, 0, 0, 0, 0), rerror: "is a reply", tag: 6},
		{name: "truncated Tread", versions: true, send: frame(plan9.Tread, 7, 0, 0, 0), rerror: "shorter than its fields", tag: 7},
		{name: "Twrite count past end", versions: true, send: frame(plan9.Twrite, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 'x'), rerror: "shorter than its fields", tag: 7},
		{name: "Twalk name past end", versions: true, send: frame(plan9.Twalk, 7, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 50, 0, 'x'), rerror: "shorter than its fields", tag: 7},
		{name: "Topen without mode", versions: true, send: frame(plan9.Topen, 7, 0, 0, 0, 0), rerror: "shorter than its fields", tag: 7},
		{name: "Tcreate short", versions: true, send: frame(plan9.Tcreate, 7, 0, 0, 0, 0, 0, 0), rerror: "shorter than its fields", tag: 7},
		{name: "trailing bytes", versions: true, send: frame(plan9.Tclunk, 7, 9, 0, 0, 0, 1, 2), rerror: "2 bytes after its fields", tag: 7},
		{name: "Twstat sizes disagree", versions: true, send: frame(plan9.Twstat, 7, 0, 0, 0, 0, 4, 0, 9, 0, 0, 0), rerror: "stat", tag: 7},
		{name: "empty Tversion", send: frame(plan9.Tversion, 7), rerror: "shorter than its fields", tag: 7},
		{name: "before Tversion", send: mustBytes(t, &plan9.Fcall{Type: plan9.Tattach, Tag: 8, Fid: 0, Afid: plan9.NOFID}), rerror: "the first message must be Tversion", tag: 8},
		{name: "msize too small", send: mustBytes(t, &plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 100, Version: "9P2000"}), rerror: "msize too small", tag: plan9.NOTAG},
		{name: "auth", versions: true, send: mustBytes(t, &plan9.Fcall{Type: plan9.Tauth, Tag: 9, Afid: 1, Uname: "u"}), rerror: "authentication not required", tag: 9},
		{name: "attach with afid", versions: true, send: mustBytes(t, &plan9.Fcall{Type: plan9.Tattach, Tag: 9, Fid: 4, Afid: 1}), rerror: "authentication not required", tag: 9},
		{name: "attach fid in use", versions: true, send: mustBytes(t, &plan9.Fcall{Type: plan9.Tattach, Tag: 9, Fid: 0, Afid: plan9.NOFID}), rerror: "fid 0 is already in use", tag: 9},
		{name: "NOTAG request", versions: true, send: mustBytes(t, &plan9.Fcall{Type: plan9.Tstat, Tag: plan9.NOTAG, Fid: 0}), rerror: "tag NOTAG (65535) is only for Tversion", tag: plan9.NOTAG},
		{name: "unknown fid", versions: true, send: mustBytes(t, &plan9.Fcall{Type: plan9.Tstat, Tag: 3, Fid: 77}), rerror: "fid 77 is not in use on this connection", tag: 3},
		{name: "read unopened", versions: true, send: mustBytes(t, &plan9.Fcall{Type: plan9.Tread, Tag: 3, Fid: 0, Count: 10}), rerror: "fid 0 is not open", tag: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			if tt.versions {
				r.handshake()
			}
			r.sendBytes(tt.send)
			if tt.rerror == "" {
				r.expectClosed()
				return
			}
			rx := r.recv()
			if rx.Type != plan9.Rerror || rx.Tag != tt.tag || !strings.Contains(rx.Ename, tt.rerror) {
				t.Fatalf("got %v; want Rerror tag %d %q", rx, tt.tag, tt.rerror)
			}
			if tt.versions {
				r.stillServes()
			}
		})
	}
	// Other clients were never disturbed.
	if got := readFile(t, mount(t, addr), "node"); got != "name n1\nos linux\n" {
		t.Fatalf("node = %q", got)
	}
	waitFor(t, "closed connections to be released", func() bool { return s.handles.Load() == 0 })
}

func TestHardening_Version(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{MaxMsize: 4096})
	r := dialRaw(t, addr)
	tests := []struct {
		msize       uint32
		version     string
		wantVersion string
		wantMsize   uint32
	}{
		{8192, "9P2000", "9P2000", 4096},
		{1024, "9P2000.L", "9P2000", 1024},
		{8192, "9P2000.u", "9P2000", 4096},
		{8192, "foo", "unknown", 4096},
	}
	for _, tt := range tests {
		rx := r.rpc(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: tt.msize, Version: tt.version})
		if rx.Type != plan9.Rversion || rx.Version != tt.wantVersion || rx.Msize != tt.wantMsize {
			t.Fatalf("Tversion %d %q: %v", tt.msize, tt.version, rx)
		}
	}
	// After "unknown" the session is not established.
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID})
	if rx.Type != plan9.Rerror {
		t.Fatalf("attach after unknown version: %v", rx)
	}
	// Iounit follows the negotiated msize, and reads are bounded by it.
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 1000, Version: "9P2000"})
	if rx.Msize != 1000 {
		t.Fatalf("version: %v", rx)
	}
	r.handshakeAttach()
	r.send(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 1, Wname: []string{"t", "echo"}})
	r.recv()
	rx = r.rpc(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: 1, Mode: plan9.OREAD})
	if rx.Type != plan9.Ropen || rx.Iounit != 1000-24 {
		t.Fatalf("open: %v", rx)
	}
	// A frame over the negotiated msize ends the connection.
	r.sendBytes(mustBytes(t, &plan9.Fcall{Type: plan9.Twrite, Tag: 1, Fid: 1, Data: make([]byte, 1000)}))
	r.expectClosed()
}

func (r *rawConn) handshakeAttach() {
	r.t.Helper()
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "raw"})
	if rx.Type != plan9.Rattach {
		r.t.Fatalf("attach: %v", rx)
	}
}

// A Tversion mid-connection aborts the requests in flight, answers them
// first, and clunks every fid.
func TestHardening_VersionResets(t *testing.T) {
	s, addr := startServer(t, newFake(), Options{EventWait: time.Minute})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "events", plan9.OREAD)
	r.walkOpen(2, "node", plan9.OREAD)
	r.send(&plan9.Fcall{Type: plan9.Tread, Tag: 5, Fid: 1, Count: 100})
	waitFor(t, "two open handles", func() bool { return s.handles.Load() == 2 })
	r.send(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 8192, Version: "9P2000"})
	rx := r.recv()
	if rx.Tag != 5 {
		t.Fatalf("want the aborted read's answer first, got %v", rx)
	}
	if rx = r.recv(); rx.Type != plan9.Rversion {
		t.Fatalf("want Rversion, got %v", rx)
	}
	if s.handles.Load() != 0 {
		t.Fatalf("%d handles open after Tversion", s.handles.Load())
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tstat, Tag: 1, Fid: 2})
	if rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "not in use") {
		t.Fatalf("fid survived Tversion: %v", rx)
	}
}

func TestHardening_Pipelined1000(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "session/s1/agent/a1/toolsrv.rev", plan9.OREAD)

	const n = 1000
	var all []byte
	for i := range n {
		all = append(all, mustBytes(t, &plan9.Fcall{Type: plan9.Tread, Tag: uint16(i), Fid: 1, Count: 100})...)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := r.nc.Write(all)
		errc <- err
	}()
	seen := make([]bool, n)
	for range n {
		rx := r.recv()
		if rx.Type != plan9.Rread || string(rx.Data) != "7\n" || int(rx.Tag) >= n || seen[rx.Tag] {
			t.Fatalf("reply %v", rx)
		}
		seen[rx.Tag] = true
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	r.stillServes()
}

// A client that sends without ever reading is stopped by TCP: the server
// holds at most MaxInflight of its requests, and serves others meanwhile.
func TestHardening_ClientNeverReads(t *testing.T) {
	b := newFake()
	b.node = strings.Repeat("x", 60000)
	s, addr := startServer(t, b, Options{MaxInflight: 4})
	before := runtime.NumGoroutine()

	r := dialRaw(t, addr)
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 65535, Version: "9P2000"})
	if rx.Msize != 65535 {
		t.Fatalf("version: %v", rx)
	}
	r.handshakeAttach()
	r.walkOpen(1, "node", plan9.OREAD)

	var batch []byte
	for i := range 1000 {
		batch = append(batch, mustBytes(t, &plan9.Fcall{Type: plan9.Tread, Tag: uint16(i), Fid: 1, Count: 65000})...)
	}
	// Write until a write cannot complete: the server stopped reading.
	blocked := false
	var sent int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		r.nc.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := r.nc.Write(batch)
		sent += n
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			blocked = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !blocked {
		t.Fatalf("the server kept reading %d bytes from a client that never reads", sent)
	}
	t.Logf("server stopped reading after %d bytes of requests", sent)
	if g := runtime.NumGoroutine(); g > before+4+10 {
		t.Errorf("%d goroutines; %d before the connection", g, before)
	}
	// Others are served.
	if got := readFile(t, mount(t, addr), "session/s1/agent/a1/toolsrv.rev"); got != "7\n" {
		t.Fatalf("rev = %q", got)
	}
	r.nc.Close()
	waitFor(t, "the stuck connection to be released", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 1 && s.handles.Load() == 0 // the mount is left
	})
}

func TestHardening_FidsPerConnection(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	a := dialRaw(t, addr)
	a.handshake()
	a.walkOpen(5, "node", plan9.OREAD)
	b := dialRaw(t, addr)
	b.handshake()
	for _, f := range []*plan9.Fcall{
		{Type: plan9.Tstat, Tag: 1, Fid: 5},
		{Type: plan9.Tread, Tag: 1, Fid: 5, Count: 10},
		{Type: plan9.Tclunk, Tag: 1, Fid: 5},
	} {
		if rx := b.rpc(f); rx.Type != plan9.Rerror || !strings.Contains(rx.Ename, "fid 5 is not in use") {
			t.Fatalf("other connection's fid: %v", rx)
		}
	}
	if rx := a.rpc(&plan9.Fcall{Type: plan9.Tread, Tag: 1, Fid: 5, Count: 100}); rx.Type != plan9.Rread {
		t.Fatalf("own fid: %v", rx)
	}
}

func TestHardening_HandlesClosedOnDisconnect(t *testing.T) {
	b := newFake()
	s, addr := startServer(t, b, Options{EventWait: time.Minute})
	r := dialRaw(t, addr)
	r.handshake()
	paths := []string{"events", "node", "tools", "session/s1/agent/a1/call", "session/s1/agent/a1", "t/idx"}
	for i, p := range paths {
		r.walkOpen(uint32(i+1), p, plan9.OREAD)
	}
	// A read blocks in events and a call blocks in the Backend.
	r.send(&plan9.Fcall{Type: plan9.Tread, Tag: 20, Fid: 1, Count: 100})
	r.walkOpen(30, "session/s1/agent/a1/call", plan9.ORDWR)
	r.send(&plan9.Fcall{Type: plan9.Twrite, Tag: 21, Fid: 30, Data: []byte("block")})
	waitFor(t, "the call to run", func() bool { return b.callCount() == 1 })
	if got := s.handles.Load(); got != int64(len(paths)+1) {
		t.Fatalf("%d handles open; want %d", got, len(paths)+1)
	}
	// Clunk closes one.
	if rx := r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 2}); rx.Type != plan9.Rclunk {
		t.Fatalf("clunk: %v", rx)
	}
	if got := s.handles.Load(); got != int64(len(paths)) {
		t.Fatalf("%d handles after clunk", got)
	}
	r.nc.Close()
	waitFor(t, "every handle to be closed", func() bool { return s.handles.Load() == 0 })
}

func TestServer_Close(t *testing.T) {
	b := newFake()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(b, Options{Logf: t.Logf, EventWait: time.Minute})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	r := dialRaw(t, l.Addr().String())
	r.handshake()
	r.walkOpen(1, "events", plan9.OREAD)
	r.send(&plan9.Fcall{Type: plan9.Tread, Tag: 2, Fid: 1, Count: 100})
	r.walkOpen(3, "session/s1/agent/a1/call", plan9.ORDWR)
	r.send(&plan9.Fcall{Type: plan9.Twrite, Tag: 4, Fid: 3, Data: []byte("block")})
	waitFor(t, "the call to run", func() bool { return b.callCount() == 1 })

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	r.expectClosed()
	if s.handles.Load() != 0 {
		t.Fatalf("%d handles open after Close", s.handles.Load())
	}
	// After Close, Serve returns nil at once and ServeConn drops the conn.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l2); err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	c1, c2 := net.Pipe()
	s.ServeConn(c1)
	c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Fatal("ServeConn after Close did not close the conn")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Every prefix of every request is refused without a panic, and so is
// every request with a byte added.
func TestFrame_Truncations(t *testing.T) {
	stat := proto.Stat{Name: "n", Uid: "u", Gid: "g", Muid: "m"}
	msgs := []proto.FCall{
		&proto.TRVersion{Header: proto.Header{Type: proto.Tversion, Tag: noTag}, Msize: 8192, Version: "9P2000"},
		&proto.TAuth{Header: proto.Header{Type: proto.Tauth, Tag: 1}, Afid: 1, Uname: "u", Aname: "a"},
		&proto.TAttach{Header: proto.Header{Type: proto.Tattach, Tag: 1}, Fid: 1, Afid: noFid, Uname: "u", Aname: "a"},
		&proto.TFlush{Header: proto.Header{Type: proto.Tflush, Tag: 1}, Oldtag: 2},
		&proto.TWalk{Header: proto.Header{Type: proto.Twalk, Tag: 1}, Fid: 1, Newfid: 2, Nwname: 2, Wname: []string{"a", "bc"}},
		&proto.TOpen{Header: proto.Header{Type: proto.Topen, Tag: 1}, Fid: 1, Mode: 2},
		&proto.TCreate{Header: proto.Header{Type: proto.Tcreate, Tag: 1}, Fid: 1, Name: "x", Perm: 0o644, Mode: 1},
		&proto.TRead{Header: proto.Header{Type: proto.Tread, Tag: 1}, Fid: 1, Offset: 5, Count: 100},
		&proto.TWrite{Header: proto.Header{Type: proto.Twrite, Tag: 1}, Fid: 1, Offset: 5, Count: 3, Data: []byte("abc")},
		&proto.TClunk{Header: proto.Header{Type: proto.Tclunk, Tag: 1}, Fid: 1},
		&proto.TRemove{Header: proto.Header{Type: proto.Tremove, Tag: 1}, Fid: 1},
		&proto.TStat{Header: proto.Header{Type: proto.Tstat, Tag: 1}, Fid: 1},
		&proto.TWstat{Header: proto.Header{Type: proto.Twstat, Tag: 1}, Fid: 1, Stat: stat},
	}
	for _, m := range msgs {
		whole := m.Compose()
		if _, err := parseFrame(whole); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		for n := headerSize; n < len(whole); n++ {
			f := bytes.Clone(whole[:n])
			binary.LittleEndian.PutUint32(f, uint32(n))
			if _, err := parseFrame(f); err == nil {
				t.Errorf("%s cut to %d bytes parsed", m, n)
			}
		}
		f := append(bytes.Clone(whole), 0)
		binary.LittleEndian.PutUint32(f, uint32(len(f)))
		if _, err := parseFrame(f); err == nil {
			t.Errorf("%s with a byte added parsed", m)
		}
	}
}

// With every request slot held by a blocked read, a Tflush still gets
// through: it needs no slot, so a client can always cancel.
func TestHardening_FlushWhenSlotsFull(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{MaxInflight: 2, EventWait: time.Minute})
	r := dialRaw(t, addr)
	r.handshake()
	r.walkOpen(1, "events", plan9.OREAD)
	r.walkOpen(2, "events", plan9.OREAD)
	// Two blocking reads take both slots; a third request waits for one.
	r.send(&plan9.Fcall{Type: plan9.Tread, Tag: 10, Fid: 1, Count: 100})
	r.send(&plan9.Fcall{Type: plan9.Tread, Tag: 11, Fid: 2, Count: 100})
	r.send(&plan9.Fcall{Type: plan9.Tstat, Tag: 12, Fid: 0})
	r.send(&plan9.Fcall{Type: plan9.Tflush, Tag: 13, Oldtag: 10})
	got := map[uint16]uint8{}
	for len(got) < 3 {
		rx := r.recv()
		got[rx.Tag] = rx.Type
	}
	if got[13] != plan9.Rflush || got[12] != plan9.Rstat {
		t.Fatalf("replies = %v; want Rflush for 13 and Rstat for 12", got)
	}
	r.send(&plan9.Fcall{Type: plan9.Tflush, Tag: 14, Oldtag: 11})
	for _, ok := got[14]; !ok; _, ok = got[14] {
		rx := r.recv()
		got[rx.Tag] = rx.Type
	}
}

// Past MaxConns a new connection is closed at once; the others go on, and
// a place freed is taken again.
func TestHardening_MaxConns(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{MaxConns: 2})
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.handshake()
	b.handshake()
	c := dialRaw(t, addr)
	c.expectClosed()
	a.stillServes()
	a.nc.Close()
	waitFor(t, "a new connection to be served", func() bool {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer nc.Close()
		client, err := client.NewConn(nc)
		if err != nil {
			return false
		}
		_, err = client.Attach(nil, "u", "")
		return err == nil
	})
	b.stillServes()
}
