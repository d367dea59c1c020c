//go:build linux

// A client node's certificate (toolnode tls cert -client), end to end:
// real node processes on loopback with mutual TLS from a CA the CLI made.
// A peer with that certificate speaks hashicorp/raft's own protocol to a
// server's cluster port and is refused; the control, a server's
// certificate of the same CA that is no member, is answered. A cluster
// with one client-certificate node serves calls and reads through it, and
// its leader never gives it a place in Raft.

package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// certDial is a dialMode presenting the certificate in dir/name.pem, as
// a node with it would, and trusting the CA of dir.
func certDial(t *testing.T, dir, name string) dialMode {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "toolnode-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	conf := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return dialMode{name, func(addr string) (net.Conn, error) {
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second}, Config: conf}
		return d.Dial("tcp", addr)
	}}
}

// raftRPCs sends the three RPCs a Raft server takes from its peers
// through hashicorp/raft's transport, each with term 0 (stale, so a
// server that answers changes nothing): the errors, one per RPC.
func raftRPCs(t *testing.T, m dialMode, addr string) map[string]error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransport(attackStream{Listener: ln, m: m}, 1, 5*time.Second, io.Discard)
	defer tr.Close()
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("probe"), Addr: []byte(ln.Addr().String())}
	target := raft.ServerAddress(addr)
	out := map[string]error{}
	out["AppendEntries"] = tr.AppendEntries("s1", target, &raft.AppendEntriesRequest{RPCHeader: hdr}, &raft.AppendEntriesResponse{})
	out["RequestVote"] = tr.RequestVote("s1", target, &raft.RequestVoteRequest{RPCHeader: hdr}, &raft.RequestVoteResponse{})
	out["InstallSnapshot"] = tr.InstallSnapshot("s1", target,
		&raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: raft.SnapshotVersionMax},
		&raft.InstallSnapshotResponse{}, bytes.NewReader(nil))
	return out
}

func TestE2E_ClientCert(t *testing.T) {
	t.Parallel()
	pki := t.TempDir()
	cli := &env{config: t.TempDir()}
	runCLI(t, cli, "", "tls", "ca", "-dir", pki)
	runCLI(t, cli, "", "tls", "cert", "-dir", pki, "-node", "s1")
	runCLI(t, cli, "", "tls", "cert", "-dir", pki, "-node", "probe")
	if out := runCLI(t, cli, "", "tls", "cert", "-dir", pki, "-node", "c1", "-client"); !strings.Contains(out, "never a server") {
		t.Errorf("tls cert -client printed %q", out)
	}
	tlsFlags := func(name string) []string {
		return []string{"-tls-cert", filepath.Join(pki, name+".pem"), "-tls-key", filepath.Join(pki, name+"-key.pem"),
			"-tls-ca", filepath.Join(pki, "toolnode-ca.pem")}
	}

	// A client node cannot bootstrap a cluster, nor ask to be a server.
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"bootstrap", tlsFlags("c1"), "a client cannot bootstrap a cluster; give -join"},
		{"server", append(tlsFlags("c1"), "-server", "-join", "127.0.0.1:1"), "-server asks this node to be a server"},
	} {
		n := newCnode(t, "refused-"+tc.name)
		n.flags = tc.flags
		p := n.launch(t)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still running after 30 s", tc.name)
		}
		if code := p.cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(p.log.String(), tc.want) {
			t.Errorf("%s: exit %d, want a refusal naming %q:\n%s", tc.name, code, tc.want, p.log)
		}
	}

	s1 := newCnode(t, "s1")
	s1.addTool(t, "server_tool", "A tool of the server.")
	s1.flags = tlsFlags("s1")
	c1 := newCnode(t, "c1").joining(s1)
	c1.addTool(t, "client_tool", "A tool of the client node.")
	c1.flags = append(c1.flags, tlsFlags("c1")...)
	s1.start(t)
	c1.start(t)
	c1.p.waitLog(t, 10*time.Second, "is a client node's", "it stays a client")
	// The leader wants five voters, and would add c1 at once: it keeps
	// it out, saying why.
	s1.p.waitLog(t, 20*time.Second, "keeping c1 out of Raft", "client node's")
	pollUntil(t, 20*time.Second, "c1 to be listed as a client", func() (bool, string) {
		m, text, err := members9(s1)
		return err == nil && m["c1"].state == "alive" && m["c1"].role == "client" && m["s1"].role == "leader", text
	})

	// Calls and reads through the client node: a forwarded write, a read
	// of the replica, a call routed from it to the server and one routed
	// from the server to it.
	if got := mustAsk9(t, c1, "session/new", "name=s"); got != "s\n" {
		t.Fatalf("c1: session/new = %q", got)
	}
	mustAsk9(t, c1, "session/s/agent/new", "name=a")
	pollUntil(t, 20*time.Second, "both tools in the catalog of both nodes", func() (bool, string) {
		a, _ := read9(s1.e.p9, "t/idx")
		b, _ := read9(c1.e.p9, "t/idx")
		ok := strings.Contains(a, "client_tool") && strings.Contains(b, "server_tool")
		return ok, a + "\n" + b
	})
	mustAsk9(t, c1, "session/s/agent/a/tools", "server_tool\nclient_tool")
	if got, err := ask9(c1.e.p9, "session/s/agent/a/call", "server_tool", 30*time.Second); err != nil || got != "server_tool\n" {
		t.Errorf("c1: call server_tool (runs on s1) = %q, %v", got, err)
	}
	if got, err := ask9(s1.e.p9, "session/s/agent/a/call", "client_tool", 30*time.Second); err != nil || got != "client_tool\n" {
		t.Errorf("s1: call client_tool (runs on c1) = %q, %v", got, err)
	}
	if got := mustRead9(t, c1, "session/idx"); !strings.Contains(got, "s") {
		t.Errorf("c1: session/idx = %q", got)
	}

	// A peer presenting c1's certificate sends Raft's RPCs to s1's
	// cluster port: each is refused, and s1 says why.
	for rpc, err := range raftRPCs(t, certDial(t, pki, "c1"), s1.e.cluster) {
		if err == nil {
			t.Errorf("%s with a client node's certificate was answered", rpc)
		}
	}
	s1.p.waitLog(t, 5*time.Second, "refused Raft from", "a client sends no Raft RPC")
	// Control: the same RPCs with a server's certificate of the same CA
	// are answered (each stale, so nothing changes).
	for rpc, err := range raftRPCs(t, certDial(t, pki, "probe"), s1.e.cluster) {
		if err != nil {
			t.Errorf("control: %s with a server's certificate: %v", rpc, err)
		}
	}
	// And c1's own cluster port serves no Raft, even to a server.
	for rpc, err := range raftRPCs(t, certDial(t, pki, "probe"), c1.e.cluster) {
		if err == nil {
			t.Errorf("c1 answered %s", rpc)
		}
	}
	c1.p.waitLog(t, 5*time.Second, "refused Raft from", "it takes no part in Raft")
	if m, text, err := members9(s1); err != nil || m["s1"].role != "leader" || m["c1"].role != "client" {
		t.Errorf("after the RPCs: cluster/members = %q (%v)", text, err)
	}
}

