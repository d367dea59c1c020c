//go:build linux

// 9P over TLS end to end: a node process serving 9P over TLS, reached by
// `toolnode 9p` and `toolnode call` with a CA, and by an unmodified plain
// 9P client (9fans.net/go/plan9/client) through a `toolnode proxy`
// process.

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/internal/testport"
)

// runTN runs the binary with environ and returns its standard output and
// error output, and whether it exited 0.
func runTN(t *testing.T, environ []string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = environ
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("toolnode %q did not finish within 60s", args)
	}
	return o.String(), e.String(), err == nil
}

// mustTN runs the binary and fails the test unless it exits 0.
func mustTN(t *testing.T, environ []string, args ...string) string {
	t.Helper()
	out, errOut, ok := runTN(t, environ, args...)
	if !ok {
		t.Fatalf("toolnode %q failed:\n%s", args, errOut)
	}
	return out
}

// failTN runs the binary and fails the test unless it exits non-zero with
// every one of subs in its error output.
func failTN(t *testing.T, environ []string, subs []string, args ...string) {
	t.Helper()
	out, errOut, ok := runTN(t, environ, args...)
	if ok {
		t.Fatalf("toolnode %q succeeded (%q), want a failure", args, out)
	}
	for _, s := range subs {
		if !strings.Contains(errOut, s) {
			t.Errorf("toolnode %q: error %q does not say %q", args, strings.TrimSpace(errOut), s)
		}
	}
}

// spawnTN starts the binary as a long-running process (a proxy), killed
// at the end of the test.
func spawnTN(t *testing.T, environ []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, fmt.Sprintf("toolnode %q", args), exec.Command(binPath, args...), environ)
}

