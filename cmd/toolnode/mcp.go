package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/mcpbridge"
)

// mcpStdio is `toolnode mcp [-a ADDR] [-profile P]`: an MCP server on
// standard input and output, the way desktop clients start servers, for
// one agent of its own on the node at ADDR. Its log goes to standard
// error; standard output is the protocol's.
func mcpStdio(args []string) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	addr := fs.String("a", defaultAddr(), "node 9P address")
	fs.StringVar(addr, "addr", defaultAddr(), "node 9P address (same as -a)")
	profile := fs.String("profile", "", "make the agent from this profile (a/NAME.json)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	logger := log.New(os.Stderr, "toolnode mcp: ", log.LstdFlags)
	fsys, err := mount(*addr, os.Getenv("TOOLNODE_TOKEN"))
	if err != nil {
		return err
	}
	defer fsys.Close()
	b, err := mcpbridge.New(fsys, mcpbridge.Options{Profile: *profile, Logf: logger.Printf})
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := b.Server().Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
