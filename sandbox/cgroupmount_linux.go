package sandbox

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ownCgroups returns the directories of this process's cgroup in the v2
// hierarchy and in the v1 pids hierarchy, "" for one not mounted.
func ownCgroups() (v2, v1pids string, err error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	var path2, path1 string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			path2 = parts[2]
		case hasItem(parts[1], "pids"):
			path1 = parts[2]
		}
	}
	mf, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer mf.Close()
	sc := bufio.NewScanner(mf)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		f := strings.Fields(sc.Text())
		sep := -1
		for i, s := range f {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 >= len(f) {
			continue
		}
		root, mnt, fstype, super := unescapeMount(f[3]), unescapeMount(f[4]), f[sep+1], f[sep+3]
		switch {
		case fstype == "cgroup2" && path2 != "" && v2 == "":
			v2 = under(mnt, root, path2)
		case fstype == "cgroup" && path1 != "" && v1pids == "" && hasItem(super, "pids"):
			v1pids = under(mnt, root, path1)
		}
	}
	if v2 == "" && v1pids == "" {
		return "", "", errors.New("no cgroup v2 or v1 pids hierarchy is mounted")
	}
	return v2, v1pids, sc.Err()
}

// under maps a cgroup path to a directory of the mount at mnt, whose root
// is root.
func under(mnt, root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = "." // a cgroup namespace: the mount's root is ours
	}
	return filepath.Join(mnt, rel)
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasItem(list, item string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == item {
			return true
		}
	}
	return false
}

func hasController(dir, name string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	return err == nil && hasItem(strings.ReplaceAll(strings.TrimSpace(string(data)), " ", ","), name)
}
