//go:build linux

package main

// Trust boundaries through a real node process (DESIGN §7 "Local
// trust"): a tool a user could publish, a python3 script speaking raw 9P
// over TCP, called with a call-role token, tries to become admin through
// its own node's loopback 9P port. Each attack is paired with its
// control, the same attack with the protection off by a flag that exists.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testport"
	"github.com/toolnode/toolnode/raftfsm"
)

// probe9pScript is a tool: it connects to the 9P address it is given
// ({"addr": HOST:PORT}) and, attached with no token, asks token/new for
// an admin token. It prints what it got, or fails saying why.
const probe9pScript = `#!/usr/bin/env python3
import json, socket, struct, sys

args = json.load(sys.stdin)
host, port = args["addr"].rsplit(":", 1)
try:
    s = socket.create_connection((host, int(port)), timeout=10)
except OSError as e:
    sys.exit("connect %s: %s" % (args["addr"], e))

def recvn(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            sys.exit("connection closed")
        b += c
    return b

def s9(x):
    b = x.encode()
    return struct.pack("<H", len(b)) + b

def rpc(t, tag, body):
    s.sendall(struct.pack("<IBH", 7 + len(body), t, tag) + body)
    size, rt, _ = struct.unpack("<IBH", recvn(7))
    rb = recvn(size - 7)
    if rt == 107:  # Rerror
        n = struct.unpack("<H", rb[:2])[0]
        sys.exit("refused: " + rb[2:2 + n].decode())
    return rb

NOFID = 0xFFFFFFFF
rpc(100, 0xFFFF, struct.pack("<I", 8192) + s9("9P2000"))
rpc(104, 1, struct.pack("<II", 0, NOFID) + s9("tool") + s9(""))
rpc(110, 2, struct.pack("<IIH", 0, 1, 2) + s9("token") + s9("new"))
rpc(112, 3, struct.pack("<IB", 1, 2))  # ORDWR
req = b"name=stolen role=admin"
rpc(118, 4, struct.pack("<IQI", 1, 0, len(req)) + req)
rb = rpc(116, 5, struct.pack("<IQI", 1, 0, 4096))
n = struct.unpack("<I", rb[:4])[0]
secret = rb[4:4 + n].decode().strip()
print("minted an admin token:", secret[:3] + "...")
`

const probe9pMeta = `{"description": "Test tool: become admin over the node's 9P.", "network": true,
 "args": {"type": "object", "required": ["addr"], "properties": {"addr": {"type": "string"}}}}
`

// probeTCPScript is a tool: it opens a TCP connection to the address it
// is given, and says whether it could.
const probeTCPScript = `#!/usr/bin/env python3
import json, socket, sys
addr = json.load(sys.stdin)["addr"]
host, port = addr.rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=10).close()
except OSError as e:
    sys.exit("connect %s: %s" % (addr, e))
print("connected to", addr)
`

const probeTCPMeta = `{"description": "Test tool: connect to an address.",
 "args": {"type": "object", "required": ["addr"], "properties": {"addr": {"type": "string"}}}}
`

// writeTrustProbe puts an executable tool and its metadata into dir.
func writeTrustProbe(t *testing.T, dir, name, script, meta string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
}

// callAs runs `toolnode call` with token, and returns what it printed
// (both streams) and whether it succeeded.
func callAs(t *testing.T, e *env, token, tool, args string) (string, bool) {
	t.Helper()
	r := runCLIResult(t, e, "", "call", "-a", e.p9, "-token", token, tool, args)
	return r.stdout + r.stderr, r.code == 0
}

// A sandboxed tool called with a call-role token opens its node's
// loopback 9P with no token: it gets nothing (the attach is refused).
// The control, -9p-anon admin: the same tool mints an admin token.
func TestE2E_Trust_ToolGetsNoAnonymousAdmin(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := "default"
		if control {
			name = "control_9p_anon_admin"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writeTrustProbe(t, e.tools, "probe_9p", probe9pScript, probe9pMeta)
			var flags []string
			if control {
				flags = []string{"-9p-anon", "admin"}
			}
			p := e.startWith(t, e.childEnv(), flags...)
			if control {
				p.waitLog(t, 10e9, "WARNING: -9p-anon admin", "each tool included")
			}
			bob := strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", "bob"))
			out, ok := callAs(t, e, bob, "probe_9p", `{"addr": "`+e.p9+`"}`)
			t.Logf("the tool: %s", strings.TrimSpace(out))
			idx := runCLI(t, e, "", "token", "-a", e.p9, "ls")
			if control {
				if !ok || !strings.Contains(out, "minted an admin token") || !strings.Contains(idx, "stolen admin") {
					t.Fatalf("control: the tool did not mint an admin token under -9p-anon admin: %s\ntokens:\n%s", out, idx)
				}
				return
			}
			if ok || !strings.Contains(out, "refused: permission denied") {
				t.Fatalf("the tool's token-less attach was not refused: %s", out)
			}
			if strings.Contains(idx, "stolen") {
				t.Fatalf("the tool minted a token:\n%s", idx)
			}
			p.waitLog(t, 10e9, "127.0.0.1", "attach refused", "without a token")
		})
	}
}

