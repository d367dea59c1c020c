package testcluster

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestPoll(t *testing.T) {
	n := 0
	if !Poll(time.Second, func() bool { n++; return n == 3 }) {
		t.Fatal("Poll gave up on a condition that holds on the third look")
	}
	start := time.Now()
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never holds")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("Poll gave up after %v, before its deadline", d)
	}
}

func TestProcWaitLogAndStop(t *testing.T) {
	p := StartT(t, "sh", exec.Command("sh", "-c", "echo starting; echo ready at 1; exec sleep 60"), nil)
	line, err := p.WaitLog(10*time.Second, "ready", "at")
	if err != nil || line != "ready at 1" {
		t.Fatalf("WaitLog = %q, %v", line, err)
	}
	if !p.Stop(10 * time.Second) {
		t.Fatal("a sleep did not exit of SIGTERM")
	}
	if !p.Exited() || p.Err() == nil {
		t.Fatalf("after Stop: exited %v, err %v; want exited of the signal", p.Exited(), p.Err())
	}
}

func TestProcWaitLogExited(t *testing.T) {
	p := StartT(t, "sh", exec.Command("sh", "-c", "echo bye"), nil)
	start := time.Now()
	_, err := p.WaitLog(time.Minute, "never")
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "bye") {
		t.Fatalf("WaitLog on an exited process = %v; want an error saying it exited, with its output", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("WaitLog waited for its deadline on a process that had exited")
	}
}

func TestGossipNet(t *testing.T) {
	var g GossipNet
	start := func(name string) (*memberlist.Memberlist, *GossipTransport) {
		tr := g.Renew(g.NewTransport())
		cfg := memberlist.DefaultLocalConfig()
		cfg.Name, cfg.Transport, cfg.LogOutput = name, tr, io.Discard
		m, err := memberlist.Create(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
		return m, tr
	}
	a, ta := start("a")
	b, _ := start("b")
	if _, err := b.Join([]string{ta.Addr()}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, func() bool { return a.NumMembers() == 2 && b.NumMembers() == 2 },
		"a and b see each other (a %d, b %d members)", a.NumMembers(), b.NumMembers())
	ta.SetDown()
	if !ta.IsDown() {
		t.Fatal("SetDown left the transport up")
	}
	if _, err := g.Lookup(ta.Addr()).DialTimeout(ta.Addr(), time.Second); err == nil {
		t.Fatal("a down transport accepted a stream")
	}
}
