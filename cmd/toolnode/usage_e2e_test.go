//go:build linux

package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersion runs `toolnode version` on the binary the tests built.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binPath, "version").Output()
	if err != nil {
		t.Fatalf("toolnode version: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("toolnode version printed %q, want three lines", out)
	}
	if !regexp.MustCompile(`^toolnode (\(devel\)|v\S+)$`).MatchString(lines[0]) {
		t.Errorf("version line %q", lines[0])
	}
	if !regexp.MustCompile(`^commit (unknown|[0-9a-f]{40}( \S+)?( \(modified\))?)$`).MatchString(lines[1]) {
		t.Errorf("commit line %q", lines[1])
	}
	if want := "go " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH; lines[2] != want {
		t.Errorf("go line %q, want %q", lines[2], want)
	}
}

// TestSubcommandHelp checks that -h of every subcommand exits 0 with its
// synopsis and each of its flags, with the defaults that are not zero,
// and does nothing else (no key printed, no node dialled).
func TestSubcommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "-h"}, []string{"usage: toolnode [serve]", "-9p ADDR", `(default "127.0.0.1:9564")`, "-raft-commit-timeout duration", `(default 250ms)`, "-max-exec-size SIZE", "-join ADDR", "-examples"}},
		{[]string{"-h"}, []string{"usage: toolnode [serve]", "-voters int", "(default 5)"}},
		{[]string{"9p", "-h"}, []string{"usage: toolnode 9p", "-a string", `(default "127.0.0.1:9564")`, "-tls-ca string", "-token string"}},
		{[]string{"call", "-h"}, []string{"usage: toolnode call", "-a string", "-session string", "-agent string", "-token string"}},
		{[]string{"proxy", "-h"}, []string{"usage: toolnode proxy", "-listen string", `(default "127.0.0.1:9564")`, "-to string", "-insecure"}},
		{[]string{"mcp", "-h"}, []string{"usage: toolnode mcp", "-a string", "-profile string"}},
		{[]string{"token", "-h"}, []string{"usage: toolnode token", "-a string", "-data string"}},
		{[]string{"token", "new", "-h"}, []string{"usage: toolnode token [-a ADDR] [-data DIR] new", "-role string"}},
		{[]string{"token", "ls", "-h"}, []string{"usage: toolnode token [-a ADDR] [-data DIR] ls"}},
		{[]string{"token", "revoke", "-h"}, []string{"usage: toolnode token [-a ADDR] [-data DIR] revoke NAME"}},
		{[]string{"publish", "-h"}, []string{"usage: toolnode publish [-a ADDR] [-key PRIVATEKEYFILE] [-canary NODE[,NODE]] NAME.meta [EXECUTABLE]", "-a string", "-canary string", "-key string", "-token string"}},
		{[]string{"tool", "-h"}, []string{"usage: toolnode tool [-a ADDR] versions NAME | rollback NAME VERSION", "-a string", "-token string"}},
		{[]string{"trust", "-h"}, []string{"usage: toolnode trust [-a ADDR] [-key PRIVATEKEYFILE] add NAME PUBKEYFILE | ls | rm NAME", "-key string", "-token string"}},
		{[]string{"manifest", "-h"}, []string{"usage: toolnode manifest NAME.meta [EXECUTABLE]"}},
		{[]string{"sign", "-h"}, []string{"usage: toolnode sign -key PRIVATEKEYFILE NAME.meta [EXECUTABLE]", "-key string"}},
		{[]string{"keygen", "-h"}, []string{"usage: toolnode keygen"}},
		{[]string{"version", "-h"}, []string{"usage: toolnode version"}},
		{[]string{"tls", "-h"}, []string{"usage: toolnode tls ca", "toolnode tls cert"}},
		{[]string{"tls", "ca", "-h"}, []string{"usage: toolnode tls ca", "-dir string", `(default ".")`, "-days int", "(default 1825)"}},
		{[]string{"tls", "cert", "-h"}, []string{"usage: toolnode tls cert", "-node string", "-host string", "-ca string", "-ca-key string", "-days int", "(default 365)"}},
	} {
		cmd := exec.Command(binPath, c.args...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("toolnode %q: %v (stderr %q)", c.args, err, stderr.String())
			continue
		}
		if stdout.Len() != 0 {
			t.Errorf("toolnode %q printed %q on stdout; want the usage on stderr only", c.args, stdout.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("toolnode %q: no %q in\n%s", c.args, w, stderr.String())
			}
		}
	}
}

// A bad -encrypt key is refused before anything starts, naming the flag.
func TestServeRefusesBadKey(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binPath, "serve", "-encrypt", "not-a-key", "-data", t.TempDir())
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
		t.Fatalf("toolnode serve -encrypt not-a-key: exit status %d, %v; want 1", code, err)
	}
	if !strings.Contains(string(out), "-encrypt needs a base64 key of 32 bytes") {
		t.Errorf("toolnode serve -encrypt not-a-key said %q", out)
	}
}