// A sandboxed tool without "network": true, called with a call-role
// token, cannot open a TCP connection to its node's loopback ports (9P,
// cluster): the kernel refuses it. The control, -yolo: the same tool
// connects to both.
func TestE2E_Trust_ToolCannotReachItsNode(t *testing.T) {
	for _, yolo := range []bool{false, true} {
		name := "sandboxed"
		if yolo {
			name = "control_yolo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writeTrustProbe(t, e.tools, "probe_tcp", probeTCPScript, probeTCPMeta)
			var flags []string
			if yolo {
				flags = []string{"-yolo"}
			}
			p := e.startWith(t, e.childEnv(), flags...)
			if !yolo {
				p.waitLog(t, 10e9, "tools run with:", `network: no TCP`)
			}
			bob := strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", "bob"))
			for _, port := range []string{e.p9, e.cluster} {
				out, ok := callAs(t, e, bob, "probe_tcp", `{"addr": "`+port+`"}`)
				t.Logf("the tool, to %s: %s", port, strings.TrimSpace(out))
				if yolo {
					if !ok || !strings.Contains(out, "connected to") {
						t.Fatalf("control (-yolo): the tool did not reach %s: %s", port, out)
					}
					continue
				}
				if ok || !strings.Contains(out, "Permission denied") {
					t.Fatalf("the sandboxed tool reached its node's port %s: %s", port, out)
				}
			}
		})
	}
}

// probeReadScript is a tool: it prints the file at "path".
const probeReadScript = `#!/bin/sh
p=$(sed -n 's/.*"path" *: *"\([^"]*\)".*/\1/p')
cat "$p"
`

const probeReadMeta = `{"description": "Test tool: print a file.",
 "args": {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}}
`

