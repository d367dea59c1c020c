package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/registry"
)

// BenchmarkCallRoutedSecurity: the price of the cluster port's
// credentials on a routed call. Two pairs of in-process nodes run side by
// side, one pair without a key (plain TCP), one with a gossip key (the
// cluster port TLS 1.3 with certificates derived from it); on each, n1
// calls a trivial tool only n2 can run, over 9P as BenchmarkCallRouted
// does. Each routed call opens a new cluster-port connection, so the
// keyed side pays a full TLS handshake per call. The sub-benchmarks
// alternate, round after round, so the machine's drift falls on both.
func BenchmarkCallRoutedSecurity(b *testing.B) {
	sides := []struct {
		name string
		key  []byte
		fid  *client.Fid
	}{{name: "creds=off"}, {name: "creds=key", key: testKey(7)}}
	for i := range sides {
		_, sides[i].fid = routedPair(b, sides[i].name, sides[i].key)
	}
	for round := range 3 {
		for _, s := range sides {
			b.Run(fmt.Sprintf("%s/round=%d", s.name, round), func(b *testing.B) {
				callLoop(b, s.fid, "there")
			})
		}
	}
}

// routedPair starts n1 and n2 (which alone can run "there"), with key as
// their gossip key, and returns n1's call fid of an agent that loaded it.
func routedPair(b testing.TB, name string, key []byte) (*Node, *client.Fid) {
	root := b.TempDir()
	n1 := startKeyedHost(b, "n1", root, nil, key)
	startKeyedHost(b, "n2", root, []string{"frob"}, key, n1.gossip.LocalAddr())
	waitFor(b, name+": two voters", 20*time.Second, func() bool { return len(voters(n1)) == 2 })
	writeTool(b, n1.cfg.ToolsDir, "there", `{"description":"remote","variants":[{"match":{"binary":"frob"}}]}`, nopScript)
	f1 := mount(b, n1.P9Addr())
	waitFor(b, name+": there runnable on n2", 10*time.Second, func() bool {
		out, err := ask(f1, "cluster/where", "there")
		return err == nil && out == "n2\n"
	})
	mustAsk(b, f1, "session/new", "name=bench")
	mustAsk(b, f1, "session/bench/agent/new", "name=a")
	mustAsk(b, f1, "session/bench/agent/a/tools", "there")
	fid, err := f1.Open("session/bench/agent/a/call", plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fid.Close() })
	return n1, fid
}

// Routed calls to one node take turns on one kept connection, through the
// gossip key's TLS.
func TestRoute_CallsKeepTheirConnection(t *testing.T) {
	n1, fid := routedPair(t, "keyed", testKey(9))
	kept := n1.callConns.Idle
	call := func() {
		t.Helper()
		if _, err := fid.WriteAt([]byte(`there {"x":1}`), 0); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if k, err := fid.ReadAt(buf, 0); (err != nil && err != io.EOF) || string(buf[:k]) != `{"x":1}` {
			t.Fatalf("call answered %q, %v", buf[:k], err)
		}
	}
	call()
	first := kept()
	if len(first) != 1 {
		t.Fatalf("%d connections kept after a routed call, want 1", len(first))
	}
	if _, ok := first[0].(*tls.Conn); !ok {
		t.Fatal("the kept connection is not TLS")
	}
	for range 3 {
		call()
	}
	if now := kept(); len(now) != 1 || now[0] != first[0] {
		t.Fatalf("after four calls: %d kept, the first one among them: %v", len(now), len(now) == 1 && now[0] == first[0])
	}
	// A kept connection the runner closed is not used: the next call dials.
	first[0].Close()
	call()
	if now := kept(); len(now) != 1 || now[0] == first[0] {
		t.Fatal("a closed connection was kept or reused")
	}
}

func callLoop(b *testing.B, fid *client.Fid, tool string) {
	req := []byte(tool + ` {"x":1}`)
	buf := make([]byte, 256)
	b.ResetTimer()
	cpu0 := cpuTime()
	defer func() {
		// Both nodes run in this process: their CPU per call, less
		// sensitive than wall time to other load on the machine.
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}()
	for i := 0; i < b.N; i++ {
		if _, err := fid.WriteAt(req, 0); err != nil {
			b.Fatal(err)
		}
		k, err := fid.ReadAt(buf, 0)
		if (err != nil && err != io.EOF) || string(buf[:k]) != `{"x":1}` {
			b.Fatalf("call answered %q, %v", buf[:k], err)
		}
	}
}

// startKeyedHost is startHost with a gossip key.
func startKeyedHost(t testing.TB, name, root string, binaries []string, key []byte, join ...string) *Node {
	t.Helper()
	host := registry.LocalHost()
	has := map[string]bool{}
	for _, b := range binaries {
		has[b] = true
	}
	host.LookPath = func(b string) (string, error) {
		if has[b] {
			return "/usr/bin/" + b, nil
		}
		return "", errors.New("not found")
	}
	tools := filepath.Join(root, name+"-tools")
	os.MkdirAll(tools, 0o755)
	n, err := New(Config{
		P9Anon: trustedAnon,
		Name:   name, DataDir: filepath.Join(root, name), ToolsDir: tools,
		GossipAddr: "127.0.0.1:0", Join: join, Host: &host, EncryptKey: key, Insecure: key == nil,
		P9Listener: listen(t), ClusterListener: listen(t),
		Debounce: 20 * time.Millisecond, LogOutput: testWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
