package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testcluster"
)

// orphanScript is a tool that starts a process which leaves its session
// and process group (setsid) and is orphaned by a double fork, writes that
// process's pid to the file "orphan" in its cwd, and then ends as its
// "end" argument says: ok, fail, or hang (until the call timeout).
const orphanScript = `#!/bin/sh
end=$(sed -n 's/.*"end" *: *"\([a-z]*\)".*/\1/p')
rm -f orphan
setsid sh -c 'sleep 1000 & echo $! > orphan' </dev/null >/dev/null 2>&1 &
while [ ! -s orphan ]; do sleep 0.01; done
case $end in
ok) echo ok ;;
fail) echo failing >&2; exit 1 ;;
hang) sleep 1000 ;;
esac
`

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func orphanPid(t *testing.T, cwd string) int {
	t.Helper()
	var pid int
	testcluster.Eventually(t, 10*time.Second, func() bool {
		data, err := os.ReadFile(filepath.Join(cwd, "orphan"))
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		return err == nil && pid > 0
	}, "the tool writes its orphan's pid")
	return pid
}

// TestEndToEnd_NoOrphans runs a tool that leaves a setsid, double-forked
// process behind through a real node, on success, error and timeout: the
// process is gone when the call returns. The control (-yolo: no cgroup,
// no subreaper) shows the orphan surviving. The node serves on. (A tool
// that forks more than a call may is tested in registry: forking 200
// processes takes longer than this test's call timeout on a busy host.)
func TestEndToEnd_NoOrphans(t *testing.T) {
	for _, tc := range []struct {
		name       string
		flags      []string
		wantOrphan bool
	}{
		{"protected", nil, false},
		{"control_yolo", []string{"-yolo"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if err := os.WriteFile(filepath.Join(e.tools, "orphaner"), []byte(orphanScript), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.tools, "orphaner.meta"), []byte(`{"description":"test tool"}`), 0o644); err != nil {
				t.Fatal(err)
			}
			p := e.spawn(t, "e2e", e.childEnv(), append([]string{"-call-timeout", "2s"}, tc.flags...)...)
			p.waitLog(t, 60*time.Second, "serving 9P")
			line := p.waitLog(t, 5*time.Second, "tools run with")
			t.Log(line)
			fsys := attach9(t, e.p9)
			mustAsk(t, fsys, "session/new", "name=s cwd="+e.cwd)
			mustAsk(t, fsys, "session/s/agent/new", "name=a")
			for _, tool := range []string{"orphaner", "echo"} {
				mustAsk(t, fsys, "session/s/agent/a/call", `tool_load {"name":"`+tool+`"}`)
			}
			call := "session/s/agent/a/call"
			for _, end := range []string{"ok", "fail", "hang"} {
				out, err := ask(fsys, call, `orphaner {"end":"`+end+`"}`)
				switch {
				case end == "ok" && (err != nil || out != "ok\n"):
					t.Fatalf("ok: (%q, %v)", out, err)
				case end == "fail" && (err == nil || !strings.Contains(err.Error(), "status 1")):
					t.Fatalf("fail: (%q, %v)", out, err)
				case end == "hang" && (err == nil || !strings.Contains(err.Error(), "timed out")):
					t.Fatalf("hang: (%q, %v)", out, err)
				}
				pid := orphanPid(t, e.cwd)
				if tc.wantOrphan {
					time.Sleep(300 * time.Millisecond) // the control: the orphan outlives this window without the protection
					survived := alive(pid)
					_ = syscall.Kill(pid, syscall.SIGKILL)
					if !survived {
						t.Fatalf("%s: control: the orphan %d is gone without the protection", end, pid)
					}
					continue
				}
				if !testcluster.Poll(5*time.Second, func() bool { return !alive(pid) }) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("%s: the orphan %d outlived the call", end, pid)
				}
			}

			if out, err := ask(fsys, call, `echo {"text":"still here"}`); err != nil || !strings.Contains(out, "still here") {
				t.Errorf("after the calls: (%q, %v)", out, err)
			}
			p.stop(t)
		})
	}
}
