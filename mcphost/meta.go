package mcphost

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/upstream"
)

// Meta is the .meta a tool of an upstream server is published with: its
// description, args from its inputSchema ({"type":"object"} without
// one), outputFormat json and the schema itself when it declares an
// outputSchema, the annotation readOnlyHint as scope read, and the
// server's annotations as they are, which MCP's tools/list passes on.
func Meta(t upstream.Tool) []byte {
	m := struct {
		Description  string               `json:"description"`
		Args         json.RawMessage      `json:"args"`
		OutputFormat string               `json:"outputFormat,omitempty"`
		OutputSchema json.RawMessage      `json:"outputSchema,omitempty"`
		Scope        string               `json:"scope,omitempty"`
		Annotations  *mcp.ToolAnnotations `json:"annotations,omitempty"`
	}{Description: t.Description, Args: t.InputSchema, Annotations: t.Annotations}
	if m.Description == "" {
		m.Description = "tool " + t.Upstream + " of an upstream MCP server"
	}
	if len(m.Args) == 0 || string(m.Args) == "null" {
		m.Args = json.RawMessage(`{"type":"object"}`)
	}
	if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
		m.OutputFormat = "json"
		m.OutputSchema = t.OutputSchema
	}
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		m.Scope = "read"
	}
	b, _ := json.Marshal(m)
	return b
}
