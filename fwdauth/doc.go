// Package fwdauth decides whether the leader applies a command another
// node forwarded over the cluster port, and for whom (DESIGN §7 "Cluster
// port"). A member's credential proves only that the sender belongs to
// the cluster; what a forwarded command may do comes from the principal
// it was made for, which the leader resolves itself:
//
//   - a token the command carries: its name and role, as the leader's
//     state holds them (an unknown or revoked token is refused);
//   - a token-less caller, anon@IP as the forwarding node names it: at
//     most the call role, whatever that node's -9p-anon says;
//   - the forwarding node itself, node:NAME: publishing and withdrawing
//     its own directories' tools and profiles, and removing the sessions
//     of a revoked token (its MCP sessions end with the token); nothing
//     else.
//
// Check applies the role rules p9 applies to a fid (call for sessions,
// agents and loads; publish for t/ and a/; admin for tokens) and the
// sessions' ownership that node applies to a 9P principal: only a
// session's maker and admin may use it, and a session is made for the
// principal that asks. Describe names a command for the audit line.
//
// fwdauth reads the leader's state through State and changes nothing; it
// imports p9 for its roles, raftfsm for the commands and acl for hashes.
package fwdauth
