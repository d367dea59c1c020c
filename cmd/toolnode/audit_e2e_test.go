//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

type auditLine struct {
	Time       string  `json:"time"`
	Node       string  `json:"node"`
	Who        string  `json:"who"`
	Via        string  `json:"via"`
	Action     string  `json:"action"`
	Target     string  `json:"target"`
	Result     string  `json:"result"`
	DurationMS float64 `json:"duration_ms"`
}

func readAudit(t *testing.T, path string) []auditLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339Nano, l.Time); err != nil || l.Node != "e2e" {
			t.Fatalf("audit line %q: bad time or node", sc.Text())
		}
		out = append(out, l)
	}
	return out
}

// findAudit returns the first line with the action and target.
func findAudit(lines []auditLine, action, target string) (auditLine, bool) {
	for _, l := range lines {
		if l.Action == action && l.Target == target {
			return l, true
		}
	}
	return auditLine{}, false
}

// -audit FILE: a publish, a session, a load, a call and a failing call
// through 9P each make a line with who, target and result; so do the
// node's own publications; after logrotate's move and a SIGHUP the new
// file receives the later lines, and a SIGTERM loses none of them.
func TestE2E_Audit(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.root, "audit.log")
	p := e.spawn(t, "e2e", e.childEnv(), "-audit", path)
	pollUntil(t, 60*time.Second, "the node serves its tree", func() (bool, string) {
		s, err := read9(e.p9, "session/idx")
		if err != nil {
			return false, err.Error()
		}
		return true, s
	})
	fsys := attach9(t, e.p9)

	f, err := fsys.Create("a/aud.json", plan9.OWRITE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(`{"autoLoad":["now"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustAsk(t, fsys, "session/new", "name=aud cwd="+e.cwd)
	mustAsk(t, fsys, "session/aud/agent/new", "name=a1")
	mustAsk(t, fsys, "session/aud/agent/a1/ctl", "tool_load echo file_read")
	if got := mustAsk(t, fsys, "session/aud/agent/a1/call", `echo {"text":"hi"}`); got != "hi\n" {
		t.Fatalf("echo answered %q", got)
	}
	askFails(t, fsys, "session/aud/agent/a1/call", `file_read {"path":"no-such-file"}`)
	askFails(t, fsys, "session/aud/agent/a1/ctl", "tool_load no_such_tool", "no_such_tool")
	mustAsk(t, fsys, "token/new", "name=audtok role=read")
	if err := write9(fsys, "token/ctl", "revoke audtok"); err != nil {
		t.Fatal(err)
	}

	// logrotate: move the file away, then SIGHUP.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, 10*time.Second, "audit: reopened", path)
	ctl, err := fsys.Open("session/aud/ctl", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Write([]byte("kill")); err != nil {
		t.Fatal(err)
	}
	ctl.Close()
	p.stop(t)

	before := readAudit(t, path+".1")
	var l auditLine
	var ok bool
	for _, x := range before {
		if x.Action == "publish-tools" {
			l, ok = x, true
			break
		}
	}
	if !ok || l.Who != "node:e2e" || l.Result != "ok" || !strings.Contains(l.Target, "echo") {
		t.Errorf("the node's own publication: %+v, %v", l, ok)
	}
	want := []struct{ action, target, result string }{
		{"publish-profile", "aud", "ok"},
		{"new-session", "aud", "ok"},
		{"new-agent", "aud/a1", "ok"},
		{"load", "aud/a1/echo,file_read", "ok"},
		{"call", "aud/a1/echo", "ok"},
		{"call", "aud/a1/file_read", "file_read"},
		{"load", "aud/a1/no_such_tool", "no_such_tool"},
		{"token-new", "audtok role=read", "ok"},
		{"token-revoke", "audtok", "ok"},
	}
	var who string
	for _, w := range want {
		l, ok := findAudit(before, w.action, w.target)
		switch {
		case !ok:
			t.Errorf("no %s %s line in the rotated file", w.action, w.target)
			continue
		case w.result == "ok" && l.Result != "ok", w.result != "ok" && (l.Result == "ok" || !strings.Contains(l.Result, w.result)):
			t.Errorf("%s %s: result %q, want %q", w.action, w.target, l.Result, w.result)
		case l.Who != "admin-e2e":
			t.Errorf("%s %s: who %q, want the admin token's name admin-e2e", w.action, w.target, l.Who)
		case who != "" && l.Who != who:
			t.Errorf("%s %s: who %q, want the connection's %q", w.action, w.target, l.Who, who)
		}
		who = l.Who
	}
	if _, ok := findAudit(before, "kill-session", "aud"); ok {
		t.Error("a line written after the SIGHUP went to the rotated file")
	}
	after := readAudit(t, path)
	if l, ok := findAudit(after, "kill-session", "aud"); !ok || l.Result != "ok" || l.Who != who {
		t.Errorf("the new file after SIGHUP: %+v", after)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the new file: %v, %v; want mode 0600", st.Mode(), err)
	}
	if t.Failed() {
		b1, _ := os.ReadFile(path + ".1")
		b2, _ := os.ReadFile(path)
		t.Logf("rotated:\n%s\nnew:\n%s", b1, b2)
	}
}

// write9 writes a command to a file that answers nothing.
func write9(fsys *client.Fsys, path, cmd string) error {
	fid, err := fsys.Open(path, plan9.OWRITE)
	if err != nil {
		return err
	}
	defer fid.Close()
	_, err = fid.Write([]byte(cmd))
	return err
}
