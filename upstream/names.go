package upstream

import (
	"fmt"
	"regexp"
	"strings"
)

// Sep separates a server's name from its tool's in the catalog.
const Sep = "__"

// toolNameRE is the names MCP clients and model APIs accept for a tool.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ToolName is the catalog's name of tool on server: SERVER__TOOL, refused
// when it is not a name clients accept.
func ToolName(server, tool string) (string, error) {
	name := server + Sep + tool
	if tool == "" || !toolNameRE.MatchString(name) {
		return "", fmt.Errorf("tool %q of server %s: %q is not a tool name MCP clients accept (1 to 64 letters, digits, '_' and '-')", tool, server, name)
	}
	return name, nil
}

// SplitToolName is the server and tool of a catalog name made by
// ToolName; ok is false for a name without the separator.
func SplitToolName(name string) (server, tool string, ok bool) {
	return strings.Cut(name, Sep)
}
