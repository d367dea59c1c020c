// Command mcpecho is the floor of the MCP benchmarks: the official SDK's
// server with one tool, echo, that answers "ok" and does nothing else,
// in a process of its own as `toolnode mcp` and a node are. With no
// arguments it serves MCP over standard input and output; with -http
// ADDR it serves Streamable HTTP on ADDR with the options the node's
// -mcp uses (JSON responses, an idle timeout).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP on this address instead of stdio")
	flag.Parse()
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpecho", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", Description: "answers ok", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok\n"}}}, nil
		})
	if *addr == "" {
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: 15 * time.Minute, JSONResponse: true})
	fmt.Println("serving", ln.Addr())
	if err := http.Serve(ln, h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
