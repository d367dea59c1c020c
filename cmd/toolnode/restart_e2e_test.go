//go:build linux

// Restarts as service managers do them (SIGTERM; SIGKILL; SIGTERM, then
// SIGKILL after 1 s), of every node of a real three-node cluster and of a
// client node, with state made before any node joined, after the cluster
// formed, and between restarts: after each, every node lists the same
// state, every earlier token attaches on every node, and a write through
// the restarted node is seen everywhere. Then a minute of restarts under
// writes through random nodes, checked for linearizability.

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
)

// restartWays are the ways a node is stopped before it starts again.
var restartWays = []string{"SIGTERM", "SIGKILL", "SIGTERM+SIGKILL"}

// stopAs stops the member's process the way named.
func (n *cnode) stopAs(t *testing.T, way string) {
	t.Helper()
	p := n.p.cmd.Process
	switch way {
	case "SIGKILL":
		n.kill(t)
		return
	case "SIGTERM":
		p.Signal(syscall.SIGTERM)
	case "SIGTERM+SIGKILL":
		p.Signal(syscall.SIGTERM)
		select {
		case <-n.p.done:
			return
		case <-time.After(time.Second):
			p.Kill()
		}
	}
	select {
	case <-n.p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10 s of %s", n.name, way)
	}
}

