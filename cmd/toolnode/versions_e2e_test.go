//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// greetScript is version N of a test tool: it prints "vN".
func greetScript(n int) string { return fmt.Sprintf("#!/bin/sh\necho v%d\n", n) }

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

const greetMeta = `{"description": "Test tool: say which version it is."}` + "\n"

// idxFields reads v/NAME/idx on n: one slice of fields a line.
func idxFields(n *cnode, name string) ([][]string, string, error) {
	s, err := read9(n.e.p9, "v/"+name+"/idx")
	if err != nil {
		return nil, "", err
	}
	var out [][]string
	for _, l := range lines(s) {
		out = append(out, strings.Fields(l))
	}
	return out, s, nil
}

// Versions across three real nodes: a publish from c1's tools directory
// and one through 9P on c2 are two versions that c3 lists in v/greet/idx
// with their publishers and digests; a rollback written on c3 is live
// on every node within 3 s; a rollback to a version not kept is refused
// with "invalid" and changes nothing.
func TestE2E_Versions(t *testing.T) {
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

	// Version 1, from c1's directory, reaches c3.
	pollUntil(t, 10*time.Second, "version 1 on c3", func() (bool, string) {
		idx, s, err := idxFields(n3, "greet")
		return err == nil && len(idx) == 1 && idx[0][0] == "1" && idx[0][1] == "live", fmt.Sprint(s, err)
	})

	// Version 2: a new executable through 9P on c2.
	if err := put9Exec(n2, "greet", []byte(greetScript(2))); err != nil {
		t.Fatal(err)
	}
	var idx [][]string
	pollUntil(t, 10*time.Second, "version 2 on c3", func() (bool, string) {
		var s string
		var err error
		idx, s, err = idxFields(n3, "greet")
		return err == nil && len(idx) == 2 && idx[0][0] == "2", fmt.Sprint(s, err)
	})
	d1, d2 := sha256Hex(greetScript(1)), sha256Hex(greetScript(2))
	want := [][]string{
		{"2", "live", "", "", d2, "-"},
		{"1", "old", "node:c1", "", d1, "-"},
	}
	for i, w := range want {
		f := idx[i]
		if len(f) != 6 || f[0] != w[0] || f[1] != w[1] || f[4] != w[4] || f[5] != w[5] {
			t.Fatalf("v/greet/idx line %d = %q, want %q", i+1, f, w)
		}
		if _, err := time.Parse(time.RFC3339, f[3]); err != nil || !strings.HasSuffix(f[3], "Z") {
			t.Fatalf("v/greet/idx line %d: time %q is not RFC 3339 UTC: %v", i+1, f[3], err)
		}
	}
	// Version 1's publisher is c1's directory; version 2's the principal
	// of the admin token written through, not a node.
	if idx[1][2] != "node:c1" || idx[0][2] == "-" || strings.HasPrefix(idx[0][2], "node:") {
		t.Fatalf("publishers: %q", idx)
	}
	// Version 1's executable and metadata, read on c3.
	pollUntil(t, 10*time.Second, "v/greet/1 on c3", func() (bool, string) {
		s, err := read9(n3.e.p9, "v/greet/1")
		return err == nil && s == greetScript(1), fmt.Sprintf("%q %v", s, err)
	})
	if s := mustRead9(t, n3, "v/greet/1.meta"); s != greetMeta {
		t.Fatalf("v/greet/1.meta = %q", s)
	}
	// The CLI's table, on c3.
	table := runCLI(t, n3.e, "", "tool", "-a", n3.e.p9, "versions", "greet")
	if l := lines(table); len(l) != 3 || !strings.HasPrefix(l[0], "VERSION") || !strings.Contains(l[2], "node:c1") || !strings.Contains(l[1], d2[:12]) {
		t.Fatalf("toolnode tool versions greet:\n%s", table)
	}

	// A rollback to a version not kept: refused, nothing changed.
	c, err := dial9(n3.e.p9, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	err = write9(c.fsys, "v/greet/ctl", "rollback 7")
	if err == nil || !strings.HasPrefix(err.Error(), "invalid rollback") || !strings.Contains(err.Error(), "keeps no version 7") {
		t.Fatalf("rollback 7: %v", err)
	}
	if _, s, _ := idxFields(n3, "greet"); len(lines(s)) != 2 {
		t.Fatalf("a refused rollback changed the versions:\n%s", s)
	}
	pollUntil(t, 5*time.Second, "the refusal's log line", func() (bool, string) {
		return strings.Contains(n3.p.log.String(), "refused the rollback of greet to version 7"), ""
	})

	// rollback 1 through the CLI on c3: version 3, live everywhere within 3 s.
	out := runCLI(t, n3.e, "", "tool", "-a", n3.e.p9, "rollback", "greet", "1")
	if !strings.Contains(out, "live as version 3") {
		t.Fatalf("toolnode tool rollback greet 1: %q", out)
	}
	begin := time.Now()
	for _, n := range nodes {
		pollUntil(t, 3*time.Second-time.Since(begin), "the rollback on "+n.name, func() (bool, string) {
			idx, s, err := idxFields(n, "greet")
			if err != nil || len(idx) != 3 || idx[0][0] != "3" || idx[0][1] != "live" || idx[0][4] != d1 {
				return false, fmt.Sprint(s, err)
			}
			exe, err := read9(n.e.p9, "t/greet")
			return err == nil && exe == greetScript(1), fmt.Sprintf("t/greet = %q, %v", exe, err)
		})
	}
	t.Logf("the rollback was live on every node %v after the CLI returned", time.Since(begin).Round(time.Millisecond))

	// rm t/greet.meta: a withdrawn version, seen on c1.
	if err := c.fsys.Remove("t/greet.meta"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, 5*time.Second, "the withdrawn version on c1", func() (bool, string) {
		idx, s, err := idxFields(n1, "greet")
		return err == nil && len(idx) == 4 && idx[0][1] == "withdrawn" && idx[0][4] == "-", fmt.Sprint(s, err)
	})
	if _, err := c.fsys.Stat("t/greet.meta"); err == nil {
		t.Fatal("t/greet.meta still exists after rm")
	}
	if fid, err := c.fsys.Open("v/greet/4.meta", plan9.OREAD); err == nil {
		fid.Close()
		t.Fatal("a withdrawn version has metadata")
	}
}
