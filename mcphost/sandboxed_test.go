//go:build linux

package mcphost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/sandbox"
)

// TestSandboxedServer: a stdio server started by Sandboxed cannot read
// a protected file, and gets no variable of the node's environment; the
// control, with the sandbox off, reads it.
func TestSandboxedServer(t *testing.T) {
	if _, err := sandbox.Status(); err != nil {
		t.Skipf("no sandbox on this kernel: %v", err)
	}
	bin := mcpecho(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "key")
	if err := os.WriteFile(secret, []byte("the node's key"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODE_ONLY_VAR", "node-secret")
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("off=%v", off), func(t *testing.T) {
			sb := sandbox.New(sandbox.Config{Off: off, ScratchDir: t.TempDir(), Protected: []string{secretDir}})
			t.Cleanup(func() { sb.Close() })
			h := New(Config{
				Host:     registry.Host{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Getenv: os.Getenv, LookPath: exec.LookPath},
				StateDir: t.TempDir(), Connect: Sandboxed(sb, nil),
				InitTimeout: 5 * time.Second, MinBackoff: 50 * time.Millisecond,
			})
			t.Cleanup(h.Close)
			h.Sync(map[string][]byte{"box": []byte(fmt.Sprintf(`{"command":%q}`, bin))})
			waitFor(t, "box's tools", 10*time.Second, func() bool { return h.Offers("box__readfile") })
			ctx := context.Background()
			out, err := h.Call(ctx, "box__readfile", []byte(fmt.Sprintf(`{"path":%q}`, secret)), nil)
			if off {
				if err != nil || string(out) != "the node's key" {
					t.Fatalf("control: readfile = %q, %v; want the file read without the sandbox", out, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Fatalf("readfile of a protected file = %q, %v; want permission denied", out, err)
			}
			if out, err := h.Call(ctx, "box__getenv", []byte(`{"name":"NODE_ONLY_VAR"}`), nil); err != nil || len(out) != 0 {
				t.Fatalf("the server sees the node's variable: %q, %v", out, err)
			}
			home, err := h.Call(ctx, "box__home", []byte(`{}`), nil)
			if err != nil || !strings.HasSuffix(string(home), "/box") {
				t.Fatalf("home = %q, %v", home, err)
			}
		})
	}
}
