package node

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

func mountAs(t testing.TB, addr, aname string) (*client.Fsys, error) {
	t.Helper()
	c, err := client.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Attach(nil, "tester", aname)
}

// waitAdminToken polls until the node has written its admin token.
func waitAdminToken(t testing.TB, n *Node) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(n.adminTokenPath())
		if err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20s: %v", n.adminTokenPath(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTokens_Node(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, filepath.Join(dir, "data"), "", "")
	secret := waitAdminToken(t, n.Node)
	st, err := os.Stat(n.adminTokenPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, %v; want 0600", n.adminTokenPath(), st.Mode(), err)
	}
	if got := n.TokenIndex(); got != "admin-n1 admin\n" {
		t.Fatalf("token index %q", got)
	}
	admin, err := mountAs(t, n.P9Addr(), secret)
	if err != nil {
		t.Fatalf("attach with the admin token: %v", err)
	}
	rsecret, err := ask(admin, "token/new", "name=reader role=read")
	if err != nil {
		t.Fatal(err)
	}
	rsecret = strings.TrimSpace(rsecret)
	if !strings.HasPrefix(rsecret, "tn_") {
		t.Fatalf("token/new answered %q", rsecret)
	}
	if idx := readFile(t, admin, "token/idx"); idx != "admin-n1 admin\nreader read\n" || strings.Contains(idx, "tn_") {
		t.Fatalf("token/idx = %q", idx)
	}
	reader, err := mountAs(t, n.P9Addr(), rsecret)
	if err != nil {
		t.Fatal(err)
	}
	readFile(t, reader, "node")
	if _, err := ask(reader, "session/new", "name=s"); err == nil || !strings.Contains(err.Error(), "permission denied: needs role call") {
		t.Fatalf("session/new as read: %v", err)
	}
	if _, err := mountAs(t, n.P9Addr(), "tn_wrong"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("attach with a wrong token: %v", err)
	}
	fid, err := admin.Open("token/ctl", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write([]byte("revoke reader")); err != nil {
		t.Fatal(err)
	}
	fid.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := ask(reader, "tools", "x")
		if err != nil && !strings.Contains(err.Error(), "no tool") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revoked token's connection still works")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := mountAs(t, n.P9Addr(), rsecret); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("attach with a revoked token: %v", err)
	}
	// The admin's own connection stays.
	readFile(t, admin, "node")

	// A restart keeps the tokens and the admin token file, and makes no
	// new admin token.
	n.Close()
	n2 := startNode(t, filepath.Join(dir, "data"), "", "")
	// A restarted node applies its log again once it has a leader.
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, err := mountAs(t, n2.P9Addr(), secret)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin token after a restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := n2.TokenIndex(); got != "admin-n1 admin\n" {
		t.Fatalf("token index after a restart %q", got)
	}
}

