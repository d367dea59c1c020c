// Package logx owns the node's log: one structured format (log/slog) for
// every line the process writes, and the bridges that route the loggers
// of its dependencies into it.
//
//   - New makes the process's *slog.Logger: text (key=value, one line a
//     record) or JSON, on standard error, at a level.
//   - Hclog adapts it to hashicorp/go-hclog's Logger, for Raft, its
//     transport and its log store. A record is named by the hclog name
//     ("raft: ..."), and its fields become slog attributes.
//   - Writer adapts it to an io.Writer for a standard *log.Logger
//     (memberlist's, and the Printf-style lines of the node's own
//     packages): each Write is one record; a leading timestamp of the
//     log package is dropped, and a "[DEBUG]", "[INFO]", "[WARN]",
//     "[ERR]" or "[ERROR]" prefix sets the level.
//   - RaftStartNoise, RaftShutdownNoise and PeerHungUp recognise what
//     Raft logs above INFO that is no fault (a cluster forming, a node
//     stopping as it should, a peer hanging up), and ArgValue and ArgUint
//     read hclog's key, value lists, for an HclogOptions.Adjust to
//     re-level those lines (raft.go).
//
// The package knows nothing of toolnode: it imports only the standard
// library and go-hclog.
package logx
