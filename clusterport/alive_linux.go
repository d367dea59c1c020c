package clusterport

import (
	"crypto/tls"
	"net"
	"syscall"
)

// alive probes an idle pooled connection without waiting: its peer never
// sends unasked, so a socket with nothing to read is open, and one that
// reads as closed, or holds bytes nobody asked for (a TLS close_notify),
// is not. It peeks at the socket under TLS: a read with a deadline
// already past, as this once did, returns the timeout without reading,
// and so never saw a closed connection. A connection that is not a
// socket (a test's pipe) counts as open: a write on it after all fails
// as unsent or ambiguous, and is retried.
func alive(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN
		return true // never wait
	})
	return err == nil && open
}
