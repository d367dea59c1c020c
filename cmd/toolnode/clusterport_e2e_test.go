//go:build linux

// The cluster port and the port rules, end to end: real node processes on
// loopback, attacked by a client that knows only a node's cluster address
// and speaks each of its protocols ('P' ping, 'F' forwarded writes, 'C'
// routed calls, 'R' Raft). Every refusal is paired with its control: the
// same client against a node without a key does get through.

package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/raftfsm"
)

// dialMode is how an attacker reaches a cluster port.
type dialMode struct {
	name string
	dial func(addr string) (net.Conn, error)
}

// selfSignedTLS is a TLS client with a certificate of its own making, as
// an attacker would have.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t), Subject: pkix.Name{CommonName: "intruder"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates:       []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}},
		InsecureSkipVerify: true, // the attacker trusts anything
	}
}

func attackModes(t *testing.T) []dialMode {
	conf := selfSignedTLS(t)
	return []dialMode{
		{"plain", func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 3*time.Second) }},
		{"tls-self-signed", func(addr string) (net.Conn, error) {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second}, Config: conf}
			return d.Dial("tcp", addr)
		}},
	}
}

// frame writes one length-prefixed JSON message, the cluster port's
// framing for 'F' and 'C'.
func frame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	_, err = w.Write(append(hdr[:], b...))
	return err
}

