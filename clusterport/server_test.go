package clusterport

import (
	"errors"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/tlsutil"
)

// The protocol table: a registered byte reaches its handler with the
// peer its certificate names; a byte nobody registered is closed with a
// log line naming it (the control: the same dial with a registered byte
// is answered).
func TestClusterPort_ProtocolTable(t *testing.T) {
	dir := t.TempDir()
	caFile, caKey, err := tlsutil.CreateCA(dir, 30)
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string, client bool) *TLS {
		cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{Node: name, Days: 30, CA: caFile, CAKey: caKey, OutDir: dir, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		return mustLoadTLS(t, cert, key, caFile)
	}
	server, cli := load("srv", false), load("cli", true)
	logs := &syncBuf{}
	s := NewServer(Config{TLS: server, Logf: log.New(logs, "", 0).Printf})
	peers := make(chan Peer, 4)
	s.Register(ProtoCall, "routed calls", func(c net.Conn, p Peer) {
		peers <- p
		c.Write([]byte{ProtoCall})
		c.Close()
	})
	ln := listen(t)
	s.Listen(ln)
	t.Cleanup(s.Close)
	addr := ln.Addr().String()

	d := &Dialer{TLS: cli}
	c, err := d.Dial(addr, ProtoCall, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err != nil || string(b) != "C" {
		t.Fatalf("a registered protocol answered %q, %v", b, err)
	}
	c.Close()
	if p := <-peers; p.Role != RoleClient || p.Name != "cli" {
		t.Errorf("the handler saw peer %+v, want the client certificate of cli", p)
	}

	c, err = d.Dial(addr, 'Z', 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("an unregistered protocol byte was answered %q", b)
	}
	c.Close()
	waitFor(t, "the log line naming the unknown byte", 5*time.Second, func() bool {
		return strings.Contains(logs.String(), "unknown protocol byte 0x5a")
	})
	defer func() {
		if recover() == nil {
			t.Error("a protocol registered twice did not panic")
		}
	}()
	s.Register(ProtoCall, "again", nil)
}

// A lone node's cluster secret: made whole with mode 0600, read back the
// same; a missing file is os.ErrNotExist, a malformed one a sentence.
func TestClusterPort_Secret(t *testing.T) {
	path := filepath.Join(t.TempDir(), SecretFile)
	if _, err := ReadSecret(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing secret: %v, want os.ErrNotExist", err)
	}
	key, err := MakeSecret(path)
	if err != nil || len(key) != 32 {
		t.Fatalf("MakeSecret: %d bytes, %v", len(key), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, %v; want 0600", fi.Mode(), err)
	}
	got, err := ReadSecret(path)
	if err != nil || string(got) != string(key) {
		t.Fatalf("read back %x, %v; want %x", got, err, key)
	}
	os.WriteFile(path, []byte("not base64 of 32 bytes\n"), 0o600)
	if _, err := ReadSecret(path); err == nil || !strings.Contains(err.Error(), "no base64 key of 32 bytes") {
		t.Fatalf("malformed secret: %v", err)
	}
}
