package main

// What a tool can read and see, through a real node process: the gossip
// key in its environment and in the node's /proc/PID/environ, the node's
// data directory, the node user's ~/.ssh, and a stored executable changed
// behind the node's back.
// Each probe runs under the default sandbox and must fail, and under
// -yolo (the control) must succeed.

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testcluster"
)

// startWith runs a node on e with environ and extra flags, and waits
// until its 9P port answers.
func (e *env) startWith(t *testing.T, environ []string, extra ...string) *proc {
	t.Helper()
	p := e.spawn(t, "e2e", environ, extra...)
	waitPort(t, p, e.p9)
	return p
}

// sandboxProbes are the probe tools: each prints what it could get, and
// fails when it gets nothing.
func sandboxProbes(data, home string) map[string]string {
	return map[string]string{
		// The gossip key among the tool's own variables.
		"probe_env": `env | grep TOOLNODE_GOSSIP_KEY=`,
		// The node's environment as the kernel keeps it.
		"probe_environ": `tr '\0' '\n' < /proc/$PPID/environ | grep TOOLNODE_GOSSIP_KEY=`,
		// The node's data directory: the Raft log and its listing.
		"probe_data": fmt.Sprintf(`ls %q && cat %q/raft/* | head -c 16 | od -c`, data, data),
		// The node user's ssh key.
		"probe_ssh": fmt.Sprintf(`cat %q/.ssh/id_ed25519`, home),
		// Another tool's stored executable in the data directory.
		"probe_overwrite": fmt.Sprintf(`for f in %q/blobs/sha256/*; do printf '#!/bin/sh\necho changed\n' > "$f" || exit 1; done; echo overwritten`, data),
	}
}

func TestSandboxEndToEnd(t *testing.T) {
	key := make([]byte, 32)
	rand.Read(key)
	secret := base64.StdEncoding.EncodeToString(key)
	for _, yolo := range []bool{false, true} {
		name := "sandboxed"
		if yolo {
			name = "control_yolo"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			home := filepath.Join(e.root, "home")
			if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("SSH KEY"), 0o600); err != nil {
				t.Fatal(err)
			}
			for tool, script := range sandboxProbes(e.data, home) {
				writeProbe(t, e.tools, tool, script)
			}
			var extra []string
			if yolo {
				extra = append(extra, "-yolo")
			}
			node := e.startWith(t, append(e.childEnv(), "TOOLNODE_GOSSIP_KEY="+secret, "HOME="+home), extra...)
			if !yolo {
				node.waitLog(t, 10*time.Second, "tools run with: landlock ABI", "files: read all but", "digest checked")
			}
			fsys := attach9(t, e.p9)
			defer fsys.Close()
			mustAsk(t, fsys, "session/new", "name=probe")
			mustAsk(t, fsys, "session/probe/agent/new", "name=p")
			const agent = "session/probe/agent/p/"
			// A published executable, materialised in the data directory.
			if err := rtPut(fsys, "t/pub", 0o755, "#!/bin/sh\necho published\n"); err != nil {
				t.Fatal(err)
			}
			if err := rtPut(fsys, "t/pub.meta", 0o644, `{"description":"published"}`); err != nil {
				t.Fatal(err)
			}
			tools := []string{"pub"}
			for tool := range sandboxProbes(e.data, home) {
				tools = append(tools, tool)
			}
			// The probes are published from the tools directory shortly
			// after the start.
			for _, tool := range tools {
				testcluster.Until(t, 30*time.Second, "tool_load "+tool, func() (bool, string) {
					_, err := ask(fsys, agent+"ctl", "tool_load "+tool)
					return err == nil, fmt.Sprint(err)
				})
			}
			if got := mustAsk(t, fsys, agent+"call", "pub {}"); got != "published\n" {
				t.Fatalf("pub = %q", got)
			}

			for _, tool := range []string{"probe_env", "probe_environ", "probe_data", "probe_ssh", "probe_overwrite"} {
				out, err := ask(fsys, agent+"call", tool+" {}")
				switch {
				case yolo && err != nil:
					t.Errorf("control: %s failed, so the sandboxed test would pass vacuously: %v", tool, err)
				case !yolo && err == nil:
					t.Errorf("%s escaped the sandbox: %q", tool, out)
				case !yolo && strings.Contains(out+fmt.Sprint(err), secret):
					t.Errorf("%s: the gossip key leaked: %q %v", tool, out, err)
				case !yolo && (tool == "probe_data" || tool == "probe_ssh" || tool == "probe_overwrite") && !strings.Contains(err.Error(), "ermission denied"):
					t.Errorf("%s failed, but not for the sandbox: %v", tool, err)
				}
			}
			if !yolo {
				if got := mustAsk(t, fsys, agent+"call", "pub {}"); got != "published\n" {
					t.Errorf("pub after the sandboxed overwrite attempt = %q", got)
				}
				return
			}
			// The control changed the stored executable: the node checks
			// its digest, refuses to run it, logs why, removes it and
			// fetches it again from another node.
			_, err := ask(fsys, agent+"call", "pub {}")
			if err == nil || !strings.Contains(err.Error(), "digest") {
				t.Errorf("a changed executable ran, or failed without naming its digest: %v", err)
			}
			node.waitLog(t, 10*time.Second, "does not match", "fetching it again")
			// A lone node has no other copy: the call says the executable
			// is not fetched yet, and a new publication restores it.
			if _, err := ask(fsys, agent+"call", "pub {}"); err == nil || !strings.Contains(err.Error(), "not yet fetched") {
				t.Errorf("pub with its executable gone from the only node: %v", err)
			}
			if err := rtPut(fsys, "t/pub", 0o755, "#!/bin/sh\necho published\n"); err != nil {
				t.Fatal(err)
			}
			if got := mustAsk(t, fsys, agent+"call", "pub {}"); got != "published\n" {
				t.Errorf("pub after it was published again = %q", got)
			}
		})
	}
}

func writeProbe(t *testing.T, dir, name, script string) {
	t.Helper()
	meta := fmt.Sprintf(`{"description": "sandbox probe %s"}`, name)
	if err := os.WriteFile(filepath.Join(dir, name+".meta"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
