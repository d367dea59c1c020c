package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FormatFile, in the data directory, records the version of the layout
// this node keeps there (Raft's log and snapshots under raft/, blobs/,
// scratch/, peers.json, admin.token). A node writes it at the first
// start and refuses to start on a directory of another version, saying
// which, rather than misread it. The snapshot's encoding has a version
// of its own (raftfsm.SnapshotFormat).
const FormatFile = "FORMAT"

// DataFormat is the data directory layout this build keeps.
const DataFormat = 1

// checkFormat reads DATA/FORMAT, writing it when it is absent, and fails
// on any version but DataFormat.
func (n *Node) checkFormat() error {
	path := filepath.Join(n.cfg.DataDir, FormatFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf("toolnode data %d\n", DataFormat)), 0o600); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "toolnode data ")
	got, err := strconv.Atoi(v)
	if !ok || err != nil {
		return fmt.Errorf("data directory %s: %s is not a toolnode format line (%q)", n.cfg.DataDir, FormatFile, strings.TrimSpace(string(b)))
	}
	if got != DataFormat {
		return fmt.Errorf("data directory %s has format %d; this build keeps format %d: use a build of that format, or a new -data directory", n.cfg.DataDir, got, DataFormat)
	}
	return nil
}
