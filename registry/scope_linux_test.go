//go:build linux

package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolnode/toolnode/sandbox"
)

// A tool's "scope" and "network" reach the sandbox: scope read keeps the
// session's cwd from being written, and only "network": true lets the
// tool connect. Under Yolo (the control) both are open.
func TestRun_MetaReachesTheSandbox(t *testing.T) {
	sb := newTestRunner(t, nil)
	yolo := newTestRunner(t, func(c *RunnerConfig) { c.Yolo = true })
	cwd := t.TempDir()

	write := shTool(`echo hi > f`)
	write.Scope = "read"
	inv := Invocation{Tool: "w", Meta: write, Cwd: cwd}
	if _, err := yolo.Run(context.Background(), inv); err != nil {
		t.Fatalf("control (yolo): scope read could not write its cwd: %v", err)
	}
	_ = os.Remove(filepath.Join(cwd, "f"))
	var ee *ExitError
	if _, err := sb.Run(context.Background(), inv); !errors.As(err, &ee) {
		t.Errorf("scope read wrote its cwd: %v", err)
	}
	write.Scope = ""
	if _, err := sb.Run(context.Background(), inv); err != nil {
		t.Errorf("the default scope could not write its cwd: %v", err)
	}

	abi, _ := sandbox.Status()
	if abi < 4 {
		t.Skipf("this kernel has no Landlock network rules (ABI %d < 4)", abi)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	dial := shTool(fmt.Sprintf("%s dial %s", shQuote(os.Args[0]), ln.Addr()))
	inv = Invocation{Tool: "dial", Meta: dial}
	if out, err := yolo.Run(context.Background(), inv); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("control (yolo): the tool could not connect: %q %v", out, err)
	}
	if _, err := sb.Run(context.Background(), inv); !errors.As(err, &ee) {
		t.Errorf(`a tool without "network": true connected: %v`, err)
	}
	dial.Network = true
	if out, err := sb.Run(context.Background(), inv); err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf(`a tool with "network": true could not connect: %q %v`, out, err)
	}
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
