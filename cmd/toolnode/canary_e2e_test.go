//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Canaries across three real nodes: `toolnode tool canary` on c3 makes
// the next publish (through 9P on c1) live on c2 only, while c1 and c3
// keep serving the live version; promote makes it live on all three; a
// second canary on c3, aborted, sends c3 back; a third, on c2, that
// exits 1 is aborted by the cluster after 5 failed calls. A canary naming
// no member is refused with "invalid canary: no node ...".
func TestE2E_Canary(t *testing.T) {
	t.Parallel()
	n1 := newCnode(t, "c1")
	n2 := newCnode(t, "c2").joining(n1)
	n3 := newCnode(t, "c3").joining(n1)
	nodes := []*cnode{n1, n2, n3}
	if err := os.WriteFile(filepath.Join(n1.e.tools, "greet"), []byte(greetScript(1)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n1.e.tools, "greet.meta"), []byte(greetMeta), 0o644); err != nil {
		t.Fatal(err)
	}
	n1.launch(t)
	n1.waitServing(t, 30*time.Second)
	n2.launch(t)
	n3.launch(t)
	waitFormed(t, 30*time.Second, nodes...)
	serves := func(n *cnode, v int) {
		t.Helper()
		pollUntil(t, 5*time.Second, fmt.Sprintf("%s serving v%d in t/greet", n.name, v), func() (bool, string) {
			s, err := read9(n.e.p9, "t/greet")
			return err == nil && s == greetScript(v), fmt.Sprintf("%q %v", s, err)
		})
	}
	for _, n := range nodes {
		serves(n, 1)
	}

	if r := runCLIResult(t, n3.e, "", "tool", "-a", n3.e.p9, "canary", "greet", "c9"); r.code != 1 || !strings.Contains(r.stderr, "invalid canary: no node c9") {
		t.Fatalf("a canary on no member: %+v", r)
	}
	out := runCLI(t, n3.e, "", "tool", "-a", n3.e.p9, "canary", "greet", "c2")
	if !strings.Contains(out, "canary on c2") {
		t.Fatalf("toolnode tool canary: %q", out)
	}
	if err := put9Exec(n1, "greet", []byte(greetScript(2))); err != nil {
		t.Fatal(err)
	}
	serves(n2, 2)
	serves(n1, 1)
	serves(n3, 1)
	pollUntil(t, 5*time.Second, "the canary in c1's idx", func() (bool, string) {
		idx, s, err := idxFields(n1, "greet")
		return err == nil && len(idx) == 2 && idx[0][1] == "canary", fmt.Sprint(s, err)
	})

	out = runCLI(t, n3.e, "", "tool", "-a", n3.e.p9, "promote", "greet")
	if !strings.Contains(out, "live everywhere as version 2") {
		t.Fatalf("toolnode tool promote: %q", out)
	}
	for _, n := range nodes {
		serves(n, 2)
	}

	runCLI(t, n1.e, "", "tool", "-a", n1.e.p9, "canary", "greet", "c3")
	if err := put9Exec(n1, "greet", []byte(greetScript(3))); err != nil {
		t.Fatal(err)
	}
	serves(n3, 3)
	serves(n2, 2)
	runCLI(t, n1.e, "", "tool", "-a", n1.e.p9, "abort", "greet")
	serves(n3, 2)
	pollUntil(t, 5*time.Second, "the aborted canary in c2's idx", func() (bool, string) {
		idx, s, err := idxFields(n2, "greet")
		return err == nil && len(idx) == 3 && idx[0][1] == "aborted" && idx[1][1] == "live", fmt.Sprint(s, err)
	})
	if r := runCLIResult(t, n1.e, "", "tool", "-a", n1.e.p9, "promote", "greet"); r.code != 1 || !strings.Contains(r.stderr, "invalid promote") {
		t.Fatalf("promote with no canary: %+v", r)
	}
	// A canary that exits 1: aborted by the cluster within 5 s of the
	// call that makes more than half of at least 5 fail.
	runCLI(t, n1.e, "", "tool", "-a", n1.e.p9, "canary", "greet", "c2")
	if err := put9Exec(n1, "greet", []byte("#!/bin/sh\necho broken >&2\nexit 1\n")); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 5*time.Second, "c2 serving the broken canary", func() (bool, string) {
		s, err := read9(n2.e.p9, "t/greet")
		return err == nil && strings.Contains(s, "exit 1"), fmt.Sprintf("%q %v", s, err)
	})
	for i := range 5 {
		if r := runCLIResult(t, n2.e, "", "call", "-a", n2.e.p9, "greet"); r.code == 0 {
			t.Fatalf("call %d of the broken canary succeeded: %+v", i+1, r)
		}
	}
	begin := time.Now()
	serves(n2, 2)
	pollUntil(t, 5*time.Second-time.Since(begin), "the automatic abort in c3's idx", func() (bool, string) {
		idx, s, err := idxFields(n3, "greet")
		return err == nil && len(idx) == 4 && idx[0][0] == "4" && idx[0][1] == "aborted" && idx[2][1] == "live", fmt.Sprint(s, err)
	})
	t.Logf("aborted within %s of the fifth failed call", time.Since(begin).Round(time.Millisecond))
	pollUntil(t, 5*time.Second, "the leader's log line", func() (bool, string) {
		for _, n := range nodes {
			if strings.Contains(n.p.log.String(), "versions: aborted the canary of greet") {
				return true, ""
			}
		}
		return false, ""
	})
	if out := runCLI(t, n2.e, "", "call", "-a", n2.e.p9, "greet"); out != "v2\n" {
		t.Fatalf("c2 after the automatic abort: %q", out)
	}
}
