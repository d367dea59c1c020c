// Package audit owns toolnode's audit log: an append-only file of JSON
// lines, one per state change and per call, saying when, on which node,
// who (a token's name, or anon@ADDR), what (the action and its target),
// with what result ("ok" or the error's text) and how long it took.
//
// A Log is safe for concurrent use. It appends (O_APPEND, mode 0600)
// through a buffer flushed within FlushInterval and at Close, which also
// syncs the file, so a clean stop loses nothing. Reopen closes the file
// and opens the path again, for logrotate's move-then-HUP. A failed write
// is logged once (and again once it succeeds after failing), never
// returned to the caller: auditing must not stop the node.
//
// audit knows nothing of 9P, Raft or the node; the node decides what to
// record.
package audit
