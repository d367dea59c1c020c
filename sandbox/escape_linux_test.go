//go:build linux

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Each test here is an escape a tool could once make. The probe runs as a
// real tool under the real sandbox and must be denied; the same probe
// under -yolo (the control) must succeed, so no test passes vacuously.

// escapeRunners returns a sandboxed runner and its -yolo twin, both
// configured by mod.
func escapeRunners(t *testing.T, mod func(*testConfig)) (sandboxed, yolo *testSandbox) {
	t.Helper()
	sandboxed = newTestSandbox(t, mod)
	yolo = newTestSandbox(t, func(c *testConfig) {
		if mod != nil {
			mod(c)
		}
		c.Off = true
	})
	return sandboxed, yolo
}

// probeCmd is the shell command that runs the test binary as a probe tool.
func probeCmd(what string, args ...string) string {
	q := []string{shQuote(os.Args[0]), "probe", what}
	for _, a := range args {
		q = append(q, shQuote(a))
	}
	return strings.Join(q, " ")
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// escape runs cmd under both runners: the sandboxed run must fail, the
// yolo run must succeed. It returns the control's output.
func escape(t *testing.T, sandboxed, yolo *testSandbox, cmd, cwd string) string {
	t.Helper()
	inv := tool{Cmd: cmd, Cwd: cwd}
	out, err := yolo.run(context.Background(), inv)
	if err != nil {
		t.Fatalf("control (-yolo): the probe %q failed, so the test would pass vacuously: %v", cmd, err)
	}
	got, err := sandboxed.run(context.Background(), inv)
	var ee *exitError
	if !errors.As(err, &ee) {
		t.Fatalf("sandboxed: the probe %q succeeded (output %q, err %v)", cmd, got, err)
	}
	return string(out)
}

// allowed runs cmd sandboxed and requires it to succeed: the sandbox must
// not take more than it says.
func allowed(t *testing.T, r *testSandbox, cmd, cwd string) string {
	t.Helper()
	out, err := r.run(context.Background(), tool{Cmd: cmd, Cwd: cwd})
	if err != nil {
		t.Fatalf("sandboxed: %q was denied but must be allowed: %v", cmd, err)
	}
	return string(out)
}

func TestCheckToolEnv(t *testing.T) {
	for _, ok := range [][]string{nil, {"AWS_PROFILE"}, {"GH_*", "_X1"}} {
		if err := CheckToolEnv(ok); err != nil {
			t.Errorf("CheckToolEnv(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"TOOLNODE_GOSSIP_KEY", "TOOLNODE_*", "", "*", "1X", "A-B", "A=B"} {
		if err := CheckToolEnv([]string{bad}); err == nil || !strings.Contains(err.Error(), "-tool-env") {
			t.Errorf("CheckToolEnv(%q) = %v, want a -tool-env error", bad, err)
		}
	}
	// A prefix never matches the node's own variables.
	if EnvAllowed("TOOLNODE_GOSSIP_KEY", []string{"T*"}) {
		t.Error("the prefix T* passed TOOLNODE_GOSSIP_KEY")
	}
}

// dataFixture makes a data directory, a key next to a public file, and a
// home with credentials, and returns their paths.
func dataFixture(t *testing.T) (data, keys, home string) {
	root := t.TempDir()
	data, keys, home = filepath.Join(root, "data"), filepath.Join(root, "etc"), filepath.Join(root, "home")
	writeFile(t, filepath.Join(data, "raft"), "wal-00001", "raft log", 0o600)
	writeFile(t, data, "peers.json", `["10.0.0.2:7946"]`, 0o600)
	writeFile(t, filepath.Join(data, "exec"), "3f5a", "#!/bin/sh\necho published\n", 0o755)
	writeFile(t, keys, "node.key", "PRIVATE KEY", 0o600)
	writeFile(t, keys, "motd", "public", 0o644)
	writeFile(t, filepath.Join(home, ".ssh"), "id_ed25519", "SSH KEY", 0o600)
	writeFile(t, home, ".profile", "PS1=x", 0o644)
	return data, keys, home
}

func TestEscape_ProtectedFiles(t *testing.T) {
	data, keys, home := dataFixture(t)
	sb, yolo := escapeRunners(t, func(c *testConfig) {
		c.Protected = []string{data, filepath.Join(keys, "node.key"), filepath.Join(home, ".ssh"), filepath.Join(home, ".aws")}
	})
	for _, probe := range []string{
		fmt.Sprintf("cat %q", filepath.Join(data, "peers.json")),
		fmt.Sprintf("cat %q", filepath.Join(data, "raft", "wal-00001")),
		fmt.Sprintf("ls %q", data),
		fmt.Sprintf("cat %q", filepath.Join(keys, "node.key")),
		fmt.Sprintf("cat %q", filepath.Join(home, ".ssh", "id_ed25519")),
		fmt.Sprintf("ls %q", sb.cfg.ScratchDir),
	} {
		t.Run(probe, func(t *testing.T) { escape(t, sb, yolo, probe, "") })
	}
	// Not more than that: the rest stays readable and executable.
	allowed(t, sb, fmt.Sprintf("cat %q %q /etc/passwd >/dev/null && ls /usr/bin >/dev/null", filepath.Join(keys, "motd"), filepath.Join(home, ".profile")), "")

	// The layout changes: a directory made next to a protected path after
	// the rules were built is readable; a protected path made after it is
	// not.
	writeFile(t, filepath.Join(keys, "new"), "f", "fresh", 0o644)
	if out := allowed(t, sb, fmt.Sprintf("cat %q", filepath.Join(keys, "new", "f")), ""); out != "fresh" {
		t.Errorf("read %q", out)
	}
	writeFile(t, filepath.Join(home, ".aws"), "credentials", "AWS KEY", 0o600)
	escape(t, sb, yolo, fmt.Sprintf("cat %q", filepath.Join(home, ".aws", "credentials")), "")
}

func TestEscape_ProtectedThroughSymlink(t *testing.T) {
	// A protected path named through a symbolic link is protected where
	// it really is, and a link to it does not open it.
	data, _, _ := dataFixture(t)
	link := filepath.Join(t.TempDir(), "data-link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	sb, yolo := escapeRunners(t, func(c *testConfig) { c.Protected = []string{link} })
	escape(t, sb, yolo, fmt.Sprintf("cat %q", filepath.Join(data, "peers.json")), "")
	escape(t, sb, yolo, fmt.Sprintf("cat %q", filepath.Join(link, "peers.json")), "")
}

// The node's own process: its descriptors, signals and ptrace.
func TestEscape_NodeProcess(t *testing.T) {
	data, _, _ := dataFixture(t)
	sb, yolo := escapeRunners(t, func(c *testConfig) { c.Protected = []string{data} })
	other := exec.Command("sleep", "60") // a process outside every call
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	// A file of the data directory the node holds open: /proc/PID/fd/N
	// reopens it, and the file rules still apply.
	held, err := os.Open(filepath.Join(data, "peers.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, probe := range []string{
		fmt.Sprintf(`cat /proc/$PPID/fd/%d`, held.Fd()),
		`kill -0 $PPID`,
		fmt.Sprintf(`kill -0 %d`, other.Process.Pid),
		probeCmd("ptrace", fmt.Sprint(other.Process.Pid)),
	} {
		t.Run(probe, func(t *testing.T) {
			if strings.Contains(probe, "kill") && scopes(mustABI(t)) == 0 {
				t.Skip("this kernel cannot scope signals (Landlock ABI < 6)")
			}
			escape(t, sb, yolo, probe, "")
		})
	}
	// The tool still sees and signals its own processes.
	allowed(t, sb, `sleep 5 & kill $! && cat /proc/self/environ >/dev/null`, "")
}

// The node's environment as the kernel shows it in /proc/PID/environ,
// where a gossip key given in TOOLNODE_GOSSIP_KEY would be. Landlock does
// not stop a tool reading it, so the node blanks it (HideEnviron).
func TestEscape_NodeEnviron(t *testing.T) {
	sb, yolo := escapeRunners(t, nil)
	probe := `grep -a -q PATH= /proc/$PPID/environ`
	allowed(t, yolo, probe, "") // control: readable before
	if err := HideEnviron(); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.run(context.Background(), tool{Cmd: probe}); err == nil {
		t.Fatal("the node's environment is still readable in /proc/PID/environ")
	}
	if os.Getenv("PATH") == "" {
		t.Error("HideEnviron emptied the runtime's copy of the environment")
	}
}

func mustABI(t *testing.T) int {
	abi, err := Status()
	if err != nil {
		t.Skip(err)
	}
	return abi
}

// Another call: its scratch directory, its /proc, its processes.
func TestEscape_OtherCall(t *testing.T) {
	sb, yolo := escapeRunners(t, nil)
	shared := t.TempDir()
	victim := make(chan error, 1)
	go func() {
		_, err := sb.run(context.Background(), tool{Cwd: shared, Cmd: `echo secret > "$TMPDIR/s" && echo $$ > pid.tmp && mv pid.tmp pid && echo "$TMPDIR" > scratch.tmp && mv scratch.tmp scratch && ` +
			`while [ ! -e done ]; do sleep 0.02; done`})
		victim <- err
	}()
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(shared, "done"), nil, 0o644); <-victim })
	waitFor(t, 10*time.Second, "the victim call to start", func() bool {
		_, err := os.Stat(filepath.Join(shared, "scratch"))
		return err == nil
	})
	for _, probe := range []string{
		`cat "$(cat scratch)/s"`,
		`ls "$(cat scratch)"`,
		`kill -0 $(cat pid)`,
	} {
		t.Run(probe, func(t *testing.T) {
			if strings.Contains(probe, "kill") && scopes(mustABI(t)) == 0 {
				t.Skip("this kernel cannot scope signals (Landlock ABI < 6)")
			}
			escape(t, sb, yolo, probe, shared)
		})
	}
}

func TestEscape_AbstractUnixSocket(t *testing.T) {
	if scopes(mustABI(t)) == 0 {
		t.Skip("this kernel cannot scope abstract unix sockets (Landlock ABI < 6)")
	}
	name := fmt.Sprintf("@toolnode-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sb, yolo := escapeRunners(t, nil)
	escape(t, sb, yolo, probeCmd("connect-unix", name), "")
}

// A tool without "network": true connects to no TCP port, its node's
// loopback listeners included, and binds none; the same tool with it
// (the second control, besides -yolo) does both.
func TestEscape_Network(t *testing.T) {
	if handledNet(mustABI(t)) == 0 {
		t.Skip("this kernel has no Landlock network rules (ABI < 4); Info says so")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sb, yolo := escapeRunners(t, nil)
	for _, p := range [][2]string{
		{"connect-tcp", ln.Addr().String()},
		{"bind-tcp", freePort(t)},
		// Landlock's TCP rules do not cover MPTCP, which falls back to
		// TCP: the seccomp filter beside them refuses the socket.
		{"connect-mptcp", ln.Addr().String()},
	} {
		probe := probeCmd(p[0], p[1])
		t.Run(p[0], func(t *testing.T) {
			escape(t, sb, yolo, probe, "")
			if out, err := sb.run(context.Background(), tool{Cmd: probe, Network: true}); err != nil {
				t.Fatalf(`sandboxed with "network": true: %q was denied: %v (%s)`, probe, err, out)
			}
		})
	}
	if info := strings.Join(sb.Info(), "; "); !strings.Contains(info, `network: no TCP connect or bind without "network": true`) &&
		!strings.Contains(info, "network: no TCP or UDP") {
		t.Errorf("Info does not say what tools may reach: %s", info)
	}
}

func TestEscape_PathnameUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sb, yolo := escapeRunners(t, nil)
	probe := probeCmd("connect-unix", sock)
	if handledFS(mustABI(t))&(1<<16) == 0 {
		// The kernel has no Landlock right for it: the gap must be named,
		// and the control still shows the probe works.
		allowed(t, yolo, probe, "")
		if info := strings.Join(sb.Info(), "; "); !strings.Contains(info, "missing: pathname unix socket") {
			t.Errorf("Info does not name the missing protection: %q", info)
		}
		t.Skip("this kernel cannot confine pathname unix sockets (Landlock ABI < 9); Info says so")
	}
	escape(t, sb, yolo, probe, "")
}

func TestEscape_InheritedDescriptor(t *testing.T) {
	sb, yolo := escapeRunners(t, nil)
	secret := writeFile(t, t.TempDir(), "secret", "inherited", 0o600)
	// A descriptor the node (or a library, or its parent) opened without
	// O_CLOEXEC; a sandboxed run marks all of them close-on-exec, so open
	// a fresh one for each run.
	open := func() int {
		fd, err := syscall.Open(secret, syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The shell redirects single-digit descriptors only (dash): move
		// it to a free one below 10, still without close-on-exec.
		low := -1
		for n := 3; n <= 9; n++ {
			if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(n), syscall.F_GETFD, 0); errno == syscall.EBADF {
				low = n
				break
			}
		}
		if low < 0 {
			t.Skip("no free descriptor below 10 to hand the shell")
		}
		if err := syscall.Dup3(fd, low, 0); err != nil {
			t.Fatal(err)
		}
		syscall.Close(fd)
		t.Cleanup(func() { syscall.Close(low) })
		return low
	}
	fd := open()
	cmd := fmt.Sprintf("cat <&%d", fd)
	out, err := yolo.run(context.Background(), tool{Cmd: cmd})
	if err != nil || string(out) != "inherited" {
		t.Fatalf("control (-yolo): reading the inherited descriptor %d gave %q, %v", fd, out, err)
	}
	syscall.Close(fd)
	fd = open()
	cmd = fmt.Sprintf("cat <&%d", fd)
	if out, err := sb.run(context.Background(), tool{Cmd: cmd}); err == nil {
		t.Fatalf("sandboxed: read %q through the inherited descriptor %d", out, fd)
	}
	// Only 0, 1, 2 and 3, the side channel's pipe (and the descriptor ls
	// opens for the listing).
	out, err = sb.run(context.Background(), tool{Cmd: `ls /proc/self/fd`})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); len(got) > 5 {
		t.Errorf("the tool has descriptors %v, want 0 1 2 3 and ls's own", got)
	}
}

func TestEscape_OverwriteExecutable(t *testing.T) {
	data, _, _ := dataFixture(t)
	stored := filepath.Join(data, "exec", "3f5a")
	sb, yolo := escapeRunners(t, func(c *testConfig) { c.Protected = []string{data} })
	// Running it is allowed (the node runs a tool from there)...
	out, err := sb.run(context.Background(), tool{Exec: stored})
	if err != nil || string(out) != "published\n" {
		t.Fatalf("running a stored executable: %q, %v", out, err)
	}
	// ...changing it is not.
	escape(t, sb, yolo, fmt.Sprintf(`printf '#!/bin/sh\necho evil\n' > %q`, stored), "")
}

func TestDigestCache(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "tool", "#!/bin/sh\necho published\n", 0o755)
	sum := sha256.Sum256([]byte("#!/bin/sh\necho published\n"))
	want := hex.EncodeToString(sum[:])
	var c DigestCache
	if err := c.Verify(p, want); err != nil {
		t.Fatal(err)
	}
	// Let the file's change time age past the racy second, so the next
	// check is served from the cache and the tampering below must be
	// noticed by the file's identity changing.
	waitFor(t, 5*time.Second, "the file to be old enough to cache", func() bool {
		fi, err := os.Stat(p)
		_, ok := fileIDOf(fi)
		return err == nil && ok
	})
	if err := c.Verify(p, want); err != nil {
		t.Fatal(err)
	}
	if len(c.m) != 1 {
		t.Fatalf("cache holds %d entries, want 1", len(c.m))
	}
	// The tampering: same size, so only the times tell.
	evil := "#!/bin/sh\necho evil!!!!!\n"
	if err := os.WriteFile(p, []byte(evil), 0o755); err != nil {
		t.Fatal(err)
	}
	// Control: unchecked, the changed executable runs.
	yolo := newTestSandbox(t, func(c *testConfig) { c.Off = true })
	if out, err := yolo.run(context.Background(), tool{Exec: p}); err != nil || string(out) != "evil!!!!!\n" {
		t.Fatalf("control: the changed executable gave %q, %v", out, err)
	}
	err := c.Verify(p, want)
	if !errors.Is(err, ErrExecDigest) || !strings.Contains(err.Error(), want) {
		t.Errorf("Verify of a changed file = %v, want ErrExecDigest naming the published digest", err)
	}
	// Replaced by rename, same content as published: fine again.
	q := writeFile(t, dir, "tool.new", "#!/bin/sh\necho published\n", 0o755)
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(p, want); err != nil {
		t.Errorf("Verify after restoring: %v", err)
	}
}

// A node run as root: its tools are uid 0 without any capability, so the
// modes of files hold for them too.
func TestEscape_RootCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the node does not run as root here")
	}
	sb, yolo := escapeRunners(t, nil)
	// Owned by another user, mode 0600: only CAP_DAC_OVERRIDE reads it.
	private := writeFile(t, t.TempDir(), "private", "someone else's", 0o600)
	if err := os.Chown(private, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	escape(t, sb, yolo, fmt.Sprintf("cat %q", private), "")
	escape(t, sb, yolo, `grep -q '^CapEff:.*[1-9a-f]' /proc/self/status`, "")
}

