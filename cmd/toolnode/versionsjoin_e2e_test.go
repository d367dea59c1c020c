//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// A node that restarts and a client node that joins later serve the
// same versions as the rest (DESIGN §8): with a key trusted, a signed
// version 1 live and a signed canary version 2 on j2, j3 stopped and
// started again and j4 (a client, -voters 3) started last show the same
// v/greet/idx and trust/idx as j1, and each runs the version live for
// it: j2 the canary, every other node version 1.
func TestE2E_VersionsRestartAndJoin(t *testing.T) {
	t.Parallel()
	alice := sshKeygen(t, t.TempDir(), "alice")
	var nodes []*cnode
	for i := 1; i <= 4; i++ {
		n := newCnode(t, fmt.Sprintf("j%d", i))
		n.flags = append(n.flags, "-voters", "3")
		if i > 1 {
			n.joining(nodes[0])
		}
		nodes = append(nodes, n)
	}
	j1, j2, j3, j4 := nodes[0], nodes[1], nodes[2], nodes[3]
	j1.launch(t)
	j1.waitServing(t, 30*time.Second)
	j2.launch(t)
	j3.launch(t)
	waitFormed(t, 30*time.Second, j1, j2, j3)

	e, addr := j1.e, j1.e.p9
	runCLI(t, e, "", "trust", "-a", addr, "add", "alice", alice+".pub")
	dir := t.TempDir()
	meta, exe := filepath.Join(dir, "greet.meta"), filepath.Join(dir, "greet")
	writeFile(t, meta, greetMeta, 0o644)
	writeFile(t, exe, greetScript(1), 0o755)
	if out := cliOK(t, e, "", "publish", "-a", addr, "-key", alice, meta, exe); out != "greet: version 1, live, signed by alice\n" {
		t.Fatalf("publish: %q", out)
	}
	writeFile(t, exe, greetScript(2), 0o755)
	if out := cliOK(t, e, "", "publish", "-a", addr, "-key", alice, "-canary", "j2", meta, exe); out != "greet: version 2, canary, signed by alice on j2\n" {
		t.Fatalf("publish -canary j2: %q", out)
	}

	j3.stopAs(t, "SIGTERM")
	j3.launch(t)
	j4.launch(t)
	pollUntil(t, 40*time.Second, "3 servers and the client j4", func() (bool, string) {
		ok, _, state := rolesFormed(nodes, 3)
		return ok, state
	})

	idx := mustRead9(t, j1, "v/greet/idx")
	trust := mustRead9(t, j1, "trust/idx")
	if l := lines(idx); len(l) != 2 || len(lines(trust)) != 1 {
		t.Fatalf("j1: v/greet/idx\n%strust/idx\n%s", idx, trust)
	}
	for _, n := range nodes {
		want := "v1\n"
		if n == j2 {
			want = "v2\n"
		}
		pollUntil(t, 15*time.Second, n.name+" serving the same versions", func() (bool, string) {
			gotIdx, err := read9(n.e.p9, "v/greet/idx")
			gotTrust, err2 := read9(n.e.p9, "trust/idx")
			if err != nil || err2 != nil || gotIdx != idx || gotTrust != trust {
				return false, fmt.Sprintf("v/greet/idx (%v)\n%strust/idx (%v)\n%s", err, gotIdx, err2, gotTrust)
			}
			r := runCLIResult(t, n.e, "", "call", "-a", n.e.p9, "greet")
			return r.code == 0 && r.stdout == want, fmt.Sprintf("call greet: %+v, want %q", r, want)
		})
	}
}
