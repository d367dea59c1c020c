package mcpbridge

import (
	"errors"
	"io"
	"net"
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