// A tools directory inside the data directory (-examples puts it there)
// stays readable, the rest of the data directory does not.
func TestSandbox_ReadableInsideProtected(t *testing.T) {
	data, _, _ := dataFixture(t)
	tools := filepath.Join(data, "examples", "tools")
	writeFile(t, tools, "helper", "#!/bin/sh\necho helped\n", 0o755)
	exe := writeFile(t, tools, "tool", "#!/bin/sh\nexec \"$(dirname \"$0\")/helper\"\n", 0o755)
	r := newTestSandbox(t, func(c *testConfig) {
		c.Protected = []string{data}
		c.Readable = []string{tools}
	})
	out, err := r.run(context.Background(), tool{Exec: exe})
	if err != nil || string(out) != "helped\n" {
		t.Fatalf("a tool in a readable tools directory: %q, %v", out, err)
	}
	if _, err := r.run(context.Background(), tool{Cmd: fmt.Sprintf("cat %q", filepath.Join(data, "peers.json"))}); err == nil {
		t.Error("the rest of the data directory became readable")
	}
}

func TestCleanProtected(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	rdir, _ := filepath.EvalSymlinks(dir)
	got := cleanProtected([]string{"", filepath.Join(link, "sub"), real, filepath.Join(link, "missing", "x"), real + "/"})
	want := []string{filepath.Join(rdir, "real")}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("cleanProtected = %q, want %q (links resolved, children of a protected path dropped)", got, want)
	}
	if got := cleanProtected([]string{filepath.Join(link, "missing", "x")}); len(got) != 1 || got[0] != filepath.Join(rdir, "real", "missing", "x") {
		t.Errorf("a missing path under a link = %q", got)
	}
}