// An attach without a token is refused on loopback by default (DESIGN
// §7 "Local trust"), as with -9p-anon none; -9p-anon read gives read;
// -9p-anon admin, the control, admits it as admin, and the node says so
// loudly. The principal of a token-less attach is anon@IP.
func TestTokens_Anon(t *testing.T) {
	for _, anon := range []string{"", "none", "read", "admin"} {
		logs := &syncBuf{}
		cfg := Config{
			Name: "n1", DataDir: filepath.Join(t.TempDir(), "data"),
			GossipAddr: "127.0.0.1:0", P9Listener: listen(t), ClusterListener: listen(t),
			LogOutput: io.MultiWriter(logs, testWriter{t}), P9Anon: anon,
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := mountAs(t, n.P9Addr(), "")
		switch anon {
		case "", "none":
			if err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("-9p-anon %q: a token-less attach on loopback: %v, want permission denied", anon, err)
			}
			if strings.Contains(logs.String(), "WARNING: -9p-anon") {
				t.Errorf("-9p-anon %q: a warning about anonymous access:\n%s", anon, logs.String())
			}
		case "read":
			if err != nil {
				t.Fatal(err)
			}
			_, err := ask(fs, "token/new", "name=x role=admin")
			if err == nil || !strings.Contains(err.Error(), "permission denied: needs role admin") {
				t.Errorf("anon read: token/new %v", err)
			}
		case "admin":
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ask(fs, "token/new", "name=x role=admin"); err != nil {
				t.Errorf("-9p-anon admin on loopback: token/new %v", err)
			}
			if !strings.Contains(logs.String(), "WARNING: -9p-anon admin") || !strings.Contains(logs.String(), "each tool included") {
				t.Errorf("-9p-anon admin is not said loudly:\n%s", logs.String())
			}
			if s := n.p9srv.Load(); s == nil || !slices.Contains(s.Principals(), "anon@127.0.0.1") {
				t.Errorf("the token-less principal is not anon@127.0.0.1")
			}
		}
		n.Close()
	}
	if _, err := New(Config{Name: "n1", DataDir: t.TempDir(), P9Anon: "root", GossipAddr: "127.0.0.1:0",
		P9Listener: listen(t), ClusterListener: listen(t), LogOutput: testWriter{t}}); err == nil || !strings.Contains(err.Error(), "-9p-anon") {
		t.Fatalf("-9p-anon root: %v", err)
	}
}

// The node that bootstraps a cluster writes its admin token; a node that
// joins writes none (its data directory holds no cluster admin), and
// proposes none: once it has stopped, its log has no word of one. The
// bootstrap's token works on it.
func TestTokens_OnlyTheBootstrapWritesAdminToken(t *testing.T) {
	root := t.TempDir()
	n1 := startMember(t, "n1", root)
	secret := waitAdminToken(t, n1)
	for life := 1; life <= 2; life++ { // its first start, and a restart
		logs := &syncBuf{}
		n2 := startMemberWith(t, "n2", root, "127.0.0.1:0", func(c *Config) {
			c.LogOutput = io.MultiWriter(logs, testWriter{t})
		}, n1.gossip.LocalAddr())
		waitFor(t, "n2 to serve", 30*time.Second, func() bool {
			_, err := mountAs(t, n2.P9Addr(), secret)
			return err == nil
		})
		n2.Close() // ends whatever it had begun
		if _, err := os.Stat(n2.adminTokenPath()); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("start %d: the joining node's %s: %v, want none", life, n2.adminTokenPath(), err)
		}
		if strings.Contains(logs.String(), "admin token") {
			t.Fatalf("start %d: the joining node worked on an admin token of its own:\n%s", life, logs.String())
		}
	}
	if got := n1.TokenIndex(); got != "admin-n1 admin\n" {
		t.Fatalf("token index %q, want only the bootstrap's admin token", got)
	}
}

// BenchmarkAttach is an attach (and the clunk of its root) with a token
// against one without (anonymous), side by side on one node, each on a
// connection of its own: the token's cost is hashing it and looking the
// hash up, and checking again once the connection is registered.
func BenchmarkAttach(b *testing.B) {
	n := startNode(b, filepath.Join(b.TempDir(), "data"), "", "")
	secret := waitAdminToken(b, n.Node)
	for _, bc := range []struct{ name, aname string }{{"anon", ""}, {"token", secret}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := client.Dial("tcp", n.P9Addr())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for b.Loop() {
				fs, err := c.Attach(nil, "bench", bc.aname)
				if err != nil {
					b.Fatal(err)
				}
				fs.Close()
			}
		})
	}
}

// BenchmarkAttachCheck is the node's decision alone (Options.Attach),
// without the network: anonymous against a token hashed and looked up.
func BenchmarkAttachCheck(b *testing.B) {
	n := startNode(b, filepath.Join(b.TempDir(), "data"), "", "")
	secret := waitAdminToken(b, n.Node)
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	for _, bc := range []struct{ name, aname string }{{"anon", ""}, {"token", secret}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := n.attach(bc.aname, addr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
