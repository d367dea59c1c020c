//go:build linux

// The README's examples of the client and of publishing, run as written
// against a node process: a README that no longer matches the binary
// fails here.

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testport"
)

// readmeBlocks returns the ```sh blocks of the README section that starts
// with heading.
func readmeBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	sec := readme[i+len(heading)+2:]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	var blocks []string
	for {
		start := strings.Index(sec, "```sh\n")
		if start < 0 {
			break
		}
		sec = sec[start+len("```sh\n"):]
		end := strings.Index(sec, "```")
		if end < 0 {
			t.Fatalf("section %q: an unterminated code block", heading)
		}
		blocks = append(blocks, sec[:end])
		sec = sec[end+3:]
	}
	if len(blocks) == 0 {
		t.Fatalf("section %q has no sh block", heading)
	}
	return blocks
}

func TestREADMEExamples(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	e := newEnv(t)
	node := e.start(t)

	// The examples call `toolnode` and address the default port: the
	// binary under test comes first in PATH, and the node's address
	// replaces the default. They run as the node's own user, whose
	// default data directory holds the admin token.
	environ := append(e.clientEnv(t), "TOOLNODE_ADDR="+e.p9)
	for i, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			environ[i] = "PATH=" + filepath.Dir(binPath) + ":" + v
		}
	}
	run := func(t *testing.T, dir, script string) string {
		t.Helper()
		script = strings.ReplaceAll(script, "127.0.0.1:9564", e.p9)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-x", "-c", script)
		cmd.Dir, cmd.Env = dir, environ
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\nscript:\n%s\nstdout:\n%s\nstderr (with the commands run):\n%s", err, script, stdout.String(), stderr.String())
		}
		for _, line := range lines(stderr.String()) {
			if !strings.HasPrefix(line, "+") {
				t.Errorf("the example wrote to stderr: %q", line)
			}
		}
		return stdout.String()
	}

	t.Run("client", func(t *testing.T) {
		// Run from the checkout: the call reads its README.md.
		out := run(t, root, readmeBlocks(t, readme, "## The client")[0])
		for _, want := range []string{"cluster/\n", "echo\t", "dev\n", "coder/\n", "# toolnode\n", "json_query"} {
			if !strings.Contains(out, want) {
				t.Errorf("the client example printed no %q:\n%s", want, out)
			}
		}
	})
	t.Run("publishing", func(t *testing.T) {
		out := run(t, t.TempDir(), readmeBlocks(t, readme, "## Publishing")[0])
		if !strings.HasSuffix(out, "hello\n") {
			t.Errorf("the publishing example printed %q, want it to end with hello from the published tool", out)
		}
		if got := cliOK(t, e, "", "9p", e.p9, "read", "a/helper.json"); !strings.Contains(got, `"autoLoad": ["hello"]`) {
			t.Errorf("a/helper.json = %q", got)
		}
	})
	// Last: it trusts a key, after which unsigned publishes are refused.
	t.Run("rolling out", func(t *testing.T) {
		if _, err := exec.LookPath("ssh-keygen"); err != nil {
			t.Skip("ssh-keygen (openssh-client) is not installed; .ci/run installs it")
		}
		out := run(t, t.TempDir(), readmeBlocks(t, readme, "## Rolling out a tool")[0])
		for _, want := range []string{"greet: version 1, live\n", "greet: version 2, live\n", "live as version 3\n", "greet: version 4, live, signed by alice\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("the rolling-out example printed no %q:\n%s", want, out)
			}
		}
		if !strings.HasSuffix(out, "hi v2\n") {
			t.Errorf("the rolling-out example printed %q, want it to end with hi v2 from the signed version", out)
		}
	})
	node.stop(t)
	checkLog(t, "e2e", node.log.String())
}

// The README's cluster of three on one machine, run as written but for
// its nine ports, which are swapped for free ones. The script starts the
// nodes in the background and kills them at its end; the trap kills them
// when it fails before.
func TestREADMEThreeNodes(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := readmeBlocks(t, string(b), "## A three-node cluster on one machine")[0]
	ports := testport.Pick(t, 9)
	for i, p := range []string{"9564", "7946", "9565", "9574", "7956", "9575", "9584", "7966", "9585"} {
		if !strings.Contains(script, "127.0.0.1:"+p) {
			t.Fatalf("the README's cluster of three no longer uses 127.0.0.1:%s:\n%s", p, script)
		}
		script = strings.ReplaceAll(script, "127.0.0.1:"+p, ports[i])
	}
	e := newEnv(t)
	environ := append(e.childEnv(), "TMPDIR="+t.TempDir())
	for i, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			environ[i] = "PATH=" + filepath.Dir(binPath) + ":" + v
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"+script)
	cmd.Dir, cmd.Env = t.TempDir(), environ
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The nodes run in the script's process group: a script cut short
	// by the deadline takes them with it, and its output is not waited
	// for past WaitDelay.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nscript:\n%s\nstdout:\n%s\nstderr:\n%s", err, script, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"n1 ", " leader ", "n2 ", "n3 ", " voter ", "\nhi\n"} {
		if !strings.Contains("\n"+out, want) {
			t.Errorf("the cluster of three printed no %q:\n%s\nstderr:\n%s", want, out, stderr.String())
		}
	}
}
