package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"

	"github.com/toolnode/toolnode/internal/testport"
)

// rolesFormed reports whether every node lists every other alive, with
// one leader, voters-1 voters and the rest clients, and says the same of
// itself in its node file; it returns the roles.
func rolesFormed(nodes []*cnode, voters int) (bool, map[string]string, string) {
	var b strings.Builder
	var agreed map[string]string
	ok := true
	for _, n := range nodes {
		m, text, err := members9(n)
		info, err2 := read9(n.e.p9, "node")
		fmt.Fprintf(&b, "%s members:\n%s%s node: role %s, leader %s (%v %v)\n", n.name, text, n.name,
			nodeField(info, "role"), nodeField(info, "leader"), err, err2)
		if err != nil || err2 != nil || len(m) != len(nodes) {
			ok = false
			continue
		}
		roles := map[string]string{}
		count := map[string]int{}
		for _, o := range nodes {
			mm := m[o.name]
			if mm.state != "alive" {
				ok = false
			}
			roles[o.name] = mm.role
			count[mm.role]++
		}
		if count["leader"] != 1 || count["voter"] != voters-1 || count["client"] != len(nodes)-voters {
			ok = false
		}
		if nodeField(info, "role") != roles[n.name] {
			ok = false
		}
		if agreed != nil && !maps.Equal(agreed, roles) {
			ok = false
		}
		agreed = roles
	}
	return ok, agreed, b.String()
}

var followingRe = regexp.MustCompile(`stream: following server (\S+) from index`)

// streamServer is the cluster address a client's log last says it follows.
func streamServer(n *cnode) string {
	all := followingRe.FindAllStringSubmatch(n.p.log.String(), -1)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1][1]
}