// A session started in the home directory: the cwd holds ~/.ssh, which
// stays unreadable, while the rest of the cwd is readable and writable.
func TestEscape_CwdAroundProtected(t *testing.T) {
	_, _, home := dataFixture(t)
	if err := os.MkdirAll(filepath.Join(home, "project"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, yolo := escapeRunners(t, func(c *testConfig) { c.Protected = []string{filepath.Join(home, ".ssh")} })
	escape(t, sb, yolo, `cat .ssh/id_ed25519`, home)
	// Names in it can be listed (the cwd must be listable), not read.
	allowed(t, sb, `ls .ssh >/dev/null`, home)
	allowed(t, sb, `cat .profile >/dev/null && echo x > project/new && echo y >> .profile && ls . >/dev/null`, home)
	// Scope read: read-only, and still not the protected path.
	sbRead := func(cmd string) error {
		_, err := sb.run(context.Background(), tool{Cmd: cmd, Cwd: home, ReadOnly: true})
		return err
	}
	if err := sbRead(`cat .profile project/new >/dev/null`); err != nil {
		t.Errorf("scope read cannot read its cwd: %v", err)
	}
	if err := sbRead(`cat .ssh/id_ed25519`); err == nil {
		t.Error("scope read read the protected path in its cwd")
	}
	if err := sbRead(`echo z > project/new`); err == nil {
		t.Error("scope read wrote its cwd")
	}
}

// freePort is a loopback address whose port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
