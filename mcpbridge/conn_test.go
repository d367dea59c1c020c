package mcpbridge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// versionServer answers one Tversion on c with msize, then runs then.
func versionServer(t *testing.T, c net.Conn, msize uint32, then func()) {
	t.Helper()
	go func() {
		tx, err := plan9.ReadFcall(c)
		if err != nil {
			return
		}
		plan9.WriteFcall(c, &plan9.Fcall{Type: plan9.Rversion, Tag: tx.Tag, Msize: msize, Version: "9P2000"})
		then()
	}()
}

func waitDone(t *testing.T, wc *Conn) {
	t.Helper()
	select {
	case <-wc.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed within 10s of the stream's end")
	}
}

// The msize is the server's, read from its Rversion; the end of the
// stream from the other side is Done with io.EOF.
func TestConnMsizeAndEnd(t *testing.T) {
	here, there := net.Pipe()
	versionServer(t, there, 4096, func() { there.Close() })
	wc := WatchConn(here)
	if wc.Msize() != 0 {
		t.Fatalf("msize %d before the version exchange", wc.Msize())
	}
	if _, err := client.NewConn(wc); err != nil {
		t.Fatal(err)
	}
	if got := wc.Msize(); got != 4096 {
		t.Errorf("msize %d, want the server's 4096", got)
	}
	// The bridge always has a read outstanding (the events watcher).
	go io.Copy(io.Discard, wc)
	waitDone(t, wc)
	if !errors.Is(wc.Err(), io.EOF) {
		t.Errorf("Err after the server closed: %v, want io.EOF", wc.Err())
	}
}

// A stream closed on this side is Done with no error: nothing to report.
func TestConnClosedHere(t *testing.T) {
	here, there := net.Pipe()
	defer there.Close()
	versionServer(t, there, 8192, func() {})
	wc := WatchConn(here)
	if _, err := client.NewConn(wc); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, wc)
	wc.Close()
	waitDone(t, wc)
	if wc.Err() != nil {
		t.Errorf("Err after Close: %v, want nil", wc.Err())
	}
}

// attachAll runs n attaches on conn at once and returns their errors as
// they come.
func attachAll(conn *client.Conn, n int) <-chan error {
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, err := conn.Attach(nil, "u", fmt.Sprint(i))
			errs <- err
		}()
	}
	return errs
}

// endAfter answers a Tversion on c, reads n requests, answers the first
// with an Rerror "refused", and closes c.
func endAfter(t *testing.T, c net.Conn, n int) {
	versionServer(t, c, 8192, func() {
		var first uint16
		for i := 0; i < n; i++ {
			tx, err := plan9.ReadFcall(c)
			if err != nil {
				return
			}
			if i == 0 {
				first = tx.Tag
			}
		}
		plan9.WriteFcall(c, &plan9.Fcall{Type: plan9.Rerror, Tag: first, Ename: "refused"})
		c.Close()
	})
}

// Requests in flight when the stream ends each get an error, the one
// answered before the end its own answer, and a request after the end
// fails at once. Control: over the bare stream, the 9P client gives the
// failed read to one request and the others wait on (they are left
// waiting for the rest of the test binary's life: nothing can wake them).
func TestConnAnswersRequestsLeftWaiting(t *testing.T) {
	const n = 3
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			here, there := net.Pipe()
			endAfter(t, there, n)
			var rwc io.ReadWriteCloser = here
			if watched {
				rwc = WatchConn(here)
			}
			conn, err := client.NewConn(rwc)
			if err != nil {
				t.Fatal(err)
			}
			errs := attachAll(conn, n)
			var got []string
			deadline := time.After(10 * time.Second)
			if !watched {
				deadline = time.After(time.Second)
			}
		collect:
			for len(got) < n {
				select {
				case err := <-errs:
					if err == nil {
						t.Fatal("an attach succeeded on a server that answers none")
					}
					got = append(got, err.Error())
				case <-deadline:
					break collect
				}
			}
			slices.Sort(got)
			t.Logf("%d of %d attaches returned: %q", len(got), n, got)
			if !watched {
				if len(got) == n {
					t.Fatal("control: every attach returned over the bare stream; the test no longer shows the client's hang")
				}
				return
			}
			if len(got) != n {
				t.Fatalf("%d of %d attaches returned within 10 s of the stream's end", len(got), n)
			}
			if got[0] != "refused" { // sorted first
				t.Errorf("no attach got its answer %q: %q", "refused", got)
			}
			for _, e := range got[1:] {
				if !strings.Contains(e, "the 9P connection ended: EOF") {
					t.Errorf("an attach left waiting got %q, want the stream's end", e)
				}
			}
			select {
			case err := <-attachAll(conn, 1):
				if err == nil || !strings.Contains(err.Error(), "the 9P connection ended") {
					t.Errorf("an attach after the end: %v, want the stream's end", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("an attach after the end did not return within 10 s")
			}
		})
	}
}

// The framer names each message's tag once the message is complete,
// however the stream is cut into reads: a message of a header only
// (Rclunk) included.
func TestFramerTags(t *testing.T) {
	var stream []byte
	for _, f := range []*plan9.Fcall{
		{Type: plan9.Rclunk, Tag: 3},
		{Type: plan9.Rerror, Tag: 4, Ename: "no"},
		{Type: plan9.Rread, Tag: 5, Data: []byte("some bytes")},
		{Type: plan9.Rclunk, Tag: 6},
	} {
		b, err := f.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
	}
	for k := 1; k <= len(stream); k++ {
		var f framer
		var tags []uint16
		for b := stream; len(b) > 0; {
			c := b[:min(k, len(b))]
			b = b[len(c):]
			f.scan(c, func(tag uint16) { tags = append(tags, tag) })
		}
		if !slices.Equal(tags, []uint16{3, 4, 5, 6}) || f.inside() {
			t.Fatalf("reads of %d bytes: tags %v, inside %v; want [3 4 5 6], false", k, tags, f.inside())
		}
	}
}

// Closed on this side with requests in flight, the stream answers each of
// them: closing a bridge's connection ends its watchers' reads.
func TestConnClosedHereAnswersRequests(t *testing.T) {
	here, there := net.Pipe()
	defer there.Close()
	read := make(chan struct{})
	versionServer(t, there, 8192, func() {
		for i := 0; i < 2; i++ {
			if _, err := plan9.ReadFcall(there); err != nil {
				return
			}
		}
		close(read)
	})
	wc := WatchConn(here)
	conn, err := client.NewConn(wc)
	if err != nil {
		t.Fatal(err)
	}
	errs := attachAll(conn, 2)
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read two attaches within 10 s")
	}
	wc.Close()
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			if err == nil || err.Error() != "connection closed" {
				t.Errorf("an attach in flight at the close: %v, want %q", err, "connection closed")
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 2 attaches returned within 10 s of the close", i)
		}
	}
}
