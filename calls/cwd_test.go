package calls

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCwdRules(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"data", "tools", "agents", "work/proj", "allowed/proj"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(root, "work", "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := CwdRules{Node: "n1", DataDir: filepath.Join(root, "data"),
		ToolsDir: filepath.Join(root, "tools"), AgentsDir: filepath.Join(root, "agents")}
	for _, tc := range []struct{ cwd, want string }{
		{"rel/dir", "is not an absolute path"},
		{filepath.Join(root, "missing"), "does not exist on node n1"},
		{file, "is not a directory"},
		{"/", "is the root directory"},
		{"/proc/self", "on the kernel's proc filesystem"},
		{"/dev", "on the kernel's device filesystem"},
		{filepath.Join(root, "tools"), "inside the node's tools directory"},
		{root, "contains the node's data directory"},
	} {
		if _, err := r.Check(tc.cwd); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cwd=%s: err = %v, want %q", tc.cwd, err, tc.want)
		}
	}
	work := filepath.Join(root, "work", "proj")
	if got, err := r.Check(work + "/"); err != nil || got != work {
		t.Errorf("cwd=%s: (%q, %v), want it cleaned", work, got, err)
	}

	r.Workdirs = []string{filepath.Join(root, "allowed")}
	if _, err := r.Check(work); err == nil || !strings.Contains(err.Error(), "outside the node's -workdirs") {
		t.Errorf("outside -workdirs: err = %v", err)
	}
	if _, err := r.Check(filepath.Join(root, "allowed", "proj")); err != nil {
		t.Errorf("inside -workdirs: %v", err)
	}

	// Control: under -yolo only the first rule holds.
	yolo := CwdRules{Node: "n1", Yolo: true, ToolsDir: r.ToolsDir}
	for _, cwd := range []string{"/", "/proc/self", r.ToolsDir} {
		if _, err := yolo.Check(cwd); err != nil {
			t.Errorf("-yolo cwd=%s: %v", cwd, err)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/x", "/", true},
	} {
		if got := Within(tc.path, tc.dir); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.path, tc.dir, got)
		}
	}
}
