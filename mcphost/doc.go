// Package mcphost runs, on one node, the upstream MCP servers the cluster
// fronts (DESIGN §9).
//
// It is given the replicated definitions (m/NAME.json, `${VAR}`
// unexpanded) each time they change (Host.Sync) and runs each one whose
// `match` holds on this host and whose variables are all set here, one
// upstream.Server per definition: a stdio child started through the
// transport its caller makes (the node confines it), with a state
// directory of its own under the node's data directory as its HOME, or a
// Streamable HTTP client. A definition withdrawn, changed, or no longer
// matching stops its server; a changed one starts again.
//
// It reports each server's tools (after each start and list_changed,
// and none when the server stops) to its caller, which publishes them
// into the catalog as tools of origin mcp, and it answers whether a tool
// is offered here now (Host.Offers) and makes the calls (Host.Call).
// Meta is the .meta a tool is published with: its description, args from
// its inputSchema, outputFormat json when it declares an outputSchema.
//
// mcphost imports upstream and registry; it knows nothing of Raft,
// gossip or 9P.
package mcphost
