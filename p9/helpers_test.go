package p9

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// startServer serves b on a loopback port and closes it at the end of the
// test, checking Serve returned nil.
func startServer(t testing.TB, b Backend, opt Options) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opt.Logf == nil {
		opt.Logf = t.Logf
	}
	s := NewServer(b, opt)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after Close", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return s, l.Addr().String()
}

// mount attaches the independent 9fans client to addr.
func mount(t testing.TB, addr string) *client.Fsys {
	t.Helper()
	c, err := client.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fs, err := c.Attach(nil, "tester", "")
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// readAll reads a file from offset 0 to EOF with reads of n bytes.
func readAll(fid *client.Fid, n int) ([]byte, error) {
	var out []byte
	buf := make([]byte, n)
	for off := int64(0); ; {
		m, err := fid.ReadAt(buf[:n], off)
		// ReadAt loops until the buffer is full; a short file ends in EOF.
		out = append(out, buf[:m]...)
		off += int64(m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func readFile(t testing.TB, fs *client.Fsys, path string) string {
	t.Helper()
	fid, err := fs.Open(path, plan9.OREAD)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer fid.Close()
	b, err := readAll(fid, 8192)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// rdwr writes text to path at offset 0 and reads the answer on the same fid.
func rdwr(fs *client.Fsys, path, text string) (string, error) {
	fid, err := fs.Open(path, plan9.ORDWR)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	if _, err := fid.WriteAt([]byte(text), 0); err != nil {
		return "", err
	}
	b, err := readAll(fid, 8192)
	return string(b), err
}

func wantErr(t testing.TB, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not contain %q", err, substr)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawConn speaks 9P by hand, to send what a client library never would.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) sendBytes(b []byte) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) send(f *plan9.Fcall) {
	r.t.Helper()
	b, err := f.Bytes()
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendBytes(b)
}

func (r *rawConn) recv() *plan9.Fcall {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := plan9.ReadFcall(r.br)
	if err != nil {
		r.t.Fatalf("read reply: %v", err)
	}
	return f
}

func (r *rawConn) rpc(f *plan9.Fcall) *plan9.Fcall {
	r.t.Helper()
	r.send(f)
	return r.recv()
}

// expectClosed reads until the server closes the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, r.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("server did not close the connection")
	}
}

// handshake sends Tversion and Tattach of fid 0.
func (r *rawConn) handshake() {
	r.t.Helper()
	rx := r.rpc(&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 8192, Version: "9P2000"})
	if rx.Type != plan9.Rversion || rx.Version != "9P2000" {
		r.t.Fatalf("version: %v", rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "raw"})
	if rx.Type != plan9.Rattach {
		r.t.Fatalf("attach: %v", rx)
	}
}

// walkOpen walks fid 0 to newfid along path and opens it.
func (r *rawConn) walkOpen(newfid uint32, path string, mode uint8) {
	r.t.Helper()
	rx := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: newfid, Wname: strings.Split(path, "/")})
	if rx.Type != plan9.Rwalk {
		r.t.Fatalf("walk %s: %v", path, rx)
	}
	rx = r.rpc(&plan9.Fcall{Type: plan9.Topen, Tag: 1, Fid: newfid, Mode: mode})
	if rx.Type != plan9.Ropen {
		r.t.Fatalf("open %s: %v", path, rx)
	}
}
