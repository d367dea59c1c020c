// Package upstream owns the MCP servers the cluster fronts (DESIGN §9).
//
// A server's definition, m/NAME.json, is parsed and checked here
// (definition.go): a stdio command with its arguments and environment, or
// the URL and headers of a Streamable HTTP server; the host conditions
// under which a node runs it (`match`, the variant keys of registry); its
// sandbox (network, read and write trees); and a glob allow-list of the
// tools the cluster shows. `${VAR}` references are expanded on the host
// that runs the server, from that host's environment (expand.go), so a
// secret never leaves the hosts that hold it; a literal value for a name
// that looks like a credential is refused. Import turns a desktop
// client's `mcpServers` config into definitions, rewriting such literals
// to references (import.go). ToolName names an upstream tool in the
// catalog, `SERVER__TOOL` (names.go).
//
// A Server (server.go) runs one definition on this host with the
// official go-sdk client: it connects through the transport its caller
// makes (a sandboxed child for stdio, an HTTP client for a URL),
// initializes the session, lists the server's tools and lists them again
// at every notifications/tools/list_changed, makes calls, and restarts
// the session with backoff when it ends, fails to initialize, or a call
// outlives its deadline. It reports each tool list to its caller, which
// publishes it into the catalog.
//
// upstream imports registry (for Match) and the go-sdk; it knows nothing
// of Raft, gossip or 9P.
package upstream
