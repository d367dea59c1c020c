package clusterport

import (
	"crypto/tls"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// BenchmarkClusterPortDial: what a new cluster-port connection costs, the
// part a routed call pays per call: dial, handshake, protocol byte 'P' and
// its answer, close; plain TCP against the gossip key's TLS 1.3 (resumed
// sessions after the first, as a node dials) and with resumption off (a
// full handshake, certificates signed and verified, every time).
func BenchmarkClusterPortDial(b *testing.B) {
	plain := (*TLS)(nil)
	server := mustKeyTLS(b, testKey(3), "server")
	client := mustKeyTLS(b, testKey(3), "client")
	full := mustKeyTLS(b, testKey(3), "client-full")
	full.client.ClientSessionCache = nil
	for _, tc := range []struct {
		name           string
		server, client *TLS
	}{
		{"creds=off", plain, plain},
		{"creds=key", server, client},
		{"creds=key,no-resumption", server, full},
	} {
		addr := pingServer(b, tc.server)
		b.Run(tc.name, func(b *testing.B) {
			resumed := 0
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				c, err := tc.client.Dial(addr, 5*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write([]byte{ProtoPing}); err != nil {
					b.Fatal(err)
				}
				var p [1]byte
				if _, err := io.ReadFull(c, p[:]); err != nil {
					b.Fatal(err)
				}
				if tc, ok := c.(*tls.Conn); ok && tc.ConnectionState().DidResume {
					resumed++
				}
				c.Close()
			}
			// CPU time of both ends together: what the two nodes pay, less
			// sensitive than wall time to other load on the machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(resumed)/float64(b.N), "resumed")
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pingServer serves cluster-port pings through a real Server, behind t.
func pingServer(b *testing.B, t *TLS) string {
	ln := listen(b)
	s := NewServer(Config{TLS: t})
	s.Listen(ln)
	b.Cleanup(s.Close)
	return ln.Addr().String()
}

// BenchmarkClusterPortRoundTrip: what the credentials cost a request on a
// kept connection (a routed call after the first to a node, a forwarded
// write): 256 bytes there and back over loopback, plain TCP against the
// gossip key's TLS 1.3.
func BenchmarkClusterPortRoundTrip(b *testing.B) {
	server := mustKeyTLS(b, testKey(4), "server")
	client := mustKeyTLS(b, testKey(4), "client")
	for _, tc := range []struct {
		name           string
		server, client *TLS
	}{
		{"creds=off", nil, nil},
		{"creds=key", server, client},
	} {
		raw := listen(b)
		ln := tc.server.wrapListener(raw)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 256)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		c, err := tc.client.Dial(raw.Addr().String(), 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		msg, buf := make([]byte, 256), make([]byte, 256)
		b.Run(tc.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
		c.Close()
		ln.Close()
	}
}
