//go:build linux

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// toolnode publish against a real node process (DESIGN §8): a first
// publish of a .meta and an executable is version 1, a changed .meta
// version 2, an identical publish none; a .meta that does not parse and
// a missing file are refused with the cause and nothing changes; once
// toolnode trust add has trusted a key made by ssh-keygen, an unsigned
// publish is refused (the control: the same command passed with no key
// trusted) as is one signed by an untrusted key (the control: it
// passed before) and publish -key passes, a changed .meta and executable
// making one version, a changed executable alone one more.
func TestE2E_Publish(t *testing.T) {
	t.Parallel()
	n := newCnode(t, "p1")
	n.launch(t)
	n.waitServing(t, 30*time.Second)
	e, addr := n.e, n.e.p9
	dir := t.TempDir()
	meta, exe := filepath.Join(dir, "pubtool.meta"), filepath.Join(dir, "pubtool")
	metaN := func(k int) string { return fmt.Sprintf(`{"description": "Test tool, metadata %d."}`+"\n", k) }
	put := func(k, x int) {
		writeFile(t, meta, metaN(k), 0o644)
		writeFile(t, exe, greetScript(x), 0o755)
	}
	idxIs := func(want ...string) [][]string {
		t.Helper()
		idx, s, err := idxFields(n, "pubtool")
		var got []string
		for _, f := range idx {
			got = append(got, strings.Join(f[:2], " "))
		}
		if err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("v/pubtool/idx: %v\n%s, want versions %q", err, s, want)
		}
		return idx
	}
	published := func(args ...string) string {
		t.Helper()
		return cliOK(t, e, "", append([]string{"publish", "-a", addr}, args...)...)
	}
	refused := func(want string, args ...string) {
		t.Helper()
		r := runCLIResult(t, e, "", append([]string{"publish", "-a", addr}, args...)...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "toolnode publish: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
			t.Fatalf("toolnode publish %q: exit %d, stderr %q; want 1 and one line saying %q", args, r.code, r.stderr, want)
		}
	}

	put(1, 1)
	if out := published(meta, exe); out != "pubtool: version 1, live\n" {
		t.Fatalf("first publish: %q", out)
	}
	idx := idxIs("1 live")
	if idx[0][4] != sha256Hex(greetScript(1)) || idx[0][5] != "-" {
		t.Fatalf("version 1: %q", idx[0])
	}
	// The control for the untrusted publish below: signed by a key no
	// one trusts, it passes while no key is trusted.
	bob := sshKeygen(t, dir, "bob")
	put(2, 1)
	if out := published("-key", bob, meta, exe); out != "pubtool: version 2, live\n" {
		t.Fatalf("publish of a changed .meta: %q", out)
	}
	idxIs("2 live", "1 old")
	if s := mustRead9(t, n, "v/pubtool/2.meta"); s != metaN(2) {
		t.Fatalf("v/pubtool/2.meta = %q", s)
	}
	if out := published("-key", bob, meta, exe); out != "pubtool: no new version: identical to the live one (version 2)\n" {
		t.Fatalf("identical publish: %q", out)
	}
	idxIs("2 live", "1 old")

	// Bad input: nothing changes, the executable included.
	refused("no such file or directory", filepath.Join(dir, "absent.meta"))
	refused("no such file or directory", meta, filepath.Join(dir, "absent"))
	refused("NAME.meta [EXECUTABLE]", "pubtool")
	empty := filepath.Join(dir, "empty.meta")
	writeFile(t, empty, "\n", 0o644)
	refused("empty.meta is empty", empty)
	writeFile(t, meta, `{"description": 5}`, 0o644)
	writeFile(t, exe, greetScript(9), 0o755)
	refused("invalid tool metadata in pubtool.meta", meta, exe)
	idxIs("2 live", "1 old")
	pollUntil(t, 5*time.Second, "the node's log line for the bad .meta", func() (bool, string) {
		return strings.Contains(n.p.log.String(), "refused a write to t/pubtool.meta: invalid tool metadata in pubtool.meta"), ""
	})
	if s := mustRead9(t, n, "t/pubtool"); s != greetScript(1) {
		t.Fatalf("a refused publish changed t/pubtool to %q", s)
	}

	// A trusted key: unsigned is refused, -key passes.
	alice := sshKeygen(t, dir, "alice")
	runCLI(t, e, "", "trust", "-a", addr, "add", "alice", alice+".pub")
	put(3, 3)
	refused("permission denied: unsigned", meta, exe)
	idxIs("2 live", "1 old")
	pollUntil(t, 5*time.Second, "the node's log line for the unsigned publish", func() (bool, string) {
		return strings.Contains(n.p.log.String(), "refused the publish of pubtool by admin-p1: permission denied: unsigned"), ""
	})
	refused("which is not a trusted key", "-key", bob, meta, exe)
	idxIs("2 live", "1 old")
	pollUntil(t, 5*time.Second, "the node's log line for the untrusted publish", func() (bool, string) {
		return strings.Contains(n.p.log.String(), "refused the publish of pubtool by admin-p1: permission denied: signature by SHA256:"), ""
	})
	if out := published("-key", alice, meta, exe); out != "pubtool: version 3, live, signed by alice\n" {
		t.Fatalf("signed publish of a new .meta and executable: %q", out)
	}
	put(3, 4)
	if out := published("-key", alice, meta, exe); out != "pubtool: version 4, live, signed by alice\n" {
		t.Fatalf("signed publish of a new executable: %q", out)
	}
	if out := published("-key", alice, meta, exe); !strings.Contains(out, "no new version") {
		t.Fatalf("identical signed publish: %q", out)
	}
	put(5, 4)
	if out := published("-key", alice, meta); out != "pubtool: version 5, live, signed by alice\n" {
		t.Fatalf("signed publish of a .meta alone: %q", out)
	}
	idx = idxIs("5 live", "4 old", "3 old", "2 old", "1 old")
	for _, f := range idx[:3] {
		if f[5] != "alice" {
			t.Fatalf("version %s's signer is %q, want alice", f[0], f[5])
		}
	}
	pollUntil(t, 5*time.Second, "signed pubtool served", func() (bool, string) {
		s, err := read9(addr, "t/pubtool")
		return err == nil && s == greetScript(4), fmt.Sprintf("%q %v", s, err)
	})

	// -canary: the canary and the publish in one step; a node the
	// cluster does not know is refused, and nothing is published.
	put(6, 4)
	refused("invalid canary: no node nowhere", "-key", alice, "-canary", "nowhere", meta)
	idxIs("5 live", "4 old", "3 old", "2 old", "1 old")
	if out := published("-key", alice, "-canary", "p1", meta); out != "pubtool: version 6, canary, signed by alice on p1\n" {
		t.Fatalf("publish -canary: %q", out)
	}
	idxIs("6 canary", "5 live", "4 old", "3 old", "2 old", "1 old")
	if out := cliOK(t, e, "", "tool", "-a", addr, "promote", "pubtool"); !strings.Contains(out, "live everywhere as version 6") {
		t.Fatalf("promote after publish -canary: %q", out)
	}
}
