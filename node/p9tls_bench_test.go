package node

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/p9proxy"
)

// p9Paths are one node's tree reached four ways: plain 9P, 9P over TLS,
// and through a p9proxy to each. All four are served by the same node.
type p9Paths struct {
	plain, tls, proxyPlain, proxyTLS string
	pool                             *tls.Config // a client's TLS towards tls
}

func benchPaths(b *testing.B) p9Paths {
	b.Helper()
	tools := benchTools(b)
	n := startNode(b, filepath.Join(b.TempDir(), "data"), tools, "")
	waitFor(b, "nop to be published", 10*time.Second, func() bool {
		_, ok := n.fsm.Tool("nop")
		return ok
	})
	ca := newP9CA(b)
	cert, key := ca.issue(b, b.TempDir(), nil)
	scfg, err := loadP9TLS(cert, key)
	if err != nil {
		b.Fatal(err)
	}
	tln := newTLSListener(listen(b), scfg, p9HandshakeTimeout, p9MaxHandshakes, b.Logf)
	go n.p9.Serve(tln)
	ccfg := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1"}

	proxyTo := func(dial func(ctx context.Context) (net.Conn, error)) string {
		p, err := p9proxy.New(p9proxy.Options{Dial: dial, Token: "bench-token", Logf: b.Logf})
		if err != nil {
			b.Fatal(err)
		}
		ln := listen(b)
		go p.Serve(ln)
		b.Cleanup(func() { p.Close() })
		return ln.Addr().String()
	}
	plain, tlsAddr := n.P9Addr(), tln.Addr().String()
	return p9Paths{
		plain: plain, tls: tlsAddr, pool: ccfg,
		proxyPlain: proxyTo(func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", plain)
		}),
		proxyTLS: proxyTo(func(ctx context.Context) (net.Conn, error) {
			d := tls.Dialer{Config: ccfg}
			return d.DialContext(ctx, "tcp", tlsAddr)
		}),
	}
}

// connect dials and attaches, over TLS when cfg is not nil.
func benchConnect(b *testing.B, addr string, cfg *tls.Config) *client.Fsys {
	var nc net.Conn
	var err error
	if cfg != nil {
		nc, err = tls.Dial("tcp", addr, cfg)
	} else {
		nc, err = net.Dial("tcp", addr)
	}
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.NewConn(nc)
	if err != nil {
		b.Fatal(err)
	}
	fsys, err := c.Attach(nil, "bench", "")
	if err != nil {
		b.Fatal(err)
	}
	return fsys
}

func (p p9Paths) each(b *testing.B, f func(b *testing.B, addr string, cfg *tls.Config)) {
	b.Run("plain", func(b *testing.B) { f(b, p.plain, nil) })
	b.Run("tls", func(b *testing.B) { f(b, p.tls, p.pool) })
	b.Run("proxy-plain", func(b *testing.B) { f(b, p.proxyPlain, nil) })
	b.Run("proxy-tls", func(b *testing.B) { f(b, p.proxyTLS, nil) })
}

// BenchmarkP9Read is one walk+open+read+clunk of t/nop.meta on an open
// connection: plain, over TLS, through the proxy to plain and to TLS.
func BenchmarkP9Read(b *testing.B) {
	paths := benchPaths(b)
	paths.each(b, func(b *testing.B, addr string, cfg *tls.Config) {
		fsys := benchConnect(b, addr, cfg)
		defer fsys.Close()
		buf := make([]byte, 4096)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			fid, err := fsys.Open("t/nop.meta", plan9.OREAD)
			if err != nil {
				b.Fatal(err)
			}
			if n, err := fid.ReadAt(buf, 0); (err != nil && err != io.EOF) || n == 0 {
				b.Fatalf("read %d bytes: %v", n, err)
			}
			fid.Close()
		}
	})
}

// BenchmarkP9Connect is dial, version, attach and close: the cost of a
// connection (for TLS, its handshake) each way.
func BenchmarkP9Connect(b *testing.B) {
	paths := benchPaths(b)
	paths.each(b, func(b *testing.B, addr string, cfg *tls.Config) {
		for i := 0; i < b.N; i++ {
			benchConnect(b, addr, cfg).Close()
		}
	})
}
