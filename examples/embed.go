// Package examples holds toolnode's example tools and agent profiles, and
// embeds them so that the binary can install them on a fresh host.
//
// tools/ has one NAME.meta per tool (the .meta format of the design, §1)
// and, for tools that are not metadata-only, an executable NAME: a POSIX sh
// script that reads its JSON arguments on standard input with jq, or with
// python3 where jq is missing, and whose variants hide it on hosts that have
// neither. agents/ has agent profiles (NAME.json, with autoLoad).
//
// This package owns those files and their extraction; it knows nothing of
// the registry that parses and runs them.
package examples

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// FS holds the example tools under "tools" and the agent profiles under
// "agents". An embedded file carries no executable bit: Extract restores it.
//
//go:embed tools agents
var FS embed.FS

// Extract writes the embedded tools to dst/tools and the profiles to
// dst/agents, creating the directories as needed, and returns those two
// directories. Files already there are overwritten and other files are left
// alone. Each file is written to a temporary name beside its target and
// renamed over it, so that a directory watcher never sees half a file.
// Files named *.meta or *.json get mode 0644, every other file (a tool's
// executable) gets mode 0755.
func Extract(dst string) (toolsDir, agentsDir string, err error) {
	toolsDir = filepath.Join(dst, "tools")
	agentsDir = filepath.Join(dst, "agents")
	for _, dir := range []string{"tools", "agents"} {
		if err := extractDir(dir, filepath.Join(dst, dir)); err != nil {
			return "", "", err
		}
	}
	return toolsDir, agentsDir, nil
}

// extractDir copies the embedded directory dir into the directory out.
func extractDir(dir, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("examples: %w", err)
	}
	entries, err := FS.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("examples: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := FS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("examples: %w", err)
		}
		if err := writeFileAtomic(filepath.Join(out, e.Name()), data, fileMode(e.Name())); err != nil {
			return fmt.Errorf("examples: %w", err)
		}
	}
	return nil
}

// fileMode is the mode Extract gives the file called name.
func fileMode(name string) fs.FileMode {
	if strings.HasSuffix(name, ".meta") || strings.HasSuffix(name, ".json") {
		return 0o644
	}
	return 0o755
}

// writeFileAtomic replaces the file name with data and mode perm: it writes
// a temporary file in the same directory, then renames it over name. The
// temporary name starts with a dot, which no tool or profile name does.
func writeFileAtomic(name string, data []byte, perm fs.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	// Chmod explicitly: CreateTemp makes 0600 files and the umask must not
	// take the executable bits away.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
