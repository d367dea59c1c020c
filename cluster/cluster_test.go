package cluster

import (
	"io"
	"testing"
	"time"
)

func start(t testing.TB, name string, key []byte) *Cluster {
	t.Helper()
	c, err := Start(Config{Name: name, BindAddr: "127.0.0.1:0", Key: key, LogOutput: io.Discard, Meta: Meta{Tools: 3}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, what, 10*time.Second, cond)
}

// deadWithin bounds the wait for a crashed member to be called dead: the
// crashed one is probed within a second times the others' number, then
// the suspicion timeout runs, 4 s with every expected confirmation and up
// to six times that with none (memberlist's SuspicionMult and
// SuspicionMaxTimeoutMult, at a 1 s ProbeInterval), on a machine that
// may be loaded.
const deadWithin = 40 * time.Second

func waitForWithin(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCluster_JoinMetaLeave(t *testing.T) {
	a := start(t, "a", nil)
	b := start(t, "b", nil)
	if _, err := b.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to see b", func() bool { return len(a.Members()) == 2 })
	if err := b.SetMeta(Meta{Tools: 7, P9: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's meta on a", func() bool {
		for _, m := range a.Members() {
			if m.Name == "b" && m.Meta.Tools == 7 {
				return true
			}
		}
		return false
	})
	sawJoin := false
	for len(a.Events()) > 0 {
		if ev := <-a.Events(); ev.Kind == NodeJoin && ev.Member.Name == "b" {
			sawJoin = true
		}
	}
	if !sawJoin {
		t.Fatal("no join event for b")
	}
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to see b leave", func() bool {
		for len(a.Events()) > 0 {
			if ev := <-a.Events(); ev.Kind == NodeLeave && ev.Member.Name == "b" && ev.Member.State == "left" {
				return true
			}
		}
		return false
	})
	if ms := a.Members(); len(ms) != 2 || ms[1].Name != "b" || ms[1].State != "left" {
		t.Fatalf("members after b left = %+v", ms)
	}
}

func TestCluster_KeyRequired(t *testing.T) {
	key := make([]byte, 32)
	a := start(t, "a", key)
	b := start(t, "b", nil)
	if _, err := b.Join([]string{a.LocalAddr()}); err == nil {
		t.Fatal("a node without the key joined an encrypted cluster")
	}
	if len(a.Members()) != 1 {
		t.Fatalf("members of the encrypted cluster: %v", a.Members())
	}
}

func TestCluster_MetaTooLarge(t *testing.T) {
	a := start(t, "a", nil)
	big := make([]byte, 600)
	for i := range big {
		big[i] = 'x'
	}
	if err := a.SetMeta(Meta{P9: string(big)}); err != ErrMetaTooLarge {
		t.Fatalf("err = %v, want ErrMetaTooLarge", err)
	}
}

func TestCluster_DeadMemberListed(t *testing.T) {
	a := start(t, "a", nil)
	b := start(t, "b", nil)
	if _, err := b.Join([]string{a.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to see b", func() bool { return len(a.Members()) == 2 })
	b.Shutdown() // a crash, as a sees it
	waitForWithin(t, "a to call b dead", deadWithin, func() bool {
		for _, m := range a.Members() {
			if m.Name == "b" && m.State == "dead" {
				return true
			}
		}
		return false
	})
}

// Gossip is sent uncompressed by default, but a member that compresses
// (an older build, or one with Compress) and one that does not understand
// each other: joins, meta and capabilities travel both ways.
func TestCluster_CompressedAndPlainMembersMix(t *testing.T) {
	plain := start(t, "plain", nil)
	packed, err := Start(Config{Name: "packed", BindAddr: "127.0.0.1:0", LogOutput: io.Discard, Compress: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { packed.Shutdown() })
	if _, err := packed.Join([]string{plain.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	if err := packed.SetMeta(Meta{Tools: 9}); err != nil {
		t.Fatal(err)
	}
	plain.SetCapabilities(Caps{"grep": -1})
	packed.SetCapabilities(Caps{"jq": 0})
	waitFor(t, "each to see the other's meta and tools", func() bool {
		var meta bool
		for _, m := range plain.Members() {
			meta = meta || m.Name == "packed" && m.State == "alive" && m.Meta.Tools == 9
		}
		return meta && len(plain.Capable("jq")) == 1 && len(packed.Capable("grep")) == 1 && len(packed.Members()) == 2
	})
}
