package p9proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
	"github.com/knusbaum/go9p/proto"
)

// fakeNode is an upstream 9P server that answers Tversion, Tattach and
// Tclunk and records what it was sent; any other request gets an Rerror
// "fake: TYPE".
type fakeNode struct {
	ln    net.Listener
	msize uint32

	mu       sync.Mutex
	attaches []string // "uname aname" of every Tattach and Tauth
	versions []uint32 // msize of every Tversion
	conns    int
}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{ln: ln, msize: 8192}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns++
			f.mu.Unlock()
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeNode) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		frame, err := readFrame(br, nil, func() uint32 { return 1 << 20 })
		if err != nil {
			return
		}
		typ, tag := frame[4], frame[5:7]
		body := frame[headerSize:]
		var out []byte
		switch typ {
		case proto.Tversion:
			m := binary.LittleEndian.Uint32(body)
			f.mu.Lock()
			f.versions = append(f.versions, m)
			f.mu.Unlock()
			m = min(m, f.msize)
			out = binary.LittleEndian.AppendUint32(nil, m)
			out = appendStr(out, []byte("9P2000"))
		case proto.Tattach, proto.Tauth:
			rest := body[8:]
			if typ == proto.Tauth {
				rest = body[4:]
			}
			uname, rest, _ := str(rest)
			aname, _, _ := str(rest)
			f.mu.Lock()
			f.attaches = append(f.attaches, string(uname)+" "+string(aname))
			f.mu.Unlock()
			out = make([]byte, 13) // a qid
		case proto.Tclunk:
		default:
			typ = proto.Rerror - 1
			out = appendStr(nil, []byte(fmt.Sprintf("fake: %d", frame[4])))
		}
		msg := binary.LittleEndian.AppendUint32(nil, uint32(headerSize+len(out)))
		msg = append(msg, typ+1)
		msg = append(msg, tag...)
		msg = append(msg, out...)
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}

func (f *fakeNode) seen() ([]string, []uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.attaches...), append([]uint32(nil), f.versions...)
}

// logBuf collects the proxy's log lines.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBuf) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startProxy serves a proxy to upstream on a loopback port.
func startProxy(t *testing.T, upstream, token string) (string, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	p, err := New(Options{
		Dial: func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", upstream)
		},
		Token: token,
		Logf:  logs.logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	t.Cleanup(func() {
		p.Close()
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs)
		}
	})
	return ln.Addr().String(), logs
}

func attachVia(t *testing.T, addr, uname, aname string) *client.Fsys {
	t.Helper()
	c, err := client.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("9P version through the proxy: %v", err)
	}
	fsys, err := c.Attach(nil, uname, aname)
	if err != nil {
		t.Fatalf("attach through the proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return fsys
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The proxy's token replaces the aname of every attach; without a token
// (the control) the client's own aname reaches the node.
func TestTokenReplacesAname(t *testing.T) {
	node := newFakeNode(t)
	addr, _ := startProxy(t, node.ln.Addr().String(), "secret-token")
	attachVia(t, addr, "alice", "")
	attachVia(t, addr, "bob", "bob-forged-token")

	plainNode := newFakeNode(t)
	plain, _ := startProxy(t, plainNode.ln.Addr().String(), "")
	attachVia(t, plain, "carol", "carol-token")

	got, versions := node.seen()
	if want := []string{"alice secret-token", "bob secret-token"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("through a proxy with a token the node saw attaches %q, want %q", got, want)
	}
	// 9fans asks for msize 131072: the node is offered 65535.
	for _, m := range versions {
		if m != proto.MaxMsgLen {
			t.Errorf("the node was asked for msize %d, want %d", m, proto.MaxMsgLen)
		}
	}
	if got, _ := plainNode.seen(); len(got) != 1 || got[0] != "carol carol-token" {
		t.Errorf("through a proxy without a token the node saw %q, want the client's aname", got)
	}
}

// rawClient is a connection to the proxy speaking bytes.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawClient{t: t, c: c, br: bufio.NewReader(c)}
}

func msg(typ uint8, tag uint16, body []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(headerSize+len(body)))
	b = append(b, typ)
	b = binary.LittleEndian.AppendUint16(b, tag)
	return append(b, body...)
}

func tversion(msize uint32) []byte {
	return msg(proto.Tversion, 0xFFFF, appendStr(binary.LittleEndian.AppendUint32(nil, msize), []byte("9P2000")))
}

func tattach(fid uint32, uname, aname string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, fid)
	b = binary.LittleEndian.AppendUint32(b, 0xFFFFFFFF)
	b = appendStr(b, []byte(uname))
	return msg(proto.Tattach, 1, appendStr(b, []byte(aname)))
}

// rpc sends b and returns the answer's type and body.
func (r *rawClient) rpc(b []byte) (uint8, []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
	f, err := readFrame(r.br, nil, func() uint32 { return 1 << 20 })
	if err != nil {
		r.t.Fatalf("no answer: %v", err)
	}
	return f[4], f[headerSize:]
}

// closed reports whether the proxy closed the connection.
func (r *rawClient) closed() bool {
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.br.ReadByte()
	// A close with our bytes unread reaches us as a reset.
	return err == io.EOF || errors.Is(err, syscall.ECONNRESET)
}

