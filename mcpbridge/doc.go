// Package mcpbridge serves toolnode's tools to Model Context Protocol
// clients, with the official SDK (github.com/modelcontextprotocol/go-sdk).
//
// # What it owns
//
// A Bridge is one MCP session's view of the cluster: it speaks 9P to a
// node (over any connection: TCP, TLS, or a pipe into the node's own 9P
// server), creates a toolnode session and agent of its own (from a
// profile when given), and keeps an mcp.Server whose tool list is that
// agent's loaded tools plus the built-ins tool_load, tool_unload and
// tools_all. Because everything goes through the 9P tree, the node's
// tokens and roles apply to MCP unchanged: the bridge attaches with the
// token it was given.
//
//   - tools/list: each loaded tool with its description, its args schema
//     as inputSchema, and its full documentation (the tools file) in the
//     title-less long description; _meta["toolnode/nodes"] lists the nodes
//     that can run it now.
//   - tools/call: a write of "NAME JSON" to the agent's call file and a
//     read of the answer, so the call is routed like any other. The
//     bridge keeps fids of the call and ctl files open across requests
//     (a fidPool, up to four idle each): the tree keeps an answer per fid
//     and a write at offset 0 starts a new request, so a call is a write
//     and the reads of its answer, not also a walk, an open and a clunk.
//     Each read is one Tread; given the connection's msize
//     (Options.Msize, which Conn learns from the Rversion) a read shorter
//     than the count sent ends the answer, since the node keeps an answer
//     whole and returns all that is left up to the count: one Tread for
//     an answer that fits, not a second that returns 0 bytes.
//     A fid whose request failed is clunked, not kept. Opens and clunks
//     take one lock per connection (tree): the 9fans client reuses a fid
//     number as soon as it sends the Tclunk, and the node may serve a
//     walk to it first. A failed
//     tool is a result with isError and the node's error text (exit status
//     and stderr tail); a tool whose outputFormat is json also answers
//     structuredContent.
//   - A tool list that is never stale: a watcher reads the node's events
//     file and, on a load, unload or change of a loaded tool (tool+,
//     tool-) or of membership (node+, node-), lists the tools again and
//     changes the server's set, which sends
//     notifications/tools/list_changed. A change of where a tool can run
//     is an event too (the node says tool+ when gossip changes the nodes
//     that can run it), so an idle session asks the node nothing: its
//     one read of events waits.
//   - The agent's preamble is the prompt "preamble", and each loaded
//     tool's documentation the resource toolnode://tool/NAME.
//
// Close kills the toolnode session the bridge made; Abandon, for a 9P
// connection the node has ended, leaves it to whoever ended it.
//
// Conn wraps the byte stream under the bridge's 9P client: it reads the
// msize of the Rversion and reports the stream's end (Done, Err), so the
// owner of the connection can end the MCP session when the node ends it
// (a revoked token) instead of serving calls that all fail. Once the
// stream has ended it answers every request left waiting, and every one
// made after, with an Rerror, which the 9P client would otherwise leave
// waiting forever.
//
// # What it must not touch
//
// mcpbridge imports no other toolnode package: it knows the node only
// through its 9P tree (DESIGN §3).
package mcpbridge
