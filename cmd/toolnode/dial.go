package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/node"
)

// dialTimeout bounds connecting to a node: TCP, the TLS handshake and the
// 9P version exchange and attach each.
const dialTimeout = 10 * time.Second

// creds are how a client subcommand (9p, call, token) reaches a node:
// TLS against a CA when one is given, and the token it presents as the
// attach name.
type creds struct {
	ca         string // -tls-ca, else $TOOLNODE_CA: "" is plain 9P
	serverName string // -tls-server-name: the name the certificate must carry
	token      string // -token, else $TOOLNODE_TOKEN, else DATA/admin.token
	data       string // -data: the node's data directory; "" is the default one
}

// credFlags adds -tls-ca, -tls-server-name, -token and -data to fs. The
// environment and the token file are read when connecting, so -h never
// prints a token.
func credFlags(fs *flag.FlagSet) *creds {
	c := &creds{}
	fs.StringVar(&c.ca, "tls-ca", "", "connect over TLS, trusting the CA in this PEM file (default $TOOLNODE_CA)")
	fs.StringVar(&c.serverName, "tls-server-name", "", "name the node's certificate must carry (default: the host of the address)")
	fs.StringVar(&c.token, "token", "", "token presented in the attach (default $TOOLNODE_TOKEN, which keeps it out of ps, else DATA/"+node.AdminTokenFile+")")
	fs.StringVar(&c.data, "data", "", "the node's data dir, whose "+node.AdminTokenFile+" is presented without -token or $TOOLNODE_TOKEN (default "+dataDefault()+")")
	return c
}

func (c *creds) caFile() string {
	if c.ca != "" {
		return c.ca
	}
	return os.Getenv("TOOLNODE_CA")
}

// aname is the token presented: -token, $TOOLNODE_TOKEN, else the
// node's admin token in its data directory, else "" (a token-less
// attach, refused unless the node gives one a role).
func (c *creds) aname() (string, error) {
	if c.token != "" {
		return c.token, nil
	}
	data := c.data
	if data == "" {
		data = dataDefault()
	}
	return adminSecret(data)
}

// tlsConfig is the client TLS for addr: nil without a CA.
func (c *creds) tlsConfig(addr string) (*tls.Config, error) {
	ca := c.caFile()
	if ca == "" {
		if c.serverName != "" {
			return nil, errors.New("-tls-server-name needs -tls-ca (or $TOOLNODE_CA)")
		}
		return nil, nil
	}
	return clientTLS(ca, c.serverName, addr)
}

// clientTLS trusts the CA certificates of caFile, and only them, for a
// server at addr whose certificate must carry serverName (default the
// host of addr: a name or an IP address).
func clientTLS(caFile, serverName, addr string) (*tls.Config, error) {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", caFile)
	}
	if serverName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("address %q: %v", addr, err)
		}
		serverName = host
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13}, nil
}

// dialNode connects to a node's 9P port, over TLS when tcfg is not nil
// (handshake done), within ctx.
func dialNode(ctx context.Context, addr string, tcfg *tls.Config) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot reach a node at %s: %w", addr, err)
	}
	if tcfg == nil {
		return nc, nil
	}
	tc := tls.Client(nc, tcfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, tlsError(addr, err)
	}
	return tc, nil
}

// tlsError says what a failed handshake most likely means.
func tlsError(addr string, err error) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var inv x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("TLS with %s: the node's certificate is not signed by the CA given (-tls-ca or $TOOLNODE_CA): %w", addr, err)
	case errors.As(err, &host):
		return fmt.Errorf("TLS with %s: %w (name the one it carries with -tls-server-name)", addr, err)
	case errors.As(err, &inv):
		return fmt.Errorf("TLS with %s: %w", addr, err)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("TLS with %s: the node closed the connection during the handshake; is it serving 9P over TLS "+
			"(-9p-tls-cert)? For a plain 9P node give no -tls-ca and unset $TOOLNODE_CA", addr)
	}
	return fmt.Errorf("TLS with %s: %w", addr, err)
}

// mount connects to the node at addr and attaches with the token.
func (c *creds) mount(addr string) (*client.Fsys, error) {
	return c.mountWith(addr, nil)
}

// mountWith is mount with the connection's byte stream passed through
// wrap (when not nil) before the 9P client's version exchange.
func (c *creds) mountWith(addr string, wrap func(net.Conn) io.ReadWriteCloser) (*client.Fsys, error) {
	tcfg, err := c.tlsConfig(addr)
	if err != nil {
		return nil, err
	}
	aname, err := c.aname()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	nc, err := dialNode(ctx, addr, tcfg)
	if err != nil {
		return nil, err
	}
	// The version exchange and the attach have no context of their own:
	// a deadline on the connection bounds them.
	nc.SetDeadline(time.Now().Add(dialTimeout))
	var rwc io.ReadWriteCloser = nc
	if wrap != nil {
		rwc = wrap(nc)
	}
	conn, err := client.NewConn(rwc)
	if err != nil {
		nc.Close()
		if tcfg == nil {
			return nil, fmt.Errorf("9P with %s failed: %v; if the node serves 9P over TLS, give -tls-ca FILE or set $TOOLNODE_CA", addr, err)
		}
		return nil, fmt.Errorf("9P with %s failed: %v", addr, err)
	}
	fsys, err := conn.Attach(nil, user(), aname)
	if err != nil {
		conn.Close()
		if aname == "" {
			return nil, fmt.Errorf("attach to %s: %v (no token: give -token, set $TOOLNODE_TOKEN, or -data DIR of the node whose %s holds one)", addr, err, node.AdminTokenFile)
		}
		return nil, fmt.Errorf("attach to %s: %v", addr, err)
	}
	nc.SetDeadline(time.Time{})
	return fsys, nil
}

// user is the uname of an attach; nodes ignore it.
func user() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "none"
}

// isLoopback reports whether addr (HOST:PORT) names only loopback
// addresses: an IP in 127.0.0.0/8 or ::1, or a name every address of
// which is one.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "" || strings.ContainsAny(host, "%") {
		return false
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// mount attaches to the node at addr presenting aname (a token; "" falls
// back to $TOOLNODE_TOKEN, then DATA/admin.token), over TLS when
// $TOOLNODE_CA names a CA. It is for subcommands without the credential
// flags (token).
func mount(addr, aname string) (*client.Fsys, error) {
	return (&creds{token: aname}).mount(addr)
}