// A malformed frame closes that client's connection, says why in the
// log, and forwards nothing of it; another client carries on.
func TestMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	node := newFakeNode(t)
	addr, logs := startProxy(t, node.ln.Addr().String(), "tok")
	good := attachVia(t, addr, "good", "")

	attachBody := func(trailer string) []byte {
		b := tattach(7, "evil", "evil-aname")
		b = append(b, trailer...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	for _, tc := range []struct {
		name  string
		bytes []byte
		log   string
	}{
		{"size below the header", []byte{3, 0, 0, 0, 1, 2, 3}, "shorter than a 9P header"},
		{"size above msize", binary.LittleEndian.AppendUint32(nil, 1<<30), "exceeds msize"},
		{"attach with bytes after its fields", attachBody("xx"), "bytes after its fields"},
		{"attach cut short", msg(proto.Tattach, 1, []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 50, 0, 'e'}), "Tattach shorter than its fields"},
		{"auth cut short", msg(proto.Tauth, 1, []byte{1, 0}), "Tauth shorter than its fields"},
		{"version cut short", msg(proto.Tversion, 1, []byte{1, 0}), "Tversion shorter than its fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, addr)
			if typ, _ := r.rpc(tversion(8192)); typ != proto.Rversion {
				t.Fatalf("Tversion answered with type %d", typ)
			}
			if _, err := r.c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			if !r.closed() {
				t.Fatal("the proxy did not close the connection")
			}
			waitFor(t, "a log line saying "+tc.log, func() bool { return logs.has(tc.log) })
			// The other client is still served.
			if _, err := good.Open("x", 0); err == nil || !strings.Contains(err.Error(), "fake") {
				t.Fatalf("the other client after a malformed frame: %v", err)
			}
		})
	}
	got, _ := node.seen()
	for _, a := range got {
		if strings.Contains(a, "evil") {
			t.Errorf("the node saw an attach from a malformed frame: %q", a)
		}
	}
	// The control: the same attach, well formed, is forwarded (with the
	// token).
	r := dialRaw(t, addr)
	r.rpc(tversion(8192))
	if typ, _ := r.rpc(tattach(7, "evil", "evil-aname")); typ != proto.Rattach {
		t.Fatalf("a well-formed attach was answered with type %d", typ)
	}
	if got, _ := node.seen(); got[len(got)-1] != "evil tok" {
		t.Fatalf("the node saw %q", got[len(got)-1])
	}
}

// A frame within the proxy's limit but over the msize the node answered
// closes the connection too.
func TestFrameOverNegotiatedMsize(t *testing.T) {
	node := newFakeNode(t)
	node.msize = 512
	addr, logs := startProxy(t, node.ln.Addr().String(), "")
	r := dialRaw(t, addr)
	typ, body := r.rpc(tversion(65535))
	if typ != proto.Rversion || binary.LittleEndian.Uint32(body) != 512 {
		t.Fatalf("Rversion %d %v", typ, body)
	}
	r.c.Write(msg(proto.Tstat, 1, make([]byte, 600)))
	if !r.closed() {
		t.Fatal("a frame over the negotiated msize was forwarded")
	}
	waitFor(t, "the log line", func() bool { return logs.has("frame of 607 bytes exceeds msize 512") })
}

// A token that makes an attach larger than the msize gets an Rerror from
// the proxy, and the connection goes on.
func TestTokenAttachOverMsize(t *testing.T) {
	node := newFakeNode(t)
	node.msize = 256
	token := strings.Repeat("t", MaxTokenLen)
	addr, _ := startProxy(t, node.ln.Addr().String(), token)
	r := dialRaw(t, addr)
	r.rpc(tversion(256))
	typ, body := r.rpc(tattach(1, strings.Repeat("u", 120), ""))
	if typ != proto.Rerror || !strings.Contains(string(body), "more than the msize 256") {
		t.Fatalf("answer %d %q, want an Rerror about the msize", typ, body)
	}
	if typ, _ := r.rpc(tattach(1, "u", "")); typ != proto.Rattach {
		t.Fatalf("a short attach after it: type %d", typ)
	}
	if got, _ := node.seen(); len(got) != 1 || got[0] != "u "+token {
		t.Fatalf("the node saw %q", got)
	}
}

// A node the proxy cannot reach: the client's connection is closed and
// the log says why.
func TestUpstreamUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	addr, logs := startProxy(t, dead, "")
	r := dialRaw(t, addr)
	typ, body := r.rpc(tversion(8192))
	if why, _, _ := str(body); typ != proto.Rerror || !strings.Contains(string(why), "proxy: cannot reach the node") {
		t.Fatalf("Tversion answered %d %q, want an Rerror saying the node cannot be reached", typ, body)
	}
	if !r.closed() {
		t.Fatal("the client's connection stayed open")
	}
	waitFor(t, "the log line", func() bool { return logs.has("cannot reach the node") })
}

func TestNewRefuses(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a dialer succeeded")
	}
	dial := func(context.Context) (net.Conn, error) { return nil, io.EOF }
	if _, err := New(Options{Dial: dial, Token: strings.Repeat("x", MaxTokenLen+1)}); err == nil {
		t.Error("New with an overlong token succeeded")
	}
	if _, err := New(Options{Dial: dial, Token: strings.Repeat("x", MaxTokenLen)}); err != nil {
		t.Error(err)
	}
}
