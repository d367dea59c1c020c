// Package p9proxy forwards 9P2000 connections to a toolnode node: it is
// what `toolnode proxy` runs (DESIGN §5, §7). Clients that speak only
// plain 9P and know nothing of tokens (plan9port's 9pfuse, the Linux
// kernel's v9fs) connect to the proxy on loopback; the proxy dials the
// node for each of them, over TLS when it is given a dialer that does,
// and presents the proxy's token in their attaches.
//
// # What it owns
//
// The byte streams between each client and its upstream connection, one
// upstream connection per client, nothing shared between clients.
//
//   - Frames: every message in either direction is read whole by its
//     size[4] field and checked before it is passed on: a size below the
//     7-byte header, or above the negotiated msize (Options.MaxMsize until
//     an Rversion sets it), closes that client's connection and its
//     upstream one, with a log line that names the client and the reason.
//     No other client is disturbed.
//   - Tversion: the msize a client asks for is lowered to MaxMsize, so
//     the node never answers with more than the proxy reads; the node's
//     Rversion sets the msize of both directions.
//   - Tattach and Tauth are parsed field by field: one that is malformed
//     (fields past its end, bytes after them) closes the connection. With
//     a token, the aname of each is replaced by it: whatever aname the
//     client sent is ignored, so every client of the proxy has exactly
//     the role of the proxy's token. Without a token the client's aname
//     passes unchanged. An attach that the token makes larger than the
//     msize gets an Rerror from the proxy itself.
//   - Everything else passes unchanged; the node checks every field of
//     what it is sent and answers a bad request with Rerror.
//   - At most MaxConns clients are served at once; one more is closed at
//     once with a log line. Upstream dials are bounded by DialTimeout;
//     when one fails, the client's first request is answered with an
//     Rerror that says so, and its connection closed.
//
// # What it must not touch
//
// It knows no node internals and imports no toolnode package: it speaks
// the wire format only, with the message type numbers of
// github.com/knusbaum/go9p/proto.
package p9proxy