func TestP9TLSEndToEnd(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "toolnode 9p e2e CA")
	other := newTestCA(t, "another CA")
	e := newEnv(t)
	cert, key := ca.issue(t, e.root, "n1") // for n1, localhost and 127.0.0.1
	node := e.spawn(t, "e2e", e.childEnv(), "-9p-tls-cert", cert, "-9p-tls-key", key)
	node.waitLog(t, 60*time.Second, "serving 9P on")
	env := e.clientEnv(t) // the default data dir holds the admin token

	// toolnode 9p and call over TLS, with -tls-ca and with $TOOLNODE_CA.
	ls := mustTN(t, env, "9p", "-tls-ca", ca.file, "-a", e.p9, "ls", "t/")
	if !strings.Contains(ls, "e2e_write.meta\n") || !strings.Contains(ls, "idx\n") {
		t.Fatalf("toolnode 9p ls t/ over TLS:\n%s", ls)
	}
	withCA := append(e.clientEnv(t), "TOOLNODE_CA="+ca.file)
	if info := mustTN(t, withCA, "9p", "-a", e.p9, "read", "node"); !strings.Contains(info, "9p-tls on\n") {
		t.Errorf("node file over TLS:\n%s", info)
	}
	if got := mustTN(t, withCA, "call", "-a", e.p9, "echo", `{"text":"over tls"}`); got != "over tls\n" {
		t.Errorf("toolnode call over TLS = %q", got)
	}
	idx := mustTN(t, withCA, "9p", "-a", e.p9, "read", "t/idx")
	// The certificate names n1: the host name can be given instead of
	// the address's.
	mustTN(t, withCA, "9p", "-a", e.p9, "-tls-server-name", "n1", "read", "node")

	// What fails, and says why; each is the control's twin above.
	failTN(t, env, []string{"give -tls-ca FILE or set $TOOLNODE_CA"}, "9p", "-a", e.p9, "ls", "t/")
	failTN(t, env, []string{"not signed by the CA"}, "9p", "-tls-ca", other.file, "-a", e.p9, "ls", "t/")
	failTN(t, env, []string{"-tls-server-name"}, "9p", "-tls-ca", ca.file, "-tls-server-name", "elsewhere.example", "-a", e.p9, "ls", "t/")
	failTN(t, env, []string{"not signed by the CA"}, "call", "-tls-ca", other.file, "-a", e.p9, "echo", `{"text":"x"}`)
	node.waitLog(t, 5*time.Second, "TLS handshake with", "first record does not look like a TLS handshake")
	// An unmodified plain 9P client cannot use the TLS port at all.
	if fsys, err := client.Mount("tcp", e.p9); err == nil {
		fsys.Close()
		t.Fatal("a plain 9P client attached to the TLS port")
	}

	// The proxy: plain 9P on loopback, TLS to the node, a token in the
	// attaches.
	// toolnode token reaches the node over TLS too ($TOOLNODE_CA), with
	// the node's admin token from its data directory.
	newToken := func(role, name string) string {
		t.Helper()
		secret := strings.TrimSpace(mustTN(t, withCA, "token", "-a", e.p9, "-data", e.data, "new", "-role", role, name))
		if secret == "" || strings.Contains(secret, "\n") {
			t.Fatalf("toolnode token new printed %q", secret)
		}
		return secret
	}
	caller := newToken("call", "proxy-caller")
	pp := testport.One(t)
	prox := spawnTN(t, append(e.childEnv(), "TOOLNODE_TOKEN="+caller),
		"proxy", "-listen", pp, "-to", e.p9, "-tls-ca", ca.file)
	prox.waitLog(t, 30*time.Second, "proxy: serving 9P on", "the proxy's token in every attach")
	fsys, err := client.Mount("tcp", pp)
	if err != nil {
		t.Fatalf("a plain 9P client through the proxy: %v\n%s", err, prox.log.String())
	}
	defer fsys.Close()
	if got := lsDir(t, fsys, "t"); !strings.Contains(strings.Join(got, " "), "e2e_write.meta") {
		t.Errorf("t/ through the proxy: %q", got)
	}
	if got := cat(t, fsys, "t/idx"); got != idx {
		t.Errorf("t/idx through the proxy:\n%s\nwant (over TLS directly):\n%s", got, idx)
	}
	if got := mustAsk(t, fsys, "session/new", "name=viaproxy"); got != "viaproxy\n" {
		t.Errorf("session/new through the proxy = %q", got)
	}
	if got := mustTN(t, env, "9p", "-a", pp, "read", "session/idx"); !strings.Contains(got, "viaproxy") {
		t.Errorf("session/idx through the proxy with toolnode 9p: %q", got)
	}

	// A malformed frame into the proxy closes that connection only.
	bad, err := net.Dial("tcp", pp)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write([]byte{3, 0, 0, 0, 100, 0, 0})
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := bad.Read(make([]byte, 16)); err == nil {
		t.Fatalf("the proxy answered a malformed frame with %d bytes", n)
	}
	prox.waitLog(t, 5*time.Second, "proxy: closing connection of", "shorter than a 9P header")
	if got := cat(t, fsys, "t/idx"); got != idx {
		t.Errorf("t/idx through the proxy after another client's malformed frame:\n%s", got)
	}
	// The proxy's token is the role of every client of it, whatever
	// aname the client sends: a read token's proxy serves reads and
	// refuses a session, even to a client that attaches with the admin
	// token itself. The controls: the call token's proxy above made a
	// session, and the admin token directly over TLS makes one.
	adminSecret := readAdminToken(t, e)
	reader := newToken("read", "proxy-reader")
	rp := testport.One(t)
	rprox := spawnTN(t, append(e.childEnv(), "TOOLNODE_TOKEN="+reader),
		"proxy", "-listen", rp, "-to", e.p9, "-tls-ca", ca.file)
	rprox.waitLog(t, 30*time.Second, "proxy: serving 9P on")
	for _, aname := range []string{"", adminSecret} {
		c, err := client.Dial("tcp", rp)
		if err != nil {
			t.Fatal(err)
		}
		rfs, err := c.Attach(nil, "someone", aname)
		if err != nil {
			t.Fatalf("attach through the read proxy: %v", err)
		}
		if got := cat(t, rfs, "t/idx"); got != idx {
			t.Errorf("t/idx through the read proxy:\n%s", got)
		}
		askFails(t, rfs, "session/new", "name=escalated", "permission denied: needs role call")
		c.Close()
	}
	direct := &creds{ca: ca.file, token: adminSecret}
	afs, err := direct.mount(e.p9)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustAsk(t, afs, "session/new", "name=direct"); got != "direct\n" {
		t.Errorf("session/new as admin over TLS = %q", got)
	}
	afs.Close()
	// A proxy whose token the node does not know gets its clients
	// nothing.
	bp := testport.One(t)
	bprox := spawnTN(t, append(e.childEnv(), "TOOLNODE_TOKEN=not-a-token"),
		"proxy", "-listen", bp, "-to", e.p9, "-tls-ca", ca.file)
	bprox.waitLog(t, 30*time.Second, "proxy: serving 9P on")
	if bfs, err := client.Mount("tcp", bp); err == nil || !strings.Contains(err.Error(), "permission denied") {
		if bfs != nil {
			bfs.Close()
		}
		t.Fatalf("a client through a proxy with an unknown token: %v, want permission denied", err)
	}

	// A TLS client pointed at the plain proxy is told what is wrong.
	failTN(t, env, []string{"is it serving 9P over TLS"}, "9p", "-tls-ca", ca.file, "-a", pp, "ls", "/")

	// The proxy refuses to serve beyond loopback, or to send the token
	// in clear to another host (nothing is bound: the check comes first).
	failTN(t, env, []string{"-listen 0.0.0.0:1 is not a loopback address", "-insecure"},
		"proxy", "-listen", "0.0.0.0:1", "-to", e.p9, "-tls-ca", ca.file)
	failTN(t, env, []string{"-to 192.0.2.1:9564 is not a loopback address", "ssh -L"},
		"proxy", "-listen", "127.0.0.1:0", "-to", "192.0.2.1:9564")

	prox.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-prox.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not exit within 10s of SIGTERM")
	}
	if code := prox.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the proxy exited with %d", code)
	}
	node.stop(t)
}

