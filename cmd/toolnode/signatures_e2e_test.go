//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sshKeygen makes an ed25519 key pair with OpenSSH's ssh-keygen in dir
// and returns the private key's path (the public key is PATH.pub).
func sshKeygen(t *testing.T, dir, name string) string {
	t.Helper()
	bin, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen (openssh-client) is not installed; .ci/run installs it")
	}
	priv := filepath.Join(dir, name)
	if out, err := exec.Command(bin, "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", priv).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	return priv
}

// sshSignFile signs file with ssh-keygen -Y sign -n toolnode, which
// writes FILE.sig, and returns the signature.
func sshSignFile(t *testing.T, priv, file string) []byte {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-n", "toolnode", "-f", priv, file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v\n%s", err, out)
	}
	sig, err := os.ReadFile(file + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// inIdx9 reports whether n's t/idx lists tool.
func inIdx9(n *cnode, tool string) (bool, string) {
	s, err := read9(n.e.p9, "t/idx")
	return err == nil && strings.Contains(s, tool+"\t"), fmt.Sprint(s, err)
}

// Signatures on three real nodes (DESIGN §8): with no key trusted an
// unsigned tool from a tools directory is served (the control); once
// toolnode trust add has trusted a key, it leaves every t/, and a tools
// directory's tool is published only with a NAME.sig made by the real
// ssh-keygen -Y sign -n toolnode over the manifest toolnode manifest
// prints; unsigned and tampered publishes, from the directory or over
// 9P, are refused with a log line; a second key is added signed by the
// first; removing the first stops the calls of what it signed within 3 s.
func TestE2E_Signatures(t *testing.T) {
	t.Parallel()
	keys := t.TempDir()
	alice := sshKeygen(t, keys, "alice")
	bob := sshKeygen(t, keys, "bob")
	n1 := newCnode(t, "s1")
	n2 := newCnode(t, "s2").joining(n1)
	n3 := newCnode(t, "s3").joining(n1)
	nodes := []*cnode{n1, n2, n3}
	writeFile(t, filepath.Join(n1.e.tools, "hello"), "#!/bin/sh\necho unsigned hello\n", 0o755)
	writeFile(t, filepath.Join(n1.e.tools, "hello.meta"), `{"description": "unsigned"}`+"\n", 0o644)
	n1.launch(t)
	n1.waitServing(t, 30*time.Second)
	n2.launch(t)
	n3.launch(t)
	waitFormed(t, 30*time.Second, nodes...)

	// Control: no key trusted, the unsigned tool is served everywhere.
	pollUntil(t, 10*time.Second, "unsigned hello on s3", func() (bool, string) { return inIdx9(n3, "hello") })

	// The first key, through the CLI on s2; trust/idx on s3.
	out := runCLI(t, n2.e, "", "trust", "-a", n2.e.p9, "add", "alice", alice+".pub")
	if f := strings.Fields(out); len(f) != 2 || f[0] != "alice" || !strings.HasPrefix(f[1], "SHA256:") {
		t.Fatalf("toolnode trust add alice: %q", out)
	}
	fp := strings.Fields(out)[1]
	kg, err := exec.Command("ssh-keygen", "-l", "-f", alice+".pub").Output()
	if err != nil || !strings.Contains(string(kg), " "+fp+" ") {
		t.Fatalf("the fingerprint %s is not ssh-keygen -l's %q (%v)", fp, kg, err)
	}
	pollUntil(t, 3*time.Second, "alice in s3's trust", func() (bool, string) {
		s := runCLI(t, n3.e, "", "trust", "-a", n3.e.p9, "ls")
		return s == "alice "+fp+"\n", s
	})
	// The tool published unsigned before the key leaves every t/.
	for _, n := range nodes {
		pollUntil(t, 3*time.Second, "unsigned hello gone from "+n.name, func() (bool, string) {
			in, s := inIdx9(n, "hello")
			return !in, s
		})
	}
	pollUntil(t, 5*time.Second, "s1's log line naming hello", func() (bool, string) {
		return strings.Contains(n1.p.log.String(), "tool hello is not served or run here: permission denied: version 1 of tool \\\"hello\\\" is unsigned"), ""
	})

	// A tool with NAME.sig by ssh-keygen over toolnode manifest's output.
	greet := filepath.Join(n1.e.tools, "greet")
	writeFile(t, greet, "#!/bin/sh\necho signed greet\n", 0o755)
	writeFile(t, greet+".meta", `{"description": "signed by alice"}`+"\n", 0o644)
	manifest := runCLI(t, n1.e, "", "manifest", greet+".meta")
	if !strings.HasPrefix(manifest, "toolnode-tool-v1\ngreet\n") || strings.Count(manifest, "\n") != 4 || strings.HasSuffix(manifest, "\n-\n") {
		t.Fatalf("toolnode manifest greet.meta = %q", manifest)
	}
	mf := filepath.Join(keys, "greet.manifest")
	writeFile(t, mf, manifest, 0o644)
	writeFile(t, greet+".sig", string(sshSignFile(t, alice, mf)), 0o644)
	// A tampered one: signed over greet's manifest, published as other
	// bytes; an unsigned one.
	bad := filepath.Join(n1.e.tools, "bad")
	writeFile(t, bad+".meta", `{"description": "tampered", "cmd": "echo tampered"}`+"\n", 0o644)
	writeFile(t, bad+".sig", string(sshSignFile(t, alice, mf)), 0o644)
	writeFile(t, filepath.Join(n1.e.tools, "nosig.meta"), `{"description": "unsigned", "cmd": "echo unsigned"}`+"\n", 0o644)

	pollUntil(t, 10*time.Second, "signed greet on s3", func() (bool, string) { return inIdx9(n3, "greet") })
	if idx := mustRead9(t, n3, "v/greet/idx"); !strings.HasPrefix(idx, "1 live node:s1 ") || !strings.HasSuffix(idx, " alice\n") {
		t.Fatalf("v/greet/idx on s3 = %q", idx)
	}
	pollUntil(t, 5*time.Second, "the refusals of bad and nosig in s1's log", func() (bool, string) {
		l := n1.p.log.String()
		return strings.Contains(l, "tools: bad is not published: permission denied: signature") &&
			strings.Contains(l, "tools: nosig is not published: permission denied: unsigned"), ""
	})
	for _, name := range []string{"bad", "nosig", "hello"} {
		if in, s := inIdx9(n3, name); in {
			t.Fatalf("%s is served on s3:\n%s", name, s)
		}
	}

	// Over 9P on s2: unsigned refused, nothing published.
	c, err := dial9(n2.e.p9, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := put9Big(n2, "t/viap.meta", []byte(`{"description": "9p", "cmd": "echo 9p"}`)); err == nil || !strings.Contains(err.Error(), "permission denied: unsigned") {
		t.Fatalf("an unsigned publish over 9P: %v", err)
	}
	if in, s := inIdx9(n2, "viap"); in {
		t.Fatalf("a refused publish is served:\n%s", s)
	}

	// The call of the signed tool runs on s3.
	mustAsk9(t, n3, "session/new", "name=sig")
	mustAsk9(t, n3, "session/sig/agent/new", "name=a")
	mustAsk9(t, n3, "session/sig/agent/a/tools", "greet")
	if got := mustAsk9(t, n3, "session/sig/agent/a/call", "greet"); got != "signed greet\n" {
		t.Fatalf("greet on s3 = %q", got)
	}

	// bob, added with a change signed by alice; alice's removal signed
	// by bob stops greet's calls within 3 s.
	if r := runCLIResult(t, n2.e, "", "trust", "-a", n2.e.p9, "add", "bob", bob+".pub"); r.code == 0 || !strings.Contains(r.stderr, "permission denied: unsigned") {
		t.Fatalf("an unsigned second key: %+v", r)
	}
	runCLI(t, n2.e, "", "trust", "-a", n2.e.p9, "add", "-key", alice, "bob", bob+".pub")
	runCLI(t, n2.e, "", "trust", "-a", n2.e.p9, "rm", "-key", bob, "alice")
	begin := time.Now()
	pollUntil(t, 3*time.Second, "greet's calls refused on s3", func() (bool, string) {
		_, err := ask9(n3.e.p9, "session/sig/agent/a/call", "greet", 5*time.Second)
		return err != nil && strings.Contains(err.Error(), "signer alice is not trusted"), fmt.Sprint(err)
	})
	t.Logf("calls of alice's tool refused %v after her key's removal", time.Since(begin).Round(time.Millisecond))

	// toolnode sign with bob's key: greet published again, served again.
	runCLI(t, n1.e, "", "sign", "-key", bob, greet+".meta")
	pollUntil(t, 10*time.Second, "greet signed by bob on s3", func() (bool, string) {
		idx, err := read9(n3.e.p9, "v/greet/idx")
		return err == nil && strings.HasPrefix(idx, "2 live ") && strings.Contains(idx, " bob\n"), idx
	})
	pollUntil(t, 5*time.Second, "greet's call on s3 again", func() (bool, string) {
		got, err := ask9(n3.e.p9, "session/sig/agent/a/call", "greet", 5*time.Second)
		return err == nil && got == "signed greet\n", fmt.Sprint(got, err)
	})
}
