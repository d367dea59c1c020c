package p9

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"
)

// 9P over TLS (DESIGN §7): with -9p-tls-cert and -9p-tls-key the 9P
// listener speaks TLS 1.3. The server presents its certificate and asks
// for none: who a client is, is the business of the token in its attach.

// TLSHandshakeTimeout is how long a client has, from its connect, to
// complete the TLS handshake.
const TLSHandshakeTimeout = 10 * time.Second

// TLSMaxHandshakes is how many TLS handshakes run at once; a connection
// beyond it is closed at once, with a log line.
const TLSMaxHandshakes = 128

// LoadTLS reads the 9P server's certificate and key. Both names empty:
// (nil, nil), plain 9P. One without the other, a file that cannot be read,
// a key that is not the certificate's, or a certificate that no client
// would accept now (expired, not yet valid, or not for serverAuth) is an
// error that names the flag.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" {
		return nil, errors.New("9P over TLS: -9p-tls-key needs -9p-tls-cert, the certificate it belongs to")
	}
	if keyFile == "" {
		return nil, errors.New("9P over TLS: -9p-tls-cert needs -9p-tls-key, the certificate's private key")
	}
	certPEM, err := readP9TLSFile("-9p-tls-cert", certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readP9TLSFile("-9p-tls-key", keyFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("9P over TLS: certificate %s (-9p-tls-cert) and key %s (-9p-tls-key) cannot be used together: %v",
			certFile, keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("9P over TLS: certificate %s (-9p-tls-cert): %v", certFile, err)
		}
	}
	if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("9P over TLS: certificate %s (-9p-tls-cert) is expired or not yet valid (valid from %s to %s)",
			certFile, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if !serverAuthAllowed(leaf) {
		return nil, fmt.Errorf("9P over TLS: certificate %s (-9p-tls-cert) is not for servers: its extended key usage lacks serverAuth, so every client would refuse it",
			certFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
	}, nil
}

// serverAuthAllowed reports whether a certificate may serve TLS: it has
// no extended key usage, or one that includes serverAuth (or any).
func serverAuthAllowed(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
		return true
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

func readP9TLSFile(flag, name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("9P over TLS: cannot read %s (%s): %v", name, flag, err)
	}
	return b, nil
}

// NewTLSListener serves TLS with cfg on a TCP listener: each handshake
// under timeout, at most max at once, failures logged through logf.
func NewTLSListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, max int, logf func(string, ...any)) net.Listener {
	return newTLSListener(inner, cfg, timeout, max, logf)
}

// tlsListener serves TLS on a TCP listener. Unlike tls.NewListener, Accept
// returns only connections whose handshake is complete: each handshake
// runs in a goroutine of its own under a deadline, at most max at once,
// so a client that connects and stalls holds neither Accept nor one of
// the 9P server's connection slots, and only for the deadline. A failed
// handshake is logged and closed.
type tlsListener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	logf    func(format string, args ...any)

	ready chan acceptResult // handshaken connections and accept errors
	slots chan struct{}     // one per handshake running
	done  chan struct{}     // closed by Close
	once  sync.Once
	wg    sync.WaitGroup // the accept loop and the handshakes
}

type acceptResult struct {
	c   net.Conn
	err error
}

func newTLSListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, max int, logf func(string, ...any)) *tlsListener {
	l := &tlsListener{
		inner: inner, cfg: cfg, timeout: timeout, logf: logf,
		ready: make(chan acceptResult),
		slots: make(chan struct{}, max),
		done:  make(chan struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *tlsListener) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.inner.Accept()
		if err != nil {
			// Passed on, so the server's Accept loop decides: it backs
			// off on a transient error and stops on a closed listener.
			if !l.deliver(acceptResult{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case l.slots <- struct{}{}:
		default:
			l.logf("9p: refusing %s: %d TLS handshakes are under way, the most this node runs at once", c.RemoteAddr(), cap(l.slots))
			c.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

func (l *tlsListener) handshake(raw net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.slots }()
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := tls.Server(raw, l.cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		select {
		case <-l.done:
		default:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("not completed within %v", l.timeout)
			}
			l.logf("9p: TLS handshake with %s failed, closing: %v", raw.RemoteAddr(), err)
		}
		raw.Close()
		return
	}
	if !l.deliver(acceptResult{c: c}) {
		c.Close()
	}
}

// deliver hands r to Accept; false once the listener is closed.
func (l *tlsListener) deliver(r acceptResult) bool {
	select {
	case l.ready <- r:
		return true
	case <-l.done:
		return false
	}
}

// Accept returns the next connection whose TLS handshake is complete.
func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case r := <-l.ready:
		return r.c, r.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, ends the handshakes under way and waits for them.
func (l *tlsListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

func (l *tlsListener) Addr() net.Addr { return l.inner.Addr() }