func unframe(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	b := make([]byte, min(binary.BigEndian.Uint32(hdr[:]), 1<<20))
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// open dials and announces a protocol.
func openProto(m dialMode, addr string, proto byte) (net.Conn, error) {
	c, err := m.dial(addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte{proto}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// attackPing: success is the node answering 'P'.
func attackPing(m dialMode, addr string) error {
	c, err := openProto(m, addr, 'P')
	if err != nil {
		return err
	}
	defer c.Close()
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	if b[0] != 'P' {
		return fmt.Errorf("answered %q", b[0])
	}
	return nil
}

// attackWrite forwards a command creating session name: success is the
// leader answering with the index it committed.
func attackWrite(m dialMode, addr, name string) error {
	cmd, err := raftfsm.Encode(raftfsm.CmdCreateSession, raftfsm.CreateSession{Name: name, Owner: "anon@attacker", Time: time.Now().UnixNano()})
	if err != nil {
		return err
	}
	c, err := openProto(m, addr, 'F')
	if err != nil {
		return err
	}
	defer c.Close()
	// As a member would forward it for a token-less caller: the call
	// role at most (a write with no principal is refused on any port).
	if err := frame(c, map[string]any{"cmd": cmd, "anon": "anon@attacker", "node": "attacker"}); err != nil {
		return err
	}
	var resp struct {
		Index uint64 `json:"index"`
		Err   string `json:"err"`
	}
	if err := unframe(bufio.NewReader(c), &resp); err != nil {
		return err
	}
	if resp.Err != "" || resp.Index == 0 {
		return fmt.Errorf("answered %+v", resp)
	}
	return nil
}

// attackCall asks the node to run a tool: success is its output.
func attackCall(m dialMode, addr, session, agent, tool string) (string, error) {
	c, err := openProto(m, addr, 'C')
	if err != nil {
		return "", err
	}
	defer c.Close()
	req := map[string]any{"session": session, "agent": agent, "tool": tool, "args": json.RawMessage(`{}`), "index": 0, "from": "attacker"}
	if err := frame(c, req); err != nil {
		return "", err
	}
	var resp struct {
		Out []byte `json:"out"`
		Err string `json:"err"`
	}
	if err := unframe(bufio.NewReader(c), &resp); err != nil {
		return "", err
	}
	if resp.Err != "" {
		return "", fmt.Errorf("answered %q", resp.Err)
	}
	return string(resp.Out), nil
}

// attackStream is a raft.StreamLayer that dials as the attacker does.
type attackStream struct {
	net.Listener
	m dialMode
}

func (s attackStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := s.m.dial(string(addr))
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{'R'}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// attackRaft sends a forged AppendEntries from a "leader" with a far
// higher term, through hashicorp/raft's own transport: success is any
// decoded answer.
func attackRaft(t *testing.T, m dialMode, addr string) (*raft.AppendEntriesResponse, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransport(attackStream{Listener: ln, m: m}, 1, 5*time.Second, io.Discard)
	defer tr.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("forger"), Addr: []byte(ln.Addr().String())},
		Term:      1 << 40,
	}
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries("victim", raft.ServerAddress(addr), req, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// setupCaller makes session s with agent a that has tool loaded, on n.
func setupCaller(t *testing.T, n *cnode, tool string) {
	t.Helper()
	mustAsk9(t, n, "session/new", "name=s")
	mustAsk9(t, n, "session/s/agent/new", "name=a")
	mustAsk9(t, n, "session/s/agent/a/ctl", "tool_load "+tool)
}

func TestE2E_ClusterPort_NoCredentialNoEntry(t *testing.T) {
	t.Parallel()
	key := strings.TrimSpace(runCLI(t, &env{config: t.TempDir()}, "", "keygen"))

	keyed := newCnode(t, "keyed")
	keyed.addTool(t, "keyed_tool", "A tool of the keyed node.")
	keyed.flags = []string{"-encrypt", key}
	open := newCnode(t, "open")
	open.addTool(t, "open_tool", "A tool of the node without a key.")
	open.flags = []string{"-insecure"}
	keyed.start(t)
	open.start(t)
	setupCaller(t, keyed, "keyed_tool")
	setupCaller(t, open, "open_tool")
	keyed.p.waitLog(t, 5*time.Second, "cluster port: TLS 1.3 with certificates derived from the gossip key")
	open.p.waitLog(t, 5*time.Second, "WARNING: -insecure")

	for _, m := range attackModes(t) {
		t.Run("keyed/"+m.name, func(t *testing.T) {
			addr := keyed.e.cluster
			if err := attackPing(m, addr); err == nil {
				t.Error("P: the keyed node answered a ping")
			}
			if err := attackWrite(m, addr, "pwned-"+m.name); err == nil {
				t.Error("F: the keyed node applied a forwarded write")
			}
			if out, err := attackCall(m, addr, "s", "a", "keyed_tool"); err == nil {
				t.Errorf("C: the keyed node ran a routed call: %q", out)
			}
			if resp, err := attackRaft(t, m, addr); err == nil {
				t.Errorf("R: the keyed node answered a forged AppendEntries: %+v", resp)
			}
		})
	}
	// Nothing changed on the keyed node, and it says why it refused.
	if got := mustRead9(t, keyed, "session/idx"); slices.ContainsFunc(lines(got), func(s string) bool { return strings.HasPrefix(s, "pwned") }) {
		t.Errorf("keyed: session/idx = %q after the attacks", got)
	}
	keyed.p.waitLog(t, 5*time.Second, "cluster port: refused", "TLS handshake failed")
	if !keyed.running() {
		t.Fatal("the keyed node died under the attacks")
	}
	if m, text, err := members9(keyed); err != nil || len(m) != 1 || m["keyed"].role != "leader" {
		t.Errorf("keyed: cluster/members after the attacks: %q (%v)", text, err)
	}

	// Control: the same client against the node without a key gets
	// everything done.
	t.Run("control/open", func(t *testing.T) {
		m := attackModes(t)[0]
		addr := open.e.cluster
		if err := attackPing(m, addr); err != nil {
			t.Errorf("P: %v", err)
		}
		if err := attackWrite(m, addr, "pwned-open"); err != nil {
			t.Errorf("F: %v", err)
		} else if got := mustRead9(t, open, "session/idx"); !slices.Contains(lines(got), "pwned-open") {
			t.Errorf("F: the write was answered but session/idx = %q", got)
		}
		if out, err := attackCall(m, addr, "s", "a", "open_tool"); err != nil || !strings.Contains(out, "open_tool") {
			t.Errorf("C: %q, %v", out, err)
		}
		if resp, err := attackRaft(t, m, addr); err != nil {
			t.Errorf("R: %v", err)
		} else if resp.Term != 1<<40 {
			t.Errorf("R: answered term %d; the forged term was not taken", resp.Term)
		}
	})
}

// A node refuses to start on a port that leaves loopback without its
// credential, naming the flag to add; -insecure starts it, loudly.
func TestE2E_Ports_RefuseToStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"gossip", []string{"-gossip", "0.0.0.0:7946"}, []string{"-gossip 0.0.0.0:7946", "-encrypt", "-insecure"}},
		{"cluster", []string{"-cluster", "0.0.0.0:9565"}, []string{"-cluster 0.0.0.0:9565", "-encrypt", "-tls-cert", "-insecure"}},
		{"9p", []string{"-9p", "0.0.0.0:9564"}, []string{"-9p 0.0.0.0:9564", "-9p-tls-cert", "-insecure"}},
		{"advertise", []string{"-advertise", "192.0.2.1"}, []string{"-advertise 192.0.2.1", "-encrypt", "-insecure"}},
		{"metrics", []string{"-metrics", "0.0.0.0:0"}, []string{"-metrics 0.0.0.0:0", "-9p-tls-cert", "-insecure"}},
		// A cluster of several nodes needs a credential, on loopback too.
		{"join", []string{"-join", "127.0.0.1:1"}, []string{"needs a credential", "-encrypt", "-tls-cert", "-insecure"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newCnode(t, "refused")
			// Flags given later win, so these replace the loopback ones.
			p := n.e.spawn(t, n.name, n.e.childEnv(), tc.flags...)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				t.Fatal("still running after 30s")
			}
			if code := p.cmd.ProcessState.ExitCode(); code == 0 {
				t.Fatalf("exited 0:\n%s", p.log)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.log.String(), w) {
					t.Errorf("the refusal does not name %q:\n%s", w, p.log)
				}
			}
			if _, err := os.Stat(filepath.Join(n.e.data, "raft")); err == nil {
				t.Error("the refused node made its Raft state")
			}
		})
	}
	t.Run("insecure starts, loudly", func(t *testing.T) {
		n := newCnode(t, "insecure")
		n.flags = []string{"-advertise", "192.0.2.1", "-insecure"}
		n.start(t)
		line := n.p.waitLog(t, 5*time.Second, "WARNING: -insecure", "-advertise 192.0.2.1")
		t.Logf("logged: %s", line)
		n.p.stop(t)
		// At every start.
		n.start(t)
		n.p.waitLog(t, 5*time.Second, "WARNING: -insecure", "-advertise 192.0.2.1")
	})
}
