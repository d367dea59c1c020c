//go:build linux

package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
)

// upBuildEcho builds internal/mcpecho, a go-sdk MCP server, into dir.
func upBuildEcho(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpecho")
	cmd := exec.Command(goTool(), "build", "-o", bin, "../../internal/mcpecho")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build mcpecho: %v\n%s", err, out)
	}
	return bin
}

// upFilesWith lists the files under dir that contain s, as it is or in
// base64 (how JSON holds the bytes of a definition in a log entry or a
// snapshot), at any alignment.
func upFilesWith(dir, s string) []string {
	forms := [][]byte{[]byte(s)}
	for pad := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", pad) + s))
		// Drop the characters that depend on what comes before and after.
		lead := (pad*8 + 5) / 6
		forms = append(forms, []byte(enc[lead:len(enc)-4]))
	}
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, f := range forms {
			if bytes.Contains(b, f) {
				out = append(out, p)
				break
			}
		}
		return nil
	})
	return out
}

// TestUpstreamServer fronts a real MCP server: a definition whose match
// holds on one host only runs there, with a variable of that host's
// environment that no replica holds; its tools are in that host's t/idx,
// in cluster/where everywhere, and routed there; list_changed reaches
// t/idx; bad definitions are refused; the host killed, calls fail fast;
// a second matching host takes over.
func TestUpstreamServer(t *testing.T) {
	t.Parallel()
	bin := upBuildEcho(t)
	const secret = "s3cret-of-bravo-7f1e"
	timeout := []string{"-call-timeout", "3s"}
	mdir := t.TempDir()
	nodes := rtCluster(t,
		rtSpec{name: "alpha", flags: append([]string{"-mcp-servers", mdir}, timeout...)},
		rtSpec{name: "bravo", flags: timeout, env: []string{"UPHOST=1", "ECHO_KEY=" + secret}},
		rtSpec{name: "charlie", flags: timeout},
	)
	a, b, c := nodes[0], nodes[1], nodes[2]
	fa, fb, fc := attach9(t, a.e.p9), attach9(t, b.e.p9), attach9(t, c.e.p9)

	def := fmt.Sprintf(`{"command": %q, "env": {"ECHO_KEY": "${ECHO_KEY}"}, "match": {"env": "UPHOST"}}`+"\n", bin)
	if err := rtPut(fa, "m/echo.json", 0o644, def); err != nil {
		t.Fatal(err)
	}
	took := rtWaitWhere(t, fa, "echo__echo", "bravo")
	rtWaitWhere(t, fc, "echo__getenv", "bravo")
	rtWaitWhere(t, fb, "echo__getenv", "bravo")
	t.Logf("the server's tools reached alpha's cluster/where %v after the publish", took.Round(time.Millisecond))

	t.Run("tree", func(t *testing.T) {
		for name, f := range map[string]*client.Fsys{"alpha": fa, "bravo": fb, "charlie": fc} {
			if got := cat(t, f, "m/echo.json"); got != def {
				t.Errorf("m/echo.json on %s = %q, want it as published", name, got)
			}
			if got := lsDir(t, f, "m"); !slices.Equal(got, []string{"echo.json"}) {
				t.Errorf("ls m on %s = %q", name, got)
			}
		}
		idxA, idxB, idxC := cat(t, fa, "t/idx"), cat(t, fb, "t/idx"), cat(t, fc, "t/idx")
		if !rtIdxHas(idxB, "echo__echo") || !slices.Contains(lines(idxB), "echo__echo\techoes its arguments") {
			t.Errorf("t/idx of bravo lacks echo__echo:\n%s", idxB)
		}
		if rtIdxHas(idxA, "echo__echo") || rtIdxHas(idxC, "echo__echo") {
			t.Errorf("t/idx of alpha or charlie lists echo__echo, which only bravo runs:\n%s\n%s", idxA, idxC)
		}
		if strings.Contains(idxB, "bad.name") {
			t.Errorf("t/idx of bravo lists a tool whose name clients refuse:\n%s", idxB)
		}
		meta := cat(t, fa, "t/echo__getenv.meta")
		if !strings.Contains(meta, `"name"`) || !strings.Contains(meta, "a variable of its environment") {
			t.Errorf("t/echo__getenv.meta on alpha = %s, want its description and args from inputSchema", meta)
		}
	})

	agent := rtAgent(t, fa, rtShared(a), "up", "echo__getenv", "echo__echo", "echo__fail", "echo__grow", "echo__slow")
	t.Run("routed", func(t *testing.T) {
		rtMustCall(t, fa, agent, `echo__getenv {"name":"ECHO_KEY"}`, secret, "alpha")
		rtMustCall(t, fa, agent, `echo__echo {"x":1}`, `{"x":1}`, "alpha")
		if _, _, err := rtCallWithin(t, fa, agent, "echo__fail {}", 30*time.Second); err == nil || !strings.Contains(err.Error(), "it failed") {
			t.Errorf("echo__fail = %v, want the server's text as the error", err)
		}
	})

	t.Run("secret_not_replicated", func(t *testing.T) {
		for _, n := range nodes {
			if got := upFilesWith(n.e.data, secret); len(got) > 0 {
				t.Errorf("the value of ECHO_KEY is in %s's data directory: %q", n.name, got)
			}
		}
		// The control: the definition itself is in the log.
		if got := upFilesWith(a.e.data, "${ECHO_KEY}"); len(got) == 0 {
			t.Error("the definition is in no file of alpha's data directory: the search finds nothing at all")
		}
	})

	t.Run("list_changed", func(t *testing.T) {
		agentB := rtAgent(t, fb, rtShared(b), "grower", "echo__grow")
		rtMustCall(t, fb, agentB, "echo__grow {}", "grown", "bravo")
		took := rtPoll(t, 10*time.Second, "echo__extra in bravo's t/idx", func() (bool, string) {
			idx := cat(t, fb, "t/idx")
			return rtIdxHas(idx, "echo__extra"), idx
		})
		t.Logf("list_changed reached bravo's t/idx in %v", took.Round(time.Millisecond))
		rtWaitWhere(t, fa, "echo__extra", "bravo")
	})

	t.Run("hang", func(t *testing.T) {
		start := time.Now()
		_, _, err := rtCallWithin(t, fa, agent, "echo__slow {}", 30*time.Second)
		if err == nil {
			t.Fatal("a call past the call timeout succeeded")
		}
		t.Logf("echo__slow failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
		b.p.waitLog(t, 20*time.Second, "mcp server echo: a call outlived its deadline")
		rtPoll(t, 20*time.Second, "the restarted server answers", func() (bool, string) {
			out, _, err := rtCall(fa, agent, `echo__echo {"y":2}`)
			return err == nil && out == `{"y":2}`, fmt.Sprint(out, err)
		})
	})

	t.Run("bad_input", func(t *testing.T) {
		for _, bad := range []struct{ data, want string }{
			{"{nope}", "invalid"},
			{`{"args": ["x"]}`, "neither"},
			{`{"command": "x", "env": {"API_TOKEN": "abc123"}}`, "literal value for API_TOKEN"},
		} {
			err := rtPut(fa, "m/bad.json", 0o644, bad.data)
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("m/bad.json = %q: %v, want an error naming %q", bad.data, err, bad.want)
			}
		}
		a.p.waitLog(t, 10*time.Second, "m/bad.json refused")
		if err := rtPut(fa, "t/own__tool.meta", 0o644, `{"description":"d"}`); err == nil || !strings.Contains(err.Error(), "upstream MCP servers") {
			t.Errorf("publishing t/own__tool.meta: %v, want a refusal", err)
		}
		if got := cat(t, fa, "m/echo.json"); got != def {
			t.Errorf("m/echo.json after bad input = %q", got)
		}
		if got, err := readErr(fb, "m/bad.json"); err == nil && got != "" {
			t.Errorf("a refused definition was published: %q", got)
		}
	})

	t.Run("import", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "claude_desktop_config.json")
		conf := fmt.Sprintf(`{"mcpServers": {"imported": {"command": %q, "env": {"GH_TOKEN": "ghp_literal123"}, "disabled": false}}}`, bin)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		out := runCLI(t, a.e, "", "mcp", "import", "-a", a.e.p9, cfg)
		if !strings.Contains(out, "m/imported.json published; a host runs it where it has GH_TOKEN") {
			t.Errorf("mcp import said:\n%s", out)
		}
		var got string
		rtPoll(t, 10*time.Second, "m/imported.json on charlie", func() (bool, string) {
			var err error
			got, err = readErr(fc, "m/imported.json")
			return err == nil, fmt.Sprint(err)
		})
		if !strings.Contains(got, "${GH_TOKEN}") || strings.Contains(got, "ghp_literal123") {
			t.Errorf("m/imported.json = %s: want the literal rewritten to ${GH_TOKEN}", got)
		}
		if err := fa.Remove("m/imported.json"); err != nil {
			t.Fatal(err)
		}
		rtPoll(t, 10*time.Second, "m/imported.json gone from charlie", func() (bool, string) {
			_, err := readErr(fc, "m/imported.json")
			return err != nil, "still there"
		})
	})

	t.Run("dir", func(t *testing.T) {
		def := fmt.Sprintf(`{"command": %q, "match": {"env": "NO_HOST_HAS_THIS"}}`, bin)
		if err := os.WriteFile(filepath.Join(mdir, "fromdir.json"), []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mdir, "broken.json"), []byte(`{"args": []}`), 0o644); err != nil {
			t.Fatal(err)
		}
		rtPoll(t, 10*time.Second, "m/fromdir.json on charlie", func() (bool, string) {
			got, err := readErr(fc, "m/fromdir.json")
			return err == nil && got == def+"\n", fmt.Sprint(got, err)
		})
		a.p.waitLog(t, 10*time.Second, "broken.json not published")
		if _, err := readErr(fc, "m/broken.json"); err == nil {
			t.Error("a broken definition of the directory was published")
		}
		if err := os.Remove(filepath.Join(mdir, "fromdir.json")); err != nil {
			t.Fatal(err)
		}
		rtPoll(t, 10*time.Second, "m/fromdir.json withdrawn", func() (bool, string) {
			_, err := readErr(fc, "m/fromdir.json")
			return err != nil, "still there"
		})
	})

	t.Run("host_killed", func(t *testing.T) {
		rtKill(t, b)
		start := time.Now()
		_, _, err := rtCallWithin(t, fa, agent, `echo__getenv {"name":"ECHO_KEY"}`, 15*time.Second)
		if err == nil {
			t.Fatal("a call of a tool whose only host is dead succeeded")
		}
		t.Logf("with bravo dead the call failed in %v: %v", time.Since(start).Round(time.Millisecond), err)

		// charlie becomes a matching host, with its own value.
		fc.Close()
		rtKill(t, c)
		c.env = []string{"UPHOST=1", "ECHO_KEY=charlie-value"}
		rtLaunch(t, c, a.e.gossip)
		rtWaitUp(t, c)
		rtWaitWhere(t, fa, "echo__getenv", "charlie")
		rtMustCall(t, fa, agent, `echo__getenv {"name":"ECHO_KEY"}`, "charlie-value", "alpha")
	})
}
