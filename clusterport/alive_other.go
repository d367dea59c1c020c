//go:build !linux

package clusterport

import (
	"errors"
	"net"
	"time"
)

// alive probes an idle pooled connection: its peer never sends unasked,
// so a read that times out is on an open connection. (Elsewhere than
// Linux a read with a deadline one millisecond ahead.)
func alive(c net.Conn) bool {
	var b [1]byte
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(b[:])
	c.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