// A sandboxed tool, called with a call-role token, reads none of the
// node's credentials: the env file (which holds the gossip key), a 9P
// TLS key kept in a directory of its own, the cluster-port key and the
// CA's key beside the CA certificate in one secrets directory (a
// docker-compose layout), and DATA/admin.token. The control, -yolo,
// reads each of them.
func TestE2E_Trust_ToolReadsNoCredential(t *testing.T) {
	for _, yolo := range []bool{false, true} {
		name := "sandboxed"
		if yolo {
			name = "control_yolo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writeTrustProbe(t, e.tools, "probe_read", probeReadScript, probeReadMeta)
			ca := newTestCA(t, "trust CA")
			secrets, p9dir := filepath.Join(e.root, "secrets"), filepath.Join(e.root, "p9tls")
			for _, d := range []string{secrets, p9dir, filepath.Join(e.config, "ollie")} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			caFile, caKey := filepath.Join(secrets, "ca.pem"), filepath.Join(secrets, "ca-key.pem")
			pem, err := os.ReadFile(ca.file)
			if err != nil {
				t.Fatal(err)
			}
			for f, b := range map[string]string{caFile: string(pem), caKey: "CA PRIVATE KEY\n"} {
				if err := os.WriteFile(f, []byte(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cert, key := ca.issue(t, secrets, "e2e")
			p9cert, p9key := ca.issue(t, p9dir, "p9")
			envFile := filepath.Join(e.config, "ollie", "env")
			gossipKey := strings.TrimSpace(runCLI(t, &env{config: t.TempDir()}, "", "keygen"))
			if err := os.WriteFile(envFile, []byte("TOOLNODE_GOSSIP_KEY="+gossipKey+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			flags := []string{"-tls-cert", cert, "-tls-key", key, "-tls-ca", caFile, "-9p-tls-cert", p9cert, "-9p-tls-key", p9key}
			if yolo {
				flags = append(flags, "-yolo")
			}
			e.startWith(t, e.childEnv(), flags...)
			admin := waitToken(t, e.p9)
			client := append(e.clientEnv(t), "TOOLNODE_CA="+caFile)
			bob := strings.TrimSpace(mustTN(t, client, "token", "-a", e.p9, "new", "-role", "call", "bob"))
			for f, want := range map[string]string{
				envFile: gossipKey, p9key: "PRIVATE KEY", key: "PRIVATE KEY", caKey: "CA PRIVATE KEY",
				filepath.Join(e.data, "admin.token"): admin,
			} {
				out, errOut, ok := runTN(t, client, "call", "-a", e.p9, "-token", bob, "probe_read", `{"path": "`+f+`"}`)
				if yolo {
					if !ok || !strings.Contains(out, want) {
						t.Errorf("control (-yolo): the tool did not read %s: %s%s", f, out, errOut)
					}
					continue
				}
				if ok || strings.Contains(out+errOut, want) {
					t.Errorf("the sandboxed tool read %s: %s%s", f, out, errOut)
				} else if !strings.Contains(errOut, "Permission denied") {
					t.Errorf("reading %s failed, but not as the sandbox refuses: %s", f, errOut)
				}
			}
		})
	}
}

// probeClusterScript is a tool: on the cluster port it is given it pings
// ('P'), then sends the forwarded write it is given ('F' and one frame,
// in hex), and prints what the node answered.
const probeClusterScript = `#!/usr/bin/env python3
import json, socket, struct, sys
args = json.load(sys.stdin)
host, port = args["addr"].rsplit(":", 1)
def conn():
    return socket.create_connection((host, int(port)), timeout=10)
s = conn()
s.sendall(b"P")
b = s.recv(1)
print("ping:", "answered" if b == b"P" else "no answer %r" % b)
s.close()
s = conn()
s.sendall(b"F" + bytes.fromhex(args["frame"]))
try:
    hdr = s.recv(4)
    n = struct.unpack(">I", hdr)[0]
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c:
            break
        body += c
    print("write:", body.decode())
except Exception as e:
    print("write: no answer", e)
`

const probeClusterMeta = `{"description": "Test tool: speak the cluster port.", "network": true,
 "args": {"type": "object", "required": ["addr", "frame"], "properties": {"addr": {"type": "string"}, "frame": {"type": "string"}}}}
`

// A tool on a lone node's loopback cluster port, the default single node
// with no gossip key: the node keys the port with the cluster secret it
// made in DATA/, so the tool's ping goes unanswered and its forged write
// (a create-session command) is not applied. The control, -insecure (no
// secret): the ping is answered and the write applied.
func TestE2E_Trust_ToolOnTheClusterPort(t *testing.T) {
	cmd, err := raftfsm.Encode(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: "forged", Owner: "anon@tool", Time: time.Now().UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	var fb bytes.Buffer
	// As a member forwards a token-less caller's write (the call role).
	if err := frame(&fb, map[string]any{"cmd": cmd, "anon": "anon@tool", "node": "tool"}); err != nil {
		t.Fatal(err)
	}
	for _, insecure := range []bool{false, true} {
		name := "default"
		if insecure {
			name = "control_insecure"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			writeTrustProbe(t, e.tools, "probe_cluster", probeClusterScript, probeClusterMeta)
			var flags []string
			if insecure {
				flags = []string{"-insecure"}
			}
			p := e.startWith(t, e.childEnv(), flags...)
			bob := strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", "bob"))
			out, ok := callAs(t, e, bob, "probe_cluster", `{"addr": "`+e.cluster+`", "frame": "`+hex.EncodeToString(fb.Bytes())+`"}`)
			t.Logf("the tool: %s", strings.TrimSpace(out))
			if !ok {
				t.Fatalf("the probe failed: %s", out)
			}
			sessions := runCLI(t, e, "", "9p", "-a", e.p9, "read", "session/idx")
			if insecure {
				if !strings.Contains(out, "ping: answered") || !strings.Contains(sessions, "forged") {
					t.Fatalf("control (-insecure): ping and write did not get through: %s\nsessions: %q", out, sessions)
				}
				return
			}
			p.waitLog(t, 10e9, "made this node's cluster secret")
			if st, err := os.Stat(filepath.Join(e.data, "cluster.key")); err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("DATA/cluster.key: %v, %v; want mode 0600", st, err)
			}
			if strings.Contains(out, "ping: answered") || strings.Contains(sessions, "forged") {
				t.Fatalf("the tool got through the cluster port: %s\nsessions: %q", out, sessions)
			}
			p.waitLog(t, 10e9, "cluster port: refused")
		})
	}
}

// Sessions belong to their maker: token bob (call role) cannot list,
// make agents in, call in or kill session s1 that token alice made; alice
// can, and so can the admin (the controls: the same requests, by the
// principals the session is open to).
func TestE2E_Trust_SessionsBelongToTheirMaker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.start(t)
	alice := strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", "alice"))
	bob := strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", "bob"))
	as := func(token, stdin string, args ...string) cliResult {
		return runCLIResult(t, e, stdin, append([]string{args[0], "-a", e.p9, "-token", token}, args[1:]...)...)
	}
	if r := as(alice, "name=s1", "9p", "rdwr", "session/new"); r.code != 0 {
		t.Fatalf("alice: session/new: %s", r.stderr)
	}
	if r := as(alice, "name=a", "9p", "rdwr", "session/s1/agent/new"); r.code != 0 {
		t.Fatalf("alice: agent/new: %s", r.stderr)
	}
	if r := as(alice, "echo", "9p", "write", "session/s1/agent/a/tools"); r.code != 0 {
		t.Fatalf("alice: load: %s", r.stderr)
	}
	if r := as(bob, "name=b1", "9p", "rdwr", "session/new"); r.code != 0 {
		t.Fatalf("bob: session/new: %s", r.stderr)
	}
	for _, tc := range []struct {
		what  string
		stdin string
		args  []string
	}{
		{"make an agent", "name=x", []string{"9p", "rdwr", "session/s1/agent/new"}},
		{"load", "file_read", []string{"9p", "write", "session/s1/agent/a/tools"}},
		{"call", "", []string{"call", "-session", "s1", "-agent", "a", "echo", `{"text":"hi"}`}},
		{"read the loaded tools", "", []string{"9p", "read", "session/s1/agent/a/toolsrv.loaded"}},
		{"kill it", "kill", []string{"9p", "write", "session/s1/ctl"}},
	} {
		r := as(bob, tc.stdin, tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, "made by another principal") {
			t.Errorf("bob could %s in alice's session: exit %d, %s%s", tc.what, r.code, r.stdout, r.stderr)
		}
	}
	if r := as(bob, "", "9p", "read", "session/idx"); r.code != 0 || strings.Contains(r.stdout, "s1") || !strings.Contains(r.stdout, "b1") {
		t.Errorf("bob's session/idx = %q (%s), want b1 and not s1", r.stdout, r.stderr)
	}
	// The controls: alice and the admin may.
	if r := as(alice, "", "call", "-session", "s1", "-agent", "a", "echo", `{"text":"hi"}`); r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("alice: call in her own session: %q %s", r.stdout, r.stderr)
	}
	if r := as(alice, "", "9p", "read", "session/idx"); !strings.Contains(r.stdout, "s1") || strings.Contains(r.stdout, "b1") {
		t.Errorf("alice's session/idx = %q, want s1 and not b1", r.stdout)
	}
	admin := waitToken(t, e.p9)
	if r := as(admin, "", "9p", "read", "session/idx"); !strings.Contains(r.stdout, "s1") || !strings.Contains(r.stdout, "b1") {
		t.Errorf("admin's session/idx = %q, want both", r.stdout)
	}
	if r := as(admin, "kill", "9p", "write", "session/s1/ctl"); r.code != 0 {
		t.Errorf("admin: kill alice's session: %s", r.stderr)
	}
}

// mcpInit is an MCP initialize request.
const mcpInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`

// mcpPost sends body to an MCP endpoint with the headers given, and
// returns the status and the session id the node answered with.
func mcpPost(t *testing.T, c *http.Client, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s with %v: %v", body, hdr, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// MCP is checked before anything is made: a foreign Host, a foreign
// Origin, text/plain, a request that is no initialize, and one without a
// token each get a 4xx and leave no session and no new-session line in
// the audit log; the control, a valid initialize, makes one. One token
// has at most 16 live MCP sessions (the 17th: 429), and the admin's own
// 9P client still attaches.
func TestE2E_Trust_MCPChecksFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := testport.One(t)
	audit := filepath.Join(e.root, "audit.log")
	e.startWith(t, e.childEnv(), "-mcp", addr, "-audit", audit)
	admin := waitToken(t, e.p9)
	bob := strings.TrimSpace(runCLI(t, e, "", "token", "-a", e.p9, "new", "-role", "call", "bob"))
	url := "http://" + addr + "/"
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	bearer := "Bearer " + bob
	for _, tc := range []struct {
		what string
		body string
		hdr  map[string]string
		want int
	}{
		{"a foreign Host", mcpInit, map[string]string{"Authorization": bearer, "Host": "evil.example:80"}, http.StatusForbidden},
		{"a foreign Origin", mcpInit, map[string]string{"Authorization": bearer, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"text/plain", mcpInit, map[string]string{"Authorization": bearer, "Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"no initialize", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Authorization": bearer}, http.StatusBadRequest},
		{"no token", mcpInit, nil, http.StatusUnauthorized},
		{"an unknown token", mcpInit, map[string]string{"Authorization": "Bearer tn_nope"}, http.StatusUnauthorized},
	} {
		for range 5 {
			if code, id := mcpPost(t, c, url, tc.body, tc.hdr); code != tc.want || id != "" {
				t.Errorf("%s: HTTP %d, session %q; want %d and none", tc.what, code, id, tc.want)
			}
		}
	}
	if got := runCLI(t, e, "", "9p", "-a", e.p9, "read", "session/idx"); got != "" {
		t.Errorf("sessions after the refused requests: %q", got)
	}
	// Control: a valid initialize makes a session; then the bound.
	var ids []string
	for i := 0; i < 16; i++ {
		code, id := mcpPost(t, c, url, mcpInit, map[string]string{"Authorization": bearer, "Origin": "http://127.0.0.1"})
		if code != http.StatusOK || id == "" {
			t.Fatalf("session %d of bob: HTTP %d, id %q", i+1, code, id)
		}
		ids = append(ids, id)
	}
	if code, id := mcpPost(t, c, url, mcpInit, map[string]string{"Authorization": bearer}); code != http.StatusTooManyRequests || id != "" {
		t.Errorf("bob's 17th MCP session: HTTP %d, id %q; want 429", code, id)
	}
	if code, id := mcpPost(t, c, url, mcpInit, map[string]string{"Authorization": "Bearer " + admin}); code != http.StatusOK || id == "" {
		t.Errorf("another principal's session beside bob's 16: HTTP %d", code)
	}
	if got := runCLI(t, e, "", "9p", "-a", e.p9, "read", "node"); !strings.Contains(got, "name e2e") {
		t.Errorf("the admin's 9P client beside bob's sessions: %q", got)
	}
	// The audit log: refusals, each with its principal, and no session
	// made for a refused request.
	pollUntil(t, 5*time.Second, "the audit lines of the MCP sessions", func() (bool, string) {
		b, _ := os.ReadFile(audit)
		return strings.Count(string(b), `"action":"new-session"`) == 17, string(b)
	})
	b, _ := os.ReadFile(audit)
	if n := strings.Count(string(b), `"action":"kill-session"`); n != 0 {
		t.Errorf("%d sessions were made and killed again:\n%s", n, b)
	}
	if !strings.Contains(string(b), `"who":"bob","action":"mcp-session"`) {
		t.Errorf("bob's refusals are not audited under his name:\n%s", b)
	}
}

// 400 idle TCP connections that never start TLS do not use up the
// cluster port's 256 connection slots: each authenticated connection
// after them (mutual TLS with a certificate of the cluster's CA) still
// gets its ping answered. (The build before this change, run by hand
// the same way, refused 20 of 20.)
func TestE2E_Trust_IdleConnectionsTakeNoSlots(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "slots CA")
	n := newCnode(t, "slots").withTLS(t, ca)
	n.start(t)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 400 {
		c, err := net.DialTimeout("tcp", n.e.cluster, 3*time.Second)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(idle)+1, err)
		}
		idle = append(idle, c)
	}
	cert, key := ca.issue(t, t.TempDir(), "peer")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	conf := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: "slots", MinVersion: tls.VersionTLS12}
	mode := dialMode{"mtls", func(addr string) (net.Conn, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second}, Config: conf}
		return d.Dial("tcp", addr)
	}}
	failed := 0
	for i := range 20 {
		if err := attackPing(mode, n.e.cluster); err != nil {
			failed++
			t.Logf("authenticated ping %d: %v", i+1, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of 20 authenticated connections were refused beside 400 idle ones", failed)
	}
	n.p.waitLog(t, 10*time.Second, "cluster port:", "closed for newer ones")
}
