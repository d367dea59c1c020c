//go:build linux

// A whole cluster stopped and started again with every node on a new
// address, as `docker compose down` then `up` does (a new subnet) or a
// rescheduled set of pods: three nodes, each in a network namespace of
// its own, all stopped at once with SIGTERM, every host's address
// changed, all started again; a leader and the full state within
// readdressWithin. In "names" the nodes know each other by host names
// (-advertise NAME, -join NAME), resolved through each namespace's hosts
// file (ip netns exec binds /etc/netns/NS/hosts); in "ips" by addresses
// only, the joins given anew as a supervisor would.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readdressWithin is how soon a cluster started again on new addresses
// must have a leader and serve its state (issue 20).
const readdressWithin = 20 * time.Second

func TestE2E_Netns_WholeClusterOnNewAddresses(t *testing.T) {
	for _, mode := range []string{"names", "ips"} {
		t.Run(mode, func(t *testing.T) { testReaddress(t, mode == "names") })
	}
}

func testReaddress(t *testing.T, byName bool) {
	lab := newNetLab(t)
	hosts := lab.newMembers(3, "-voters", "3")
	ip := func(h *nsNode) string { host, _, _ := strings.Cut(h.e.p9, ":"); return host }
	// hostsFiles writes every namespace's hosts file with the current
	// addresses.
	hostsFiles := func() {
		var b strings.Builder
		b.WriteString("127.0.0.1 localhost\n")
		for _, h := range hosts {
			fmt.Fprintf(&b, "%s %s\n", ip(h), h.name)
		}
		for _, h := range hosts {
			dir := filepath.Join("/etc/netns", h.ns)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, h := range hosts {
		t.Cleanup(func() { os.RemoveAll(filepath.Join("/etc/netns", h.ns)) })
	}
	hostsFiles()
	// flags is a node's command line for the addresses it has now: the
	// ports bound on every address, the node named by -advertise.
	flags := func(h *nsNode, first bool) []string {
		f := []string{"-9p-anon", "admin", "-insecure", "-voters", "3", "-9p", "0.0.0.0:9564", "-gossip", "0.0.0.0:7946", "-cluster", "0.0.0.0:9565"}
		if byName {
			f = append(f, "-advertise", h.name)
			if !first {
				f = append(f, "-join", hosts[0].name+":7946")
			}
			return f
		}
		f = append(f, "-advertise", ip(h))
		if !first {
			f = append(f, "-join", ip(hosts[0])+":7946")
		}
		return f
	}
	launch := func(h *nsNode, first bool) {
		e := h.e
		// The test's 9P clients present the bootstrap node's admin token
		// (tokenOf), at each node's current address.
		e.register(nil)
		if !first {
			joinedOf.Store(e, hosts[0].e)
		}
		args := []string{"netns", "exec", h.ns, binPath, "-name", h.name, "-data", e.data, "-tools", e.tools, "-agents", e.agents}
		h.p = startCmd(t, h.name, exec.Command("ip", append(args, flags(h, first)...)...), append(lab.environ, "XDG_CONFIG_HOME="+e.config))
	}
	var nodes []*cnode
	for i, h := range hosts {
		nodes = append(nodes, h.cnode)
		launch(h, i == 0)
		if i == 0 {
			h.waitServing(t, 60*time.Second)
		}
	}
	waitFormed(t, 60*time.Second, nodes...)
	l := &restartLab{nodes: nodes, tokens: map[string]string{}}
	l.make(t, nodes[0], "before")
	l.make(t, nodes[1], "formed")
	l.check(t, 15*time.Second, "formed")

	// Stop every node at once, as Compose does.
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-h.p.done:
			case <-time.After(10 * time.Second):
				t.Errorf("%s did not exit within 10 s of SIGTERM", h.name)
			}
		}()
	}
	wg.Wait()
	// A new subnet: every host moves from .1x to .2x.
	for i, h := range hosts {
		old := ip(h)
		nsDial.Delete(old)
		next := lab.subnet + strconv.Itoa(20+i+1)
		ipCmd(t, "-n", h.ns, "addr", "flush", "dev", "eth0")
		ipCmd(t, "-n", h.ns, "addr", "add", next+"/24", "dev", "eth0")
		h.e.p9, h.e.gossip, h.e.cluster = next+":9564", next+":7946", next+":9565"
		nsDial.Store(next, lab.client)
		t.Cleanup(func() { nsDial.Delete(next) })
	}
	hostsFiles()
	begin := time.Now()
	for i, h := range hosts {
		launch(h, i == 0)
	}
	leader, formed := waitFormed(t, readdressWithin, nodes...)
	l.check(t, readdressWithin-time.Since(begin), "on new addresses")
	t.Logf("FIGURE on new addresses (%s): formed with leader %s %v after the start, full state on every node %v after",
		map[bool]string{true: "names", false: "ips"}[byName], leader, formed.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	mustAsk9(t, nodes[2], "session/new", "name=after")
	l.sessions = append(l.sessions, "after")
	l.seenWithin(t, 5*time.Second, "after")
}
