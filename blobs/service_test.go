package blobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolnode/toolnode/blobstore"
)

// refs is a State naming a fixed set of executables.
type refs struct {
	mu sync.Mutex
	ws []Want
}

func (r *refs) Referenced(d string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.ws {
		if w.Digest == d {
			return true
		}
	}
	return false
}

func (r *refs) Wanted() []Want {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Want(nil), r.ws...)
}

func (r *refs) set(ws ...Want) {
	r.mu.Lock()
	r.ws = ws
	r.mu.Unlock()
}

type noMetrics struct{}

func (noMetrics) BlobFetched(string, int64, error) {}
func (noMetrics) BlobServed(string)                {}

// logBuf collects log lines.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	fmt.Fprintf(&l.b, format+"\n", args...)
	l.mu.Unlock()
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// peer is a Service with a store, serving on a loopback listener.
type peer struct {
	name  string
	svc   *Service
	state *refs
	log   *logBuf
	addr  string
}

// testNet is the peers, each serving what its store holds.
type testNet struct {
	t     *testing.T
	peers []*peer
}

func (tn *testNet) add(name string) *peer {
	t := tn.t
	store, err := blobstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &peer{name: name, state: &refs{}, log: &logBuf{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.svc = New(ctx, Config{
		Store: store, State: p.state, MaxExec: 1 << 20, Grace: time.Minute,
		Sources: func() []Source {
			var s []Source
			for _, o := range tn.peers {
				if o != p {
					s = append(s, Source{Name: o.name, Addr: o.addr})
				}
			}
			return s
		},
		Dial: func(addr string, timeout time.Duration) (net.Conn, error) {
			return net.DialTimeout("tcp", addr, timeout)
		},
		Metrics: noMetrics{}, Logf: p.log.logf, Warnf: p.log.logf,
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.svc.Serve(c)
		}
	}()
	t.Cleanup(func() { cancel(); ln.Close(); p.svc.Stop() })
	tn.peers = append(tn.peers, p)
	return p
}

func waitFetch(t *testing.T, f *Fetch) {
	t.Helper()
	if f == nil {
		return
	}
	select {
	case <-f.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the fetch did not end")
	}
}

func TestFetchFromPublisherFirst(t *testing.T) {
	tn := &testNet{t: t}
	a, b, c := tn.add("a"), tn.add("b"), tn.add("c")
	exe := bytes.Repeat([]byte("#!/bin/sh\necho hi\n"), 100)
	d, size, err := a.svc.Store().Put(bytes.NewReader(exe), "", int64(len(exe)), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// b has it too; the publisher is a, so a is asked first.
	b.svc.Store().Put(bytes.NewReader(exe), d, size, 1<<20)
	w := Want{Tool: "hi", Digest: d, Size: size, Owner: "a"}
	c.state.set(w)
	waitFetch(t, c.svc.Ensure(w))
	got, err := os.ReadFile(c.svc.Store().Path(d))
	if err != nil || !bytes.Equal(got, exe) {
		t.Fatalf("c stored %d bytes, %v", len(got), err)
	}
	if !strings.Contains(c.log.String(), "from a") {
		t.Fatalf("not fetched from its publisher first:\n%s", c.log)
	}
	if c.svc.Ensure(w) != nil {
		t.Fatal("a fetch started for an executable already here")
	}
}

// A source whose bytes do not match the digest is refused, and another
// gives them.
func TestCorruptSourceRefused(t *testing.T) {
	tn := &testNet{t: t}
	a, b, c := tn.add("a"), tn.add("b"), tn.add("c")
	exe := []byte("the real executable\n")
	d, size, _ := a.svc.Store().Put(bytes.NewReader(exe), "", int64(len(exe)), 1<<20)
	b.svc.Store().Put(bytes.NewReader(exe), d, size, 1<<20)
	p := a.svc.Store().Path(d)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("the fake executable!"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := Want{Tool: "x", Digest: d, Size: size, Owner: "a"}
	c.state.set(w)
	waitFetch(t, c.svc.Ensure(w))
	got, _ := os.ReadFile(c.svc.Store().Path(d))
	if !bytes.Equal(got, exe) {
		t.Fatalf("c stored %q", got)
	}
	if !strings.Contains(c.log.String(), "refused executable "+Short(d)+" from a") {
		t.Fatalf("the corrupt copy was not refused in the log:\n%s", c.log)
	}
}

// With nobody holding it, a call's wait says why at once, and a fetch
// of a digest no tool names any more ends.
func TestWaitSaysWhy(t *testing.T) {
	tn := &testNet{t: t}
	tn.add("a")
	c := tn.add("c")
	d := blobstore.Digest([]byte("nowhere"))
	w := Want{Tool: "gone", Digest: d, Size: 7, Owner: "a"}
	c.state.set(w)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := c.svc.Wait(ctx, w)
	if err == nil || !strings.Contains(err.Error(), `tool "gone"`) || !strings.Contains(err.Error(), "not stored there") && !strings.Contains(err.Error(), "still fetching") {
		t.Fatalf("wait: %v", err)
	}
	c.state.set()
	f := c.svc.Ensure(w)
	waitFetch(t, f)
	if f.Err() == nil || !strings.Contains(f.Err().Error(), "no tool refers") {
		t.Fatalf("a fetch of an unreferenced digest ended with %v", f.Err())
	}

}

// An answer over the asker's size limit is refused before any byte is
// stored; one that does not match the size the log gives, too.
func TestSizeLimits(t *testing.T) {
	tn := &testNet{t: t}
	a, c := tn.add("a"), tn.add("c")
	exe := bytes.Repeat([]byte("x"), 2<<20)
	d, size, err := a.svc.Store().Put(bytes.NewReader(exe), "", int64(len(exe)), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.svc.fetchFrom(a.addr, d, size); err == nil || !strings.Contains(err.Error(), "-max-exec-size") {
		t.Fatalf("over the limit: %v", err)
	}
	if err := c.svc.fetchFrom(a.addr, d, 10); !errors.Is(err, blobstore.ErrDigest) {
		t.Fatalf("size unlike the log's: %v", err)
	}
	if c.svc.Store().Has(d) {
		t.Fatal("stored anyway")
	}
}

// A request that is not a digest is closed without an answer; one for a
// blob not here is answered Missing; with every slot taken, Busy.
func TestServeAnswers(t *testing.T) {
	tn := &testNet{t: t}
	a := tn.add("a")
	ask := func(req string) (byte, error) {
		c, err := net.Dial("tcp", a.addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte(req))
		var b [1]byte
		_, err = c.Read(b[:])
		return b[0], err
	}
	if b, err := ask(strings.Repeat("z", 64) + "\n"); err == nil {
		t.Fatalf("a request that is not a digest got %q", b)
	}
	d := blobstore.Digest([]byte("absent"))
	if b, err := ask(d + "\n"); err != nil || b != Missing {
		t.Fatalf("absent blob: %q, %v", b, err)
	}
	for range ServeMax {
		a.svc.serve <- struct{}{}
	}
	if b, err := ask(d + "\n"); err != nil || b != Busy {
		t.Fatalf("with every slot taken: %q, %v", b, err)
	}
}

// Sweep removes a blob no tool has named for the grace period, and
// keeps one named again meanwhile.
func TestSweepGrace(t *testing.T) {
	tn := &testNet{t: t}
	a := tn.add("a")
	d1, _, _ := a.svc.Store().Put(strings.NewReader("one"), "", 3, 10)
	d2, _, _ := a.svc.Store().Put(strings.NewReader("two"), "", 3, 10)
	now := time.Now().Add(2 * time.Minute) // both stored over a grace ago
	a.svc.Sweep(now)
	if !a.svc.Store().Has(d1) || !a.svc.Store().Has(d2) {
		t.Fatal("removed at first sight")
	}
	a.state.set(Want{Digest: d2})
	a.svc.Sweep(now.Add(2 * time.Minute))
	if a.svc.Store().Has(d1) {
		t.Fatal("an unreferenced blob outlived its grace")
	}
	if !a.svc.Store().Has(d2) {
		t.Fatal("a referenced blob was removed")
	}
}