// A voter killed and restarted with a client node's certificate is taken
// out of Raft by the leader (it would count toward the quorum and never
// answer), and serves reads as a client; the two servers left keep
// taking writes.
func TestE2E_ClientCert_VoterRestartedAsClient(t *testing.T) {
	t.Parallel()
	pki, clientPKI := t.TempDir(), t.TempDir()
	cli := &env{config: t.TempDir()}
	runCLI(t, cli, "", "tls", "ca", "-dir", pki)
	for _, name := range []string{"v1", "v2", "v3"} {
		runCLI(t, cli, "", "tls", "cert", "-dir", pki, "-node", name)
	}
	runCLI(t, cli, "", "tls", "cert", "-dir", clientPKI, "-node", "v3", "-client",
		"-ca", filepath.Join(pki, "toolnode-ca.pem"), "-ca-key", filepath.Join(pki, "toolnode-ca-key.pem"))
	tlsFlags := func(dir, name string) []string {
		return []string{"-tls-cert", filepath.Join(dir, name+".pem"), "-tls-key", filepath.Join(dir, name+"-key.pem"),
			"-tls-ca", filepath.Join(pki, "toolnode-ca.pem")}
	}
	v1 := newCnode(t, "v1")
	v1.flags = tlsFlags(pki, "v1")
	v2 := newCnode(t, "v2").joining(v1)
	v2.flags = append(v2.flags, tlsFlags(pki, "v2")...)
	v3 := newCnode(t, "v3").joining(v1)
	join := v3.flags
	v3.flags = append(v3.flags, tlsFlags(pki, "v3")...)
	v1.start(t)
	v2.launch(t)
	v3.launch(t)
	waitFormed(t, 30*time.Second, v1, v2, v3)
	v3.kill(t)
	v3.flags = append(append([]string{}, join...), tlsFlags(clientPKI, "v3")...)
	v3.start(t)
	v3.p.waitLog(t, 10*time.Second, "it stays a client")
	// The leader: v1 or v2 (another election if v3 led).
	var lead *cnode
	pollUntil(t, 20*time.Second, "v1 or v2 to lead", func() (bool, string) {
		m, text, err := members9(v1)
		if err == nil && (m["v1"].role == "leader" || m["v2"].role == "leader") {
			lead = v1
			if m["v2"].role == "leader" {
				lead = v2
			}
			return true, text
		}
		return false, text + fmt.Sprint(err)
	})
	lead.p.waitLog(t, 30*time.Second, "removed v3: its certificate is a client node's")
	pollUntil(t, 20*time.Second, "v3 listed as a client", func() (bool, string) {
		m, text, err := members9(lead)
		return err == nil && m["v3"].role == "client" && m["v3"].state == "alive", text
	})
	if got := mustAsk9(t, lead, "session/new", "name=after"); got != "after\n" {
		t.Fatalf("a write after v3 left Raft: %q", got)
	}
	pollUntil(t, 10*time.Second, "v3 to read the write as a client", func() (bool, string) {
		s, err := read9(v3.e.p9, "session/idx")
		return strings.Contains(s, "after"), s + fmt.Sprint(err)
	})
}
