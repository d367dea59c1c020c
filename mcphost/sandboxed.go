package mcphost

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/sandbox"
	"github.com/toolnode/toolnode/upstream"
)

// Sandboxed is the Connector that starts a stdio server under sb: its
// command found on PATH, its environment PATH, HOME (the state
// directory) and the definition's env only (no credential of the node),
// the network only with "network": true, its reads and writes as the
// definition names them; its standard error goes to stderr. A URL
// server gets upstream.Transport's HTTP client.
func Sandboxed(sb *sandbox.Sandbox, stderr io.Writer) Connector {
	return func(name string, d *upstream.Definition, home string) func(ctx context.Context) (mcp.Transport, error) {
		if d.URL != "" {
			return upstream.Transport(d, nil)
		}
		return func(ctx context.Context) (mcp.Transport, error) {
			argv0 := d.Command
			if !filepath.IsAbs(argv0) {
				p, err := exec.LookPath(argv0)
				if err != nil {
					return nil, fmt.Errorf("command %q: %w", d.Command, err)
				}
				if argv0, err = filepath.Abs(p); err != nil {
					return nil, err
				}
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
			for _, k := range sortedKeys(d.Env) {
				env = append(env, k+"="+d.Env[k])
			}
			p, err := sb.Start(sandbox.Service{
				Argv: append([]string{argv0}, d.Args...), Dir: home, Env: env,
				Network: d.Network, Read: d.Read, Write: d.Write, Stderr: stderr,
			})
			if err != nil {
				return nil, err
			}
			return &procTransport{p: p}, nil
		}
	}
}

// procTransport is a session over a sandboxed process's standard input
// and output; closing the connection ends the process.
type procTransport struct{ p *sandbox.Proc }

func (t *procTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	tr := &mcp.IOTransport{Reader: t.p.Stdout, Writer: &closer{t.p}}
	return tr.Connect(ctx)
}

// closer closes the process's standard input and, unless it exits
// within a second, kills it.
type closer struct{ p *sandbox.Proc }

func (c *closer) Write(b []byte) (int, error) { return c.p.Stdin.Write(b) }
func (c *closer) Close() error {
	err := c.p.Stdin.Close()
	go func() {
		select {
		case <-c.p.Done():
		case <-timeAfter():
			c.p.Kill()
		}
	}()
	return err
}

func timeAfter() <-chan time.Time { return time.After(time.Second) }
