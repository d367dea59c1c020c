package deploy

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// toolnodeBinary builds cmd/toolnode once for the package's tests and
// returns the directory that holds it, as a PATH entry.
func toolnodeBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "deploy-toolnode-")
		if binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "toolnode"), "../cmd/toolnode").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build toolnode: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// entrypoint runs deploy/entrypoint.sh with exactly env; it returns the
// combined output and whether it exited 0.
func entrypoint(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script, err := filepath.Abs("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, append([]string{script}, args...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("entrypoint.sh %q: %v", args, err)
		}
	}
	return string(out), err == nil
}

// TestEntrypoint runs deploy/entrypoint.sh with a stand-in toolnode that
// prints its arguments.
func TestEntrypoint(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	script, err := filepath.Abs("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	fake := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(bin, "toolnode"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) []string {
		t.Helper()
		cmd := exec.Command(sh, append([]string{script}, args...)...)
		cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "HOSTNAME=box"}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("entrypoint.sh %q: %v\n%s", args, err, out)
		}
		return strings.Fields(string(out))
	}
	serve := []string{"serve", "-name", "n", "-advertise", "n"}
	tests := []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, serve, serve},
		{[]string{gossipKeyVar + "="}, serve, serve},
		// The key goes in the environment, never on the command line.
		{[]string{gossipKeyVar + "=a2V5"}, serve, serve},
		{nil, []string{"-name", "n"}, []string{"serve", "-name", "n", "-advertise", "box"}},
		{nil, []string{"-advertise=x"}, []string{"serve", "-advertise=x"}},
		{nil, nil, []string{"serve", "-advertise", "box"}},
		{[]string{gossipKeyVar + "=a2V5"}, []string{"9p", "read", "node"}, []string{"9p", "read", "node"}},
	}
	for _, tc := range tests {
		if got := run(tc.env, tc.args...); !slices.Equal(got, tc.want) {
			t.Errorf("env %q, entrypoint.sh %q: toolnode %q, want %q", tc.env, tc.args, got, tc.want)
		}
	}
}