// attachAs attaches to addr with token secret and reads the node file.
func attachAs(addr, secret string) error {
	nc, err := dialTest(addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	c, err := client.NewConn(nc)
	if err != nil {
		return err
	}
	fsys, err := c.Attach(nil, "e2e", secret)
	if err != nil {
		return err
	}
	_, err = readErr(fsys, "node")
	return err
}

// restartLab is a cluster and the state made in it: token secrets by
// name, session names and tool names.
type restartLab struct {
	nodes    []*cnode
	tokens   map[string]string
	sessions []string
	tools    []string
}

// make adds a token, a session and a tool through n, all named after
// what.
func (l *restartLab) make(t *testing.T, n *cnode, what string) {
	t.Helper()
	tok := "tok-" + what
	secret := strings.TrimSpace(mustAsk9(t, n, "token/new", "name="+tok+" role=read"))
	l.tokens[tok] = secret
	ses := "ses-" + what
	mustAsk9(t, n, "session/new", "name="+ses)
	l.sessions = append(l.sessions, ses)
	tool := "tool_" + strings.ReplaceAll(what, "-", "_")
	meta := fmt.Sprintf(`{"description": "A tool made %s.", "cmd": "echo %s"}`+"\n", what, tool)
	if err := os.WriteFile(filepath.Join(n.e.tools, tool+".meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	l.tools = append(l.tools, tool)
}

// view is what a node lists of the replicated state.
func view(n *cnode) (string, error) {
	var b strings.Builder
	for _, f := range []string{"token/idx", "session/idx", "t/idx"} {
		s, err := read9(n.e.p9, f)
		if err != nil {
			return "", fmt.Errorf("%s: %v", f, err)
		}
		fmt.Fprintf(&b, "%s:\n%s\n", f, s)
	}
	return b.String(), nil
}

// check waits until every running node lists the same state, holding
// every token, session and tool made, and every token attaches on every
// node; it returns how long that took.
func (l *restartLab) check(t *testing.T, d time.Duration, what string) time.Duration {
	t.Helper()
	return pollUntil(t, d, what+": every node to list the same full state", func() (bool, string) {
		var first string
		for i, n := range l.nodes {
			v, err := view(n)
			if err != nil {
				return false, n.name + ": " + err.Error()
			}
			for _, want := range append(append(append([]string(nil), l.sessions...), l.tools...), names(l.tokens)...) {
				if !strings.Contains(v, want) {
					return false, fmt.Sprintf("%s lacks %s:\n%s", n.name, want, v)
				}
			}
			if i > 0 && v != first {
				return false, fmt.Sprintf("%s differs from %s:\n%s\n---\n%s", n.name, l.nodes[0].name, v, first)
			}
			first = v
		}
		for _, n := range l.nodes {
			for tok, secret := range l.tokens {
				if err := attachAs(n.e.p9, secret); err != nil {
					return false, fmt.Sprintf("%s refuses %s: %v", n.name, tok, err)
				}
			}
		}
		return true, ""
	})
}

func names(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// seenWithin waits until every node has session ses.
func (l *restartLab) seenWithin(t *testing.T, d time.Duration, ses string) {
	t.Helper()
	for _, n := range l.nodes {
		pollUntil(t, d, n.name+" to list "+ses, func() (bool, string) {
			s, err := read9(n.e.p9, "session/idx")
			return err == nil && strings.Contains(s, ses), fmt.Sprint(s, err)
		})
	}
}

func TestE2E_Restart_EveryNodeEveryWay(t *testing.T) {
	t.Parallel()
	r1 := newCnode(t, "r1")
	r2 := newCnode(t, "r2").joining(r1)
	r3 := newCnode(t, "r3").joining(r1)
	r4 := newCnode(t, "r4").joining(r1) // a client: the leader keeps three voters
	for _, n := range []*cnode{r1, r2, r3, r4} {
		n.flags = append(n.flags, "-voters", "3")
	}
	l := &restartLab{nodes: []*cnode{r1}, tokens: map[string]string{}}
	r1.start(t)
	l.make(t, r1, "alone")
	l.check(t, 15*time.Second, "r1 alone")
	r2.launch(t)
	r3.launch(t)
	waitFormed(t, 30*time.Second, r1, r2, r3)
	r4.start(t)
	l.nodes = []*cnode{r1, r2, r3, r4}
	l.make(t, r2, "formed")
	l.check(t, 15*time.Second, "formed")

	// The loss this guards against came and went from run to run: every
	// node is restarted each way twice.
	step := 0
	for range 2 {
		for _, n := range append([]*cnode(nil), l.nodes...) {
			for _, way := range restartWays {
				step++
				n.stopAs(t, way)
				rest := others(l.nodes, n)
				// Between restarts, through a node that stays.
				l.nodes = rest
				l.make(t, rest[rand.IntN(len(rest))], fmt.Sprintf("while-%d", step))
				l.nodes = append(rest, n)
				n.launch(t)
				took := l.check(t, 15*time.Second, fmt.Sprintf("%s after %s", n.name, way))
				ses := fmt.Sprintf("through-%d", step)
				mustAsk9(t, n, "session/new", "name="+ses)
				l.sessions = append(l.sessions, ses)
				l.seenWithin(t, 5*time.Second, ses)
				t.Logf("FIGURE %s after %s: the same full state on every node %v after the start", n.name, way, took.Round(time.Millisecond))
			}
		}
	}
}

// A minute of restarts, one node at a time, each stopped one of the
// three ways, under writes through random nodes; the history checked
// with porcupine.
func TestE2E_Restart_ChurnLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of restarts")
	}
	t.Parallel()
	nodes := startLzCluster(t, "k")
	base := time.Now()
	clients, halt := startLzClients(nodes, base)
	defer halt()
	restarts := 0
	for time.Since(base) < time.Minute {
		n := nodes[rand.IntN(len(nodes))]
		way := restartWays[rand.IntN(len(restartWays))]
		n.stopAs(t, way)
		time.Sleep(time.Second) // the node stays down a while on purpose: the clients see it gone
		n.launch(t)
		n.waitServing(t, 30*time.Second)
		restarts++
		// One node at a time: the next stops once all three are voters.
		waitFormed(t, 30*time.Second, nodes...)
		time.Sleep(2 * time.Second) // the clients run on a whole cluster a while on purpose
	}
	halt()
	t.Logf("FIGURE %d restarts in %v", restarts, time.Since(base).Round(time.Second))
	checkLinearizable(t, nodes, clients, base)
}
