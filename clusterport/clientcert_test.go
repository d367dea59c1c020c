package clusterport

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolnode/toolnode/tlsutil"
)

// A client node's certificate (toolnode tls cert -client) on the cluster
// port: real mutual TLS on loopback. Each refusal has its control, the
// same connection made with a server's certificate from the same CA.

// clientCertPKI makes a CA, a server's certificate and a client node's,
// and loads each as a node's cluster TLS.
func clientCertPKI(t *testing.T) (server, server2, client *TLS) {
	t.Helper()
	dir := t.TempDir()
	caFile, caKey, err := tlsutil.CreateCA(dir, 30)
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string, isClient bool) *TLS {
		cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{Node: name, Days: 30, CA: caFile, CAKey: caKey, OutDir: dir, Client: isClient})
		if err != nil {
			t.Fatal(err)
		}
		return mustLoadTLS(t, cert, key, caFile)
	}
	server, server2, client = load("srv", false), load("srv2", false), load("cli", true)
	if server.ClientOnly() || !client.ClientOnly() {
		t.Fatalf("clientOnly: server %t, client %t", server.ClientOnly(), client.ClientOnly())
	}
	if !strings.Contains(client.mode, tlsutil.ClientRoleURI) {
		t.Errorf("the client's mode line %q does not name its role", client.mode)
	}
	return server, server2, client
}

// muxNode serves a cluster port over ct; the Raft connections it hands
// on are answered "ok" by the test, in Raft's place.
func muxNode(t *testing.T, ct *TLS) (addr string, logs *syncBuf) {
	t.Helper()
	logs = &syncBuf{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{TLS: ct, Logf: log.New(logs, "", 0).Printf})
	raft := s.Listener(ProtoRaft, "raft", nil)
	s.Listen(ln)
	t.Cleanup(s.Close)
	go func() {
		for {
			c, err := raft.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	return ln.Addr().String(), logs
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clientPeers records the addresses a Dialer reports as client nodes'.
type clientPeers struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (p *clientPeers) note(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[addr] = true
}

func (p *clientPeers) known(addr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[addr]
}

// raftAnswer dials addr with ct, speaks the Raft protocol byte and
// reads what comes back: "ok" when the connection reached Raft.
func raftAnswer(t *testing.T, ct *TLS, addr string) string {
	t.Helper()
	c, err := ct.Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{ProtoRaft}); err != nil {
		return err.Error()
	}
	b, err := io.ReadAll(c)
	if err != nil && len(b) == 0 {
		return err.Error()
	}
	return string(b)
}

func TestClientCert_SendsNoRaft(t *testing.T) {
	server, server2, client := clientCertPKI(t)
	addr, logs := muxNode(t, server)
	if got := raftAnswer(t, client, addr); got == "ok" {
		t.Fatal("a client node's certificate reached Raft")
	}
	if !strings.Contains(logs.String(), "refused Raft from") || !strings.Contains(logs.String(), "a client sends no Raft RPC") {
		t.Errorf("no log line names the refusal:\n%s", logs)
	}
	// Control: a server's certificate of the same CA reaches Raft.
	if got := raftAnswer(t, server2, addr); got != "ok" {
		t.Fatalf("a server's certificate did not reach Raft: %q", got)
	}
}

// A node whose own certificate is a client node's serves no Raft, even
// to a server; the control is the same server dialling a server.
func TestClientCert_NodeServesNoRaft(t *testing.T) {
	server, server2, client := clientCertPKI(t)
	caddr, clogs := muxNode(t, client)
	if got := raftAnswer(t, server, caddr); got == "ok" {
		t.Fatal("a node with a client node's certificate served Raft")
	}
	if !strings.Contains(clogs.String(), "it takes no part in Raft") {
		t.Errorf("no log line names the refusal:\n%s", clogs)
	}
	saddr, _ := muxNode(t, server2)
	if got := raftAnswer(t, server, saddr); got != "ok" {
		t.Fatalf("control: a server did not serve Raft: %q", got)
	}
}

// A node dialling a peer that presents a client node's certificate does
// not take it for a server: no Raft, no change stream, no forwarded
// write (which carries a caller's token) goes to it, and the leader's
// check before it adds a server (Ping) says so; a routed call and a ping still
// go. Control: the same dials to a server's certificate all go.
func TestClientCert_IsNeverDialledAsAServer(t *testing.T) {
	server, server2, client := clientCertPKI(t)
	var peers clientPeers
	d := &Dialer{TLS: server, ClientPeer: peers.note}
	for _, tc := range []struct {
		peer   *TLS
		client bool
	}{{client, true}, {server2, false}} {
		addr, results := tlsTestEchoServer(t, tc.peer.wrapListener)
		for _, proto := range []byte{ProtoRaft, ProtoStream, ProtoForward, ProtoCall} {
			c, err := d.Dial(addr, proto, 5*time.Second)
			refused := tc.client && ServerOnly(proto)
			switch {
			case refused && !errors.Is(err, ErrClientPeer):
				t.Errorf("dial %q to a client node's certificate: %v, want ErrClientPeer", proto, err)
			case !refused && err != nil:
				t.Errorf("dial %q (peer a client: %t): %v", proto, tc.client, err)
			}
			if c != nil {
				c.Close()
				tlsTestNextResult(t, results)
			}
		}
		err := d.Ping(addr, 2*time.Second)
		tlsTestNextResult(t, results)
		if tc.client != errors.Is(err, ErrClientPeer) {
			t.Errorf("reachable (peer a client: %t): %v", tc.client, err)
		}
		if !tc.client && err != nil {
			t.Errorf("control: reachable: %v", err)
		}
		if peers.known(addr) != tc.client {
			t.Errorf("ClientPeer told of %s: %t, want %t", addr, !tc.client, tc.client)
		}
	}
}

// A node with a client node's certificate does not dial Raft at all.
func TestClientCert_NodeDialsNoRaft(t *testing.T) {
	server, _, client := clientCertPKI(t)
	d := &Dialer{TLS: client}
	addr, results := tlsTestEchoServer(t, server.wrapListener)
	if c, err := d.Dial(addr, ProtoRaft, 5*time.Second); err == nil {
		c.Close()
		t.Fatal("a client node dialled Raft")
	}
	tlsTestNextResult(t, results)
	// Control: it follows the stream and forwards writes to a server.
	for _, proto := range []byte{ProtoStream, ProtoForward} {
		c, err := d.Dial(addr, proto, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %q: %v", proto, err)
		}
		c.Close()
		tlsTestNextResult(t, results)
	}
}
