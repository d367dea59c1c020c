package calls

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CwdRules are what a session's working directory is checked against on
// this host: the node's name (for the errors), -yolo, the node's own
// directories and -workdirs.
type CwdRules struct {
	Node                         string
	Yolo                         bool
	DataDir, ToolsDir, AgentsDir string
	Workdirs                     []string
	// KernelFS turns the kernel-filesystem rule off: only the test that
	// shows the attack the rule stops sets it.
	KernelFS bool
}

// Check applies the rules of DESIGN §7 to a session's working
// directory on this host, and returns it cleaned with its symbolic links
// resolved (what the session keeps, so a link changed later cannot
// redirect it). Every error names the rule broken:
//
//   - it is an absolute path, exists and is a directory;
//   - it is not "/", and neither inside nor around the node's data, tools
//     or agents directory (a tool could plant a .meta the node would
//     publish, or read its keys);
//   - it is not on a kernel filesystem (/proc, /sys, /dev but /dev/shm,
//     cgroupfs and the like, by path and by filesystem type), whose files
//     are interfaces: with write granted there a tool could leave its
//     call's cgroup, change kernel settings or write to a disk device;
//   - with -workdirs, it lies inside one of them.
//
// Under -yolo only the first rule holds: tools can write anywhere anyway.
func (r CwdRules) Check(cwd string) (string, error) {
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("cwd %q is not an absolute path", cwd)
	}
	real, err := filepath.EvalSymlinks(cwd)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("cwd %q does not exist on node %s", cwd, r.Node)
	case err != nil:
		return "", fmt.Errorf("cwd %q cannot be resolved on node %s: %v", cwd, r.Node, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("cwd %q is not a directory", cwd)
	}
	if r.Yolo {
		return real, nil
	}
	if real == "/" {
		return "", fmt.Errorf("cwd %q is the root directory: a session's tools could write anywhere; give a project directory", cwd)
	}
	if fs := kernelDir(real); fs != "" && !r.KernelFS {
		return "", fmt.Errorf("cwd %q is on the kernel's %s filesystem: its files are kernel interfaces a tool must not write; give a project directory", cwd, fs)
	}
	for _, d := range []struct{ what, dir string }{
		{"data", r.DataDir}, {"tools", r.ToolsDir}, {"agents", r.AgentsDir},
	} {
		if d.dir == "" {
			continue
		}
		dir := resolve(d.dir)
		switch {
		case Within(real, dir):
			return "", fmt.Errorf("cwd %q is inside the node's %s directory %s: a session must not write there", cwd, d.what, d.dir)
		case Within(dir, real):
			return "", fmt.Errorf("cwd %q contains the node's %s directory %s: a session must not write there", cwd, d.what, d.dir)
		}
	}
	if len(r.Workdirs) == 0 {
		return real, nil
	}
	for _, w := range r.Workdirs {
		if Within(real, resolve(w)) {
			return real, nil
		}
	}
	return "", fmt.Errorf("cwd %q is outside the node's -workdirs (%s)", cwd, strings.Join(r.Workdirs, ", "))
}

// kernelDirs are the usual mount points of the kernel's filesystems,
// refused by path even where their type cannot be told. /dev/shm is an
// ordinary tmpfs, not a device, and stays allowed.
var kernelDirs = []struct{ dir, fs string }{
	{"/proc", "proc"}, {"/sys", "sysfs"}, {"/dev", "device"},
}

// kernelDir names the kernel filesystem dir (clean, resolved) lies on, or
// "" when it lies on none.
func kernelDir(dir string) string {
	if Within(dir, "/dev/shm") {
		return ""
	}
	for _, k := range kernelDirs {
		if Within(dir, k.dir) {
			return k.fs
		}
	}
	return kernelFSOf(dir)
}

// resolve is dir with its symbolic links resolved, or dir itself when it
// cannot be (it does not exist yet).
func resolve(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return filepath.Clean(dir)
}

// Within reports whether path is dir or lies under it; both are clean and
// absolute.
func Within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