// Five nodes with -voters 3: three servers and two clients. A client
// serves the replicated state, reads its own writes at once, calls a tool
// published on a server, and, when its server is killed, follows another
// and keeps up; every node shows the roles.
func TestE2E_Clients(t *testing.T) {
	t.Parallel()
	var nodes []*cnode
	metricsAt := map[string]string{}
	ports := testport.Pick(t, 5)
	for i := 1; i <= 5; i++ {
		n := newCnode(t, fmt.Sprintf("k%d", i))
		n.flags = append(n.flags, "-voters", "3", "-metrics", ports[i-1])
		metricsAt[n.name] = ports[i-1]
		if i > 1 {
			n.joining(nodes[0])
		}
		nodes = append(nodes, n)
	}
	begin := time.Now()
	nodes[0].launch(t)
	nodes[0].waitServing(t, 30*time.Second)
	for _, n := range nodes[1:] {
		n.launch(t)
	}
	var roles map[string]string
	took := pollUntil(t, 40*time.Second, "3 servers and 2 clients, as every node says", func() (bool, string) {
		ok, r, state := rolesFormed(nodes, 3)
		roles = r
		return ok, state
	})
	t.Logf("formed %v after the first start (%v after the roles were first read): %v", time.Since(begin).Round(time.Millisecond), took.Round(time.Millisecond), roles)
	var clients, servers []*cnode
	var leader *cnode
	for _, n := range nodes {
		switch roles[n.name] {
		case "client":
			clients = append(clients, n)
		case "leader":
			leader = n
			servers = append(servers, n)
		default:
			servers = append(servers, n)
		}
	}
	c, other := clients[0], clients[1]
	// A client runs on one processor, a server on the runtime's default.
	var want string // the runtime's default, as the leader has it
	pollUntil(t, 10*time.Second, "the leader's GOMAXPROCS on -metrics", func() (bool, string) {
		var err error
		want, err = gomaxprocs(metricsAt[leader.name])
		return err == nil, fmt.Sprint(err)
	})
	for _, n := range nodes {
		w, role := want, roles[n.name]
		if role == "client" && os.Getenv("GOMAXPROCS") == "" {
			w = "1"
		}
		pollUntil(t, 10*time.Second, fmt.Sprintf("%s, a %s, to run on %s processors", n.name, role, w), func() (bool, string) {
			got, err := gomaxprocs(metricsAt[n.name])
			return got == w, fmt.Sprint(got, err)
		})
	}

	// A write through a client reads back at once from it.
	if got := mustAsk9(t, c, "session/new", "name=w1"); got != "w1\n" {
		t.Fatalf("%s: session/new = %q", c.name, got)
	}
	if got := mustAsk9(t, c, "session/w1/agent/new", "name=A"); got != "A\n" {
		t.Fatalf("%s: agent/new = %q", c.name, got)
	}
	const agentA = "session/w1/agent/A/"
	// A tool published on a server is callable through the client.
	meta := `{"description": "Published on a server.", "cmd": "echo ran-on-$TOOLNODE_NODE"}`
	conn, err := dial9(leader.e.p9, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fid, err := conn.fsys.Create("t/srvtool.meta", plan9.OWRITE, 0o644)
	if err != nil {
		t.Fatalf("%s: create t/srvtool.meta: %v", leader.name, err)
	}
	if _, err := fid.Write([]byte(meta)); err != nil {
		t.Fatal(err)
	}
	if err := fid.Close(); err != nil {
		t.Fatalf("%s: publishing srvtool: %v", leader.name, err)
	}
	conn.close()
	pollUntil(t, 10*time.Second, c.name+" to list srvtool", func() (bool, string) {
		idx, err := read9(c.e.p9, "t/idx")
		return strings.Contains(idx, "srvtool\t"), fmt.Sprint(idx, err)
	})
	if got := mustAsk9(t, c, agentA+"tools", "srvtool"); got != "srvtool\n" {
		t.Fatalf("%s: load srvtool = %q", c.name, got)
	}
	if got := mustRead9(t, c, agentA+"toolsrv.loaded"); got != "srvtool\n" {
		t.Errorf("%s: toolsrv.loaded right after the load = %q, want srvtool", c.name, got)
	}
	if got := mustRead9(t, c, agentA+"toolsrv.rev"); got != "1\n" {
		t.Errorf("%s: toolsrv.rev right after the load = %q, want 1", c.name, got)
	}
	if out := mustAsk9(t, c, agentA+"call", "srvtool"); out != "ran-on-"+c.name+"\n" {
		t.Errorf("%s: call srvtool = %q, want it run here", c.name, out)
	}
	// A write through the other client reaches this one.
	mustAsk9(t, other, "session/new", "name=w2")
	pollUntil(t, 5*time.Second, c.name+" to show session w2 made through "+other.name, func() (bool, string) {
		idx, err := read9(c.e.p9, "session/idx")
		return slices.Contains(lines(idx), "w2"), fmt.Sprint(idx, err)
	})

	// Kill the client's server: it follows another, and keeps up.
	addr := streamServer(c)
	var victim *cnode
	for _, s := range servers {
		if s.e.cluster == addr {
			victim = s
		}
	}
	if victim == nil {
		t.Fatalf("%s follows %q, none of the servers:\n%s", c.name, addr, c.p.log.String())
	}
	victim.kill(t)
	killed := time.Now()
	moved := pollUntil(t, 20*time.Second, c.name+" to follow another server", func() (bool, string) {
		now := streamServer(c)
		return now != "" && now != addr, now
	})
	t.Logf("FIGURE %s killed (%s); %s follows %s %v later", victim.name, roles[victim.name], c.name, streamServer(c), moved.Round(time.Millisecond))
	var writeTook time.Duration
	pollUntil(t, 30*time.Second, "a write through "+c.name+" after its server died", func() (bool, string) {
		start := time.Now()
		_, err := ask9(c.e.p9, agentA+"ctl", "tool_unload srvtool", 20*time.Second)
		writeTook = time.Since(start)
		return err == nil, fmt.Sprint(err)
	})
	if got := mustRead9(t, c, agentA+"toolsrv.rev"); got != "2\n" {
		t.Errorf("%s: toolsrv.rev right after the unload = %q, want 2", c.name, got)
	}
	t.Logf("FIGURE first write through %s accepted %v after the kill (that write %v)", c.name, time.Since(killed).Round(time.Millisecond), writeTook.Round(time.Millisecond))
	live := others(nodes, victim)
	var survivor *cnode
	for _, s := range others(servers, victim) {
		survivor = s
	}
	pollUntil(t, 30*time.Second, "a write through a server to reach "+c.name, func() (bool, string) {
		if _, err := ask9(survivor.e.p9, "session/new", "name=w3", 10*time.Second); err != nil && !strings.Contains(err.Error(), "exists") {
			return false, err.Error()
		}
		idx, err := read9(c.e.p9, "session/idx")
		return slices.Contains(lines(idx), "w3"), fmt.Sprint(idx, err)
	})
	// The leader keeps three live servers: a client takes the dead
	// server's place, and every node says so.
	pollUntil(t, 40*time.Second, "three live servers again, the dead one listed dead", func() (bool, string) {
		var b strings.Builder
		for _, n := range live {
			m, text, err := members9(n)
			b.WriteString(n.name + ":\n" + text)
			if err != nil || m[victim.name].state != "dead" {
				return false, b.String()
			}
			count := map[string]int{}
			for _, o := range live {
				if m[o.name].state == "alive" {
					count[m[o.name].role]++
				}
			}
			if count["leader"] != 1 || count["voter"] != 2 || count["client"] != 1 {
				return false, b.String()
			}
		}
		return true, ""
	})
	// The client that became a server runs on the default again.
	m, _, err := members9(live[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if r := m[cl.name].role; r != "client" {
			pollUntil(t, 10*time.Second, fmt.Sprintf("%s, a client made %s, to run on %s processors", cl.name, r, want), func() (bool, string) {
				got, err := gomaxprocs(metricsAt[cl.name])
				return got == want, fmt.Sprint(got, err)
			})
		}
	}
}

// gomaxprocs is the GOMAXPROCS a node reports on -metrics (the Go
// collector's go_sched_gomaxprocs_threads).
func gomaxprocs(addr string) (string, error) {
	_, text, err := httpGetAs(http.DefaultTransport, "http://"+addr+"/metrics", metricsToken(addr))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^go_sched_gomaxprocs_threads (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		return "", fmt.Errorf("no go_sched_gomaxprocs_threads in /metrics")
	}
	return m[1], nil
}
