package clusterport

import (
	"net"
	"testing"
	"time"
)

// A pooled connection whose peer closed it is not handed out again; one
// whose peer holds it open is. The control is the connection before its
// peer closes it: the same probe finds it open.
func TestPoolDropsClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var peer net.Conn
	select {
	case peer = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted within 10s")
	}
	p := &Pool{Max: 4}
	p.Put("leader", c)
	if got := p.Get("leader"); got != c {
		t.Fatalf("control: a pooled connection whose peer holds it open was not handed out (got %v)", got)
	}
	p.Put("leader", c)

	peer.Close()
	waitFor(t, "the probe to see the peer's close", 10*time.Second, func() bool { return !alive(c) })
	if got := p.Get("leader"); got != nil {
		t.Fatal("a pooled connection whose peer closed it was handed out")
	}
}
