package node

import (
	"slices"
	"testing"
)

// The directory of a key or certificate is protected whole, unless it is
// one tools need: the root, a home, a top-level or shared system
// directory, or one holding the tools directory.
func TestProtectedPaths_KeyDirectories(t *testing.T) {
	n := &Node{cfg: Config{
		DataDir: "/srv/tn/data", ToolsDir: "/srv/tn/conf/tools",
		TLSKey: "/run/secrets/node-key.pem", TLSCA: "/run/secrets/ca.pem",
		P9TLSKey: "/etc/toolnode/p9/key.pem", P9TLSCert: "/etc/ssl/certs/p9.pem",
		TLSCert:         "/srv/tn/conf/node.pem",
		CredentialFiles: []string{"/home/u/.config/ollie/env"},
	}}
	got := n.protectedPaths()
	for _, want := range []string{"/srv/tn/data", "/run/secrets", "/run/secrets/node-key.pem", "/etc/toolnode/p9",
		"/etc/ssl/certs/p9.pem", "/srv/tn/conf/node.pem", "/home/u/.config/ollie/env"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s is not protected: %q", want, got)
		}
	}
	for _, not := range []string{"/etc/ssl/certs", "/srv/tn/conf", "/home/u/.config/ollie", "/etc", "/run"} {
		if slices.Contains(got, not) {
			t.Errorf("%s is protected whole, but tools need it: %q", not, got)
		}
	}
}
