package node

import (
	"os"
	"path/filepath"
	"strings"
)

// homeSecrets are the places in the node user's home where credentials
// usually live; sandboxed tools cannot read them.
var homeSecrets = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker",
	".config/gcloud", ".config/gh", ".netrc", ".git-credentials", ".pgpass",
}

// protectedPaths are the trees and files a sandboxed tool may not read:
// the node's data directory (Raft log, peers, the blob store of executables,
// other calls' scratch directories, tokens), its key and certificate
// files, and the credentials in its user's home. Add a path here when the
// node gains a file of its own outside the data directory.
func (n *Node) protectedPaths() []string {
	p := []string{n.cfg.DataDir}
	for _, f := range []string{n.cfg.TLSCert, n.cfg.TLSKey, n.cfg.TLSCA, n.cfg.AuditFile} {
		if f != "" {
			p = append(p, f)
		}
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		for _, s := range homeSecrets {
			p = append(p, filepath.Join(home, s))
		}
	}
	return p
}

// sandboxLine says how tools run here, for the node file and the start
// log: the runner's protections, then the node's own.
func (n *Node) sandboxLine() string {
	parts := n.runner.Protections()
	if !n.cfg.Yolo {
		parts = append(parts, "executables: digest checked before each run")
		if n.environHidden {
			parts = append(parts, "node's /proc/PID/environ blanked")
		}
	}
	return strings.Join(parts, "; ")
}