// TestEntrypointSecrets runs the entrypoint's secrets step with the real
// binary: the CA's key and the gossip key stay in the CA's directory; each
// node's directory holds the gossip key, the CA's certificate and that
// node's certificate and key, nothing else; a second run changes nothing
// and adds what a new node needs. Then its serve step, with a stand-in
// that prints its arguments and the key it was given: the node gets the
// key in its environment and its own certificates as flags.
func TestEntrypointSecrets(t *testing.T) {
	bin := toolnodeBinary(t)
	dir := t.TempDir()
	secrets, ca := filepath.Join(dir, "secrets"), filepath.Join(dir, "ca")
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOSTNAME=box", "TOOLNODE_SECRETS=" + secrets, "TOOLNODE_CA_DIR=" + ca,
		fmt.Sprintf("TOOLNODE_SECRETS_OWNER=%d:%d", os.Getuid(), os.Getgid())}
	run := func(env []string, args ...string) string {
		t.Helper()
		out, ok := entrypoint(t, env, args...)
		if !ok {
			t.Fatalf("entrypoint.sh %q failed:\n%s", args, out)
		}
		return out
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// files reads every file of a node's directory, checking that nobody
	// else may read it.
	files := func(node string) map[string]string {
		t.Helper()
		d := filepath.Join(secrets, node)
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v: want a directory of mode 0700", d, fi, err)
		}
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s/%s has mode %v: others may read it", d, e.Name(), fi.Mode().Perm())
			}
			out[e.Name()] = read(filepath.Join(d, e.Name()))
		}
		return out
	}
	keysOf := func(m map[string]string) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}

	run(env, "secrets", "n1", "n2")
	key := read(filepath.Join(ca, "gossip.key"))
	if len(strings.TrimSpace(key)) != 44 {
		t.Fatalf("gossip.key %q", key)
	}
	caCert := read(filepath.Join(ca, "toolnode-ca.pem"))
	read(filepath.Join(ca, "toolnode-ca-key.pem"))
	before := map[string]map[string]string{}
	for _, n := range []string{"n1", "n2"} {
		f := files(n)
		want := []string{"gossip.key", n + "-key.pem", n + ".pem", "toolnode-ca.pem"}
		if got := keysOf(f); !slices.Equal(got, want) {
			t.Errorf("secrets/%s holds %q, want only %q", n, got, want)
		}
		if f["gossip.key"] != key || f["toolnode-ca.pem"] != caCert {
			t.Errorf("secrets/%s: another gossip key or CA than the CA directory's", n)
		}
		before[n] = f
	}
	if before["n1"]["n1-key.pem"] == before["n2"]["n2-key.pem"] {
		t.Error("n1 and n2 have the same key")
	}

	// A second run keeps everything; a new node gets the same key and CA.
	run(env, "secrets", "n1", "n2", "n3")
	for n, f := range before {
		if after := files(n); !maps(after, f) {
			t.Errorf("a second secrets step changed secrets/%s", n)
		}
	}
	if f := files("n3"); f["gossip.key"] != key || f["toolnode-ca.pem"] != caCert || f["n3.pem"] == "" {
		t.Errorf("secrets/n3 after a later run: %q", keysOf(f))
	}
	if out, ok := entrypoint(t, env, "secrets", "../n1"); ok || !strings.Contains(out, "not a node name") {
		t.Errorf("secrets ../n1: ok=%v, %s", ok, out)
	}

	fake := t.TempDir()
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\nprintf 'KEY=%s\\n' \"$TOOLNODE_GOSSIP_KEY\"\n"
	if err := os.WriteFile(filepath.Join(fake, "toolnode"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The node's container mounts its own directory as the secrets.
	own := filepath.Join(secrets, "n1")
	fenv := []string{"PATH=" + fake + ":/usr/bin:/bin", "HOSTNAME=box", "TOOLNODE_SECRETS=" + own}
	got := strings.Fields(run(fenv, "serve", "-name", "n1", "-advertise", "n1"))
	want := []string{"serve", "-name", "n1", "-advertise", "n1",
		"-tls-cert", own + "/n1.pem", "-tls-key", own + "/n1-key.pem", "-tls-ca", own + "/toolnode-ca.pem",
		"-9p-tls-cert", own + "/n1.pem", "-9p-tls-key", own + "/n1-key.pem",
		"KEY=" + strings.TrimSpace(key)}
	if !slices.Equal(got, want) {
		t.Errorf("serve with secrets: toolnode %q, want %q", got, want)
	}
	if slices.Contains(got, "-encrypt") {
		t.Error("the key is on the command line")
	}
	// Control: a node finds no certificate of another name in them.
	got = strings.Fields(run(fenv, "serve", "-name", "n2", "-advertise", "n2"))
	if slices.Contains(got, "-tls-cert") {
		t.Errorf("serve of n2 with n1's secrets: %q", got)
	}
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// freeAddr is a loopback address nothing listens on (at the time).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// served is a node started by startServe.
type served struct {
	p9, data string
	log      *bytes.Buffer
}

// startServe runs the real toolnode serve with directories of its own,
// -metrics metrics, the tools of tools ("" for none) and env beside HOME
// and PATH; it is stopped with SIGTERM at the test's end.
func startServe(t *testing.T, bin, name, metrics, tools string, env []string, extra ...string) served {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"data", "tools", "agents", "home"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if tools != "" {
		metas, err := filepath.Glob(filepath.Join(tools, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range metas {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "tools", filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := served{p9: freeAddr(t), data: filepath.Join(dir, "data"), log: &bytes.Buffer{}}
	args := append([]string{"serve", "-name", name, "-data", n.data,
		"-tools", filepath.Join(dir, "tools"), "-agents", filepath.Join(dir, "agents"),
		"-9p", n.p9, "-gossip", freeAddr(t), "-cluster", freeAddr(t), "-metrics", metrics}, extra...)
	cmd := exec.Command(filepath.Join(bin, "toolnode"), args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(dir, "home")}, env...)
	cmd.Stdout, cmd.Stderr = n.log, n.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop within 10 s of SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, n.log.String())
		}
	})
	return n
}

// TestEntrypointHealth runs the image's health check against real nodes:
// it needs no token, is healthy on a node that is ready, and unhealthy,
// saying why, on one that runs but has no leader (a joiner whose -join
// finds nobody) and where nothing listens.
func TestEntrypointHealth(t *testing.T) {
	bin := toolnodeBinary(t)
	health := func(addr, path string) (string, bool) {
		t.Helper()
		return entrypoint(t, []string{"PATH=/usr/bin:/bin", "TOOLNODE_HEALTH_ADDR=" + addr}, "health", path)
	}
	// poll runs the check until it reports want, within a deadline.
	poll := func(addr, path string, want bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, ok := health(addr, path)
			if ok == want {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("health %s on %s: still ok=%v after 30 s: %s", path, addr, ok, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	boot := freeAddr(t)
	startServe(t, bin, "h1", boot, "", nil)
	if out := poll(boot, "/readyz", true); !strings.Contains(out, "/readyz 200") {
		t.Errorf("health of a ready node: %s", out)
	}

	alone := freeAddr(t)
	// A node that joins needs the cluster's credential.
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	startServe(t, bin, "h2", alone, "", []string{"TOOLNODE_GOSSIP_KEY=" + key}, "-join", freeAddr(t))
	poll(alone, "/healthz", true)
	out, ok := health(alone, "/readyz")
	if ok || !strings.Contains(out, "/readyz 503") || !strings.Contains(out, "not ready") {
		t.Errorf("health of a node with no leader: ok=%v, %s", ok, out)
	}
	t.Logf("a node with no leader: %s", out)

	none := freeAddr(t)
	if out, ok := health(none, "/readyz"); ok || !strings.Contains(out, "nothing answers on "+none) {
		t.Errorf("health where nothing listens: ok=%v, %s", ok, out)
	}
}

// TestSiteTool runs deploy/tools/site on a real node whose environment
// has SITE, as compose's node4: with -tool-env SITE the
// sandboxed tool prints the site; the control, without it, shows the tool
// listed but printing an empty line, since the sandbox passes tools only
// the variables it allows.
func TestSiteTool(t *testing.T) {
	bin := toolnodeBinary(t)
	site := func(name string, extra ...string) string {
		t.Helper()
		metrics := freeAddr(t)
		n := startServe(t, bin, name, metrics, "tools", []string{"SITE=edge"}, extra...)
		deadline := time.Now().Add(30 * time.Second)
		for {
			var out []byte
			var err error
			if tok, rerr := os.ReadFile(filepath.Join(n.data, "admin.token")); rerr == nil {
				cmd := exec.Command(filepath.Join(bin, "toolnode"), "call", "-a", n.p9, "site", "{}")
				cmd.Env = []string{"PATH=/usr/bin:/bin", "TOOLNODE_TOKEN=" + strings.TrimSpace(string(tok))}
				out, err = cmd.CombinedOutput()
				if err == nil {
					return string(out)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: call site: %v, %s", name, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if got := site("edge1", "-tool-env", "SITE"); got != "edge\n" {
		t.Errorf("site with -tool-env SITE: %q, want \"edge\\n\"", got)
	}
	if got := site("edge2"); got != "\n" {
		t.Errorf("control, site without -tool-env: %q, want an empty line", got)
	}
}
