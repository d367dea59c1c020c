// Package mcpserve serves MCP over Streamable HTTP for a node (-mcp
// ADDR). It owns the HTTP listener (HTTPS with the certificate it is
// given; plain HTTP on loopback only), the checks of a request that would
// start an MCP session before anything is made (the Host and Origin it
// names against DNS rebinding, its content type, that it is an
// initialize with a protocol version, its bearer token), the bounds on
// live sessions (per principal and in all, 429 beyond them), and the
// sessions themselves: one mcpbridge.Bridge per MCP session, on a pipe
// into the node's own 9P server, attached with the request's bearer token
// as the attach name, so MCP has exactly the tokens and roles of 9P; a
// session answers only the token that made it. A session whose 9P
// connection the node ended (its token revoked) ends, and its toolnode
// session is removed through the node, since the bridge has no
// connection left to remove it over. A POST is answered with one
// application/json body; notifications come on the session's GET stream.
//
// The package knows a node only through Host (serve 9P on a connection,
// name a token, kill a toolnode session, write an audit line); it imports
// mcpbridge and no other package of toolnode. Its revocation test runs it
// against a real node, from package mcpserve_test.
package mcpserve
