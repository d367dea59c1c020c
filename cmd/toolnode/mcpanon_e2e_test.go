//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/internal/testport"
)

// bearerRT adds a bearer token, when there is one, to requests sent
// through rt.
type bearerRT struct {
	token string
	rt    http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.rt.RoundTrip(r)
}

// mcpConnect opens an MCP session at url with the SDK's client, trusting
// roots for HTTPS, presenting token unless it is empty.
func mcpConnect(t *testing.T, url, token string, roots *x509.CertPool) (*mcp.ClientSession, error) {
	t.Helper()
	rt := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-anon", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{token, rt}}, MaxRetries: -1,
	}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// An MCP listener off loopback (-mcp 0.0.0.0:PORT, HTTPS with the 9P
// certificate) gives a request without a token the anonymous role of its
// own address, none, whatever -9p-anon gives the loopback 9P listener of
// the same node: refused, and nothing made; a token still gets in. The
// controls: on a loopback MCP listener the same request gets the
// -9p-anon role, all of it (-9p-anon call: a tool is loaded and called)
// and nothing more (-9p-anon read: no MCP session, which needs call).
func TestE2E_MCP_OffLoopbackAnonymousRole(t *testing.T) {
	t.Parallel()
	pki := t.TempDir()
	cli := &env{config: t.TempDir()}
	runCLI(t, cli, "", "tls", "ca", "-dir", pki)
	runCLI(t, cli, "", "tls", "cert", "-dir", pki, "-node", "mcp")
	caPEM, err := os.ReadFile(filepath.Join(pki, "toolnode-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	certFlags := []string{"-9p-tls-cert", filepath.Join(pki, "mcp.pem"), "-9p-tls-key", filepath.Join(pki, "mcp-key.pem")}

	// node starts a node with an MCP listener on host, the example-less
	// tool echo_t, and -9p-anon anon; it returns the node's env and the
	// MCP URL to reach it at (loopback, through whatever host binds).
	node := func(host, anon string) (*env, *proc, string) {
		e := newEnv(t)
		if err := os.WriteFile(filepath.Join(e.tools, "echo_t.meta"), []byte(`{"description":"echo","cmd":"cat"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(testport.One(t))
		flags := append([]string{"-mcp", net.JoinHostPort(host, port), "-9p-anon", anon}, certFlags...)
		p := e.spawn(t, "e2e", e.childEnv(), flags...)
		p.waitLog(t, 60*time.Second, "serving MCP")
		scheme := "http"
		if host != "127.0.0.1" {
			scheme = "https"
		}
		return e, p, scheme + "://127.0.0.1:" + port + "/"
	}

	// Off loopback, -9p-anon call.
	open, openP, url := node("0.0.0.0", "call")
	openP.waitLog(t, 5*time.Second, "serving MCP (Streamable HTTP) on https://")
	if _, err := mcpConnect(t, url, "", roots); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("off loopback: an MCP session without a token: %v, want Unauthorized", err)
	}
	openP.waitLog(t, 5*time.Second, "mcp:", "refused: permission denied: an MCP request without a token is refused here")
	admin := waitToken(t, open.p9)
	s, err := mcpConnect(t, url, admin, roots)
	if err != nil {
		t.Fatalf("off loopback: an MCP session with the admin token: %v", err)
	}
	if res := callTool(t, s, "tool_load", map[string]any{"name": "echo_t"}); res.IsError {
		t.Errorf("off loopback, with a token: tool_load: %s", resultText(res))
	}
	// The same node's loopback 9P listener does give -9p-anon's role to
	// an attach without a token: the MCP listener decided from its own
	// address, not from 9P's.
	nc, err := tls.Dial("tcp", open.p9, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c9, err := client.NewConn(nc)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := c9.Attach(nil, "e2e", "")
	if err != nil {
		t.Fatalf("a token-less 9P attach on loopback with -9p-anon call: %v", err)
	}
	if got, err := ask(fsys, "session/new", "name=anon9p"); err != nil || got != "anon9p\n" {
		t.Errorf("a token-less 9P client on loopback: session/new = %q, %v", got, err)
	}

	// Control: loopback MCP, -9p-anon call: all of the role.
	_, _, lurl := node("127.0.0.1", "call")
	ls, err := mcpConnect(t, lurl, "", roots)
	if err != nil {
		t.Fatalf("loopback, -9p-anon call: an MCP session without a token: %v", err)
	}
	if res := callTool(t, ls, "tool_load", map[string]any{"name": "echo_t"}); res.IsError {
		t.Fatalf("loopback, -9p-anon call: tool_load: %s", resultText(res))
	}
	if res := callTool(t, ls, "echo_t", map[string]any{"y": 1}); res.IsError || strings.TrimSpace(resultText(res)) != `{"y":1}` {
		t.Errorf("loopback, -9p-anon call: echo_t: error %v, %q", res.IsError, resultText(res))
	}

	// Control: loopback MCP, -9p-anon read: that role and nothing more.
	// An MCP session makes a toolnode session, which needs role call.
	_, rp, rurl := node("127.0.0.1", "read")
	if _, err := mcpConnect(t, rurl, "", roots); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("loopback, -9p-anon read: an MCP session without a token: %v, want Unauthorized", err)
	}
	rp.waitLog(t, 5*time.Second, "mcp:", "permission denied: needs role call")
}
