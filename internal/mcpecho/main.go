// Command mcpecho is an MCP server for tests, built with the go-sdk: it
// speaks MCP on standard input and output and offers
//
//   - echo: its arguments back, as JSON text;
//   - getenv {"name": N}: the value of N in its environment;
//   - home: its HOME;
//   - readfile {"path": P}: the file's content, or an isError result;
//   - fail: an isError result;
//   - slow: answers only when its call is cancelled;
//   - grow: adds the tool extra, so the server sends list_changed;
//   - bad.name: a tool whose catalog name clients refuse.
//
// With MCPECHO_MODE=hang it reads and never answers (no initialize).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if os.Getenv("MCPECHO_MODE") == "hang" {
		bufio.NewReader(os.Stdin).ReadString(0)
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpecho", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "echoes its arguments", InputSchema: obj},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(string(r.Params.Arguments)), nil
		})
	s.AddTool(&mcp.Tool{Name: "getenv", Description: "a variable of its environment",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Name string }
			json.Unmarshal(r.Params.Arguments, &a)
			return text(os.Getenv(a.Name)), nil
		})
	s.AddTool(&mcp.Tool{Name: "home", Description: "its HOME", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(os.Getenv("HOME")), nil
		})
	s.AddTool(&mcp.Tool{Name: "readfile", Description: "a file's content",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Path string }
			json.Unmarshal(r.Params.Arguments, &a)
			b, err := os.ReadFile(a.Path)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
			}
			return text(string(b)), nil
		})
	s.AddTool(&mcp.Tool{Name: "steps", Description: "tells its progress, then answers", InputSchema: obj},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: fmt.Sprintf("step %d", i)})
					// Each step's work, as a real tool's: progress told
					// after the answer is no progress, and a client
					// handles notifications beside the answers.
					time.Sleep(200 * time.Millisecond)
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "fails", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "never answers", InputSchema: obj},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "grow", Description: "adds the tool extra", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(&mcp.Tool{Name: "extra", Description: "added by grow", InputSchema: obj},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("extra"), nil
				})
			return text("grown"), nil
		})
	s.AddTool(&mcp.Tool{Name: "bad.name", Description: "a name clients refuse", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(""), nil
		})
	s.Run(context.Background(), &mcp.StdioTransport{})
}
