package mcphost

import (
	"encoding/json"

	"github.com/toolnode/toolnode/upstream"
)

// Meta is the .meta a tool of an upstream server is published with: its
// description, args from its inputSchema ({"type":"object"} without
// one), outputFormat json when it declares an outputSchema, and the
// annotation readOnlyHint as scope read.
func Meta(t upstream.Tool) []byte {
	m := struct {
		Description  string          `json:"description"`
		Args         json.RawMessage `json:"args"`
		OutputFormat string          `json:"outputFormat,omitempty"`
		Scope        string          `json:"scope,omitempty"`
	}{Description: t.Description, Args: t.InputSchema}
	if m.Description == "" {
		m.Description = "tool " + t.Upstream + " of an upstream MCP server"
	}
	if len(m.Args) == 0 || string(m.Args) == "null" {
		m.Args = json.RawMessage(`{"type":"object"}`)
	}
	if len(t.OutputSchema) > 0 && string(t.OutputSchema) != "null" {
		m.OutputFormat = "json"
	}
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		m.Scope = "read"
	}
	b, _ := json.Marshal(m)
	return b
}
