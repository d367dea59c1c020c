package node

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/internal/testca"
	"github.com/toolnode/toolnode/p9"
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
	ca := testca.New(b)
	cert, key := ca.Issue(b, b.TempDir(), nil)
	scfg, err := p9.LoadTLS(cert, key)
	if err != nil {
		b.Fatal(err)
	}
	tln := p9.NewTLSListener(listen(b), scfg, p9.TLSHandshakeTimeout, p9.TLSMaxHandshakes, b.Logf)
	go n.p9.Serve(tln)
	ccfg := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1"}

	// The proxy presents the node's admin token, as a user's proxy would
	// present theirs; the direct paths attach as the trusted anonymous
	// user of this harness.
	var token string
	waitFor(b, "the admin token", 10*time.Second, func() bool {
		secret, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "admin.token"))
		token = strings.TrimSpace(string(secret))
		return err == nil && token != ""
	})
	proxyTo := func(dial func(ctx context.Context) (net.Conn, error)) string {
		p, err := p9proxy.New(p9proxy.Options{Dial: dial, Token: token, Logf: b.Logf})
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

// way is one of the four ways to the node.
type way struct {
	name string
	addr string
	cfg  *tls.Config // the client's TLS, nil for plain 9P
}

func (p p9Paths) ways() []way {
	return []way{
		{"plain", p.plain, nil},
		{"tls", p.tls, p.pool},
		{"proxy-plain", p.proxyPlain, nil},
		{"proxy-tls", p.proxyTLS, nil},
	}
}

// interleave runs op once each way per iteration, each way first in
// turn, so a busy machine slows them alike. It reports each way's own
// ns/op and the ratios tls/plain, proxy-plain/plain and proxy-tls/tls.
func interleave(b *testing.B, ways []way, op func(k int)) {
	took := make([]time.Duration, len(ways))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ways {
			k := (i + j) % len(ways)
			start := time.Now()
			op(k)
			took[k] += time.Since(start)
		}
	}
	b.StopTimer()
	per := func(k int) float64 { return float64(took[k].Nanoseconds()) / float64(b.N) }
	for k, w := range ways {
		b.ReportMetric(per(k), w.name+"-ns/op")
	}
	b.ReportMetric(per(1)/per(0), "tls/plain")
	b.ReportMetric(per(2)/per(0), "proxy-plain/plain")
	b.ReportMetric(per(3)/per(1), "proxy-tls/tls")
}

// BenchmarkP9Read is one walk+open+read+clunk of t/nop.meta on an open
// connection each way: plain, over TLS, through the proxy to plain and
// to TLS.
func BenchmarkP9Read(b *testing.B) {
	ways := benchPaths(b).ways()
	fsys := make([]*client.Fsys, len(ways))
	for i, w := range ways {
		fsys[i] = benchConnect(b, w.addr, w.cfg)
		defer fsys[i].Close()
	}
	buf := make([]byte, 4096)
	interleave(b, ways, func(k int) {
		fid, err := fsys[k].Open("t/nop.meta", plan9.OREAD)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := fid.ReadAt(buf, 0); (err != nil && err != io.EOF) || n == 0 {
			b.Fatalf("%s: read %d bytes: %v", ways[k].name, n, err)
		}
		fid.Close()
	})
}

// BenchmarkP9Connect is dial, version, attach and close each way: the
// cost of a connection (for TLS, its handshake; through the proxy, its
// dial of the node too).
func BenchmarkP9Connect(b *testing.B) {
	ways := benchPaths(b).ways()
	interleave(b, ways, func(k int) {
		benchConnect(b, ways[k].addr, ways[k].cfg).Close()
	})
}