// The checks behind the refusals above, with their controls: each refused
// address is accepted with -insecure, or with TLS.
func TestCheckProxyAddrs(t *testing.T) {
	for _, tc := range []struct {
		listen, to    string
		tls, insecure bool
		wantErr       string
	}{
		{"127.0.0.1:9564", "127.0.0.1:9565", false, false, ""},
		{"[::1]:9564", "localhost:9565", false, false, ""},
		{"127.0.0.1:9564", "192.0.2.1:9564", true, false, ""},
		{"127.0.0.1:9564", "192.0.2.1:9564", false, false, "would cross the network in clear"},
		{"127.0.0.1:9564", "192.0.2.1:9564", false, true, ""},
		{"0.0.0.0:9564", "192.0.2.1:9564", true, false, "not a loopback address"},
		{":9564", "192.0.2.1:9564", true, false, "not a loopback address"},
		{"192.0.2.7:9564", "192.0.2.1:9564", true, false, "not a loopback address"},
		{"0.0.0.0:9564", "192.0.2.1:9564", true, true, ""},
		{"127.0.0.1:9564", "", true, false, "-to HOST:PORT"},
		{"127.0.0.1:9564", "nohost", true, false, "-to \"nohost\""},
		{"127.0.0.1", "127.0.0.1:1", true, false, "-listen \"127.0.0.1\""},
	} {
		err := checkProxyAddrs(tc.listen, tc.to, tc.tls, tc.insecure)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("checkProxyAddrs(%q, %q, tls=%v, insecure=%v) = %v, want %q", tc.listen, tc.to, tc.tls, tc.insecure, err, tc.wantErr)
		}
	}
}

// readAdminToken is the node's own admin token, from its data directory.
func readAdminToken(t *testing.T, e *env) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.data, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
