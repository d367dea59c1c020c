package node

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/toolnode/toolnode/calls"
)

// homeSecrets are the places in the node user's home where credentials
// usually live; sandboxed tools cannot read them.
var homeSecrets = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker",
	".config/gcloud", ".config/gh", ".netrc", ".git-credentials", ".pgpass",
}

// protectedPaths are the trees and files a sandboxed tool may not read:
// the node's data directory (Raft log, peers, the blob store of executables,
// other calls' scratch directories, the admin token, the cluster secret),
// every key, certificate and CA file it was given and the directories that
// hold them (a CA's key sits beside its certificate), the files it read
// credentials from (Config.CredentialFiles: the env file), and the
// credentials in its user's home. Add a path here when the node gains a
// file of its own outside the data directory.
func (n *Node) protectedPaths() []string {
	p := []string{n.cfg.DataDir}
	home, _ := os.UserHomeDir()
	for _, f := range []string{n.cfg.TLSCert, n.cfg.TLSKey, n.cfg.TLSCA, n.cfg.P9TLSCert, n.cfg.P9TLSKey, n.cfg.SignKey} {
		if f == "" {
			continue
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			continue
		}
		p = append(p, abs)
		if d := filepath.Dir(abs); n.secretsDir(d, home) {
			p = append(p, d)
		}
	}
	for _, f := range append([]string{n.cfg.AuditFile}, n.cfg.CredentialFiles...) {
		if f != "" {
			p = append(p, f)
		}
	}
	if home != "" && home != "/" {
		for _, s := range homeSecrets {
			p = append(p, filepath.Join(home, s))
		}
	}
	return p
}

// sharedDirs hold files every program needs (the system's CA bundle among
// them): a credential kept there protects only itself.
var sharedDirs = []string{"/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc/ssl", "/etc/pki", "/etc/ca-certificates"}

// secretsDir reports whether d, the directory of a key or certificate
// file, is one of its own to protect whole: not the root, a home, a
// directory directly under the root, a shared system directory, or one
// that holds what tools must read (the tools and agents directories, the
// allowed working directories).
func (n *Node) secretsDir(d, home string) bool {
	if d == "/" || d == home || filepath.Dir(d) == "/" || d == filepath.Dir(home) || d == "/var/tmp" {
		return false
	}
	for _, s := range sharedDirs {
		if calls.Within(d, s) {
			return false
		}
	}
	for _, keep := range append([]string{n.cfg.ToolsDir, n.cfg.AgentsDir}, n.cfg.Workdirs...) {
		if keep != "" && calls.Within(keep, d) {
			return false
		}
	}
	return true
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
