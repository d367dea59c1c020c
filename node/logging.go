package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/toolnode/toolnode/logx"
)

// The node logs through Config.Logger (log/slog). Its own lines are
// Printf-style through n.logger, bridged into slog at level INFO; the few
// whose level matters say so (warnf). Raft logs through an hclog adapter,
// memberlist through a writer that reads its "[LEVEL]" prefixes.

// warnf logs a line at level WARN: something is wrong or off, and the
// node goes on.
func (n *Node) warnf(format string, args ...any) {
	n.cfg.Logger.Warn(fmt.Sprintf(format, args...))
}

// raftShutdownNoise is what Raft logs, as a warning or an error, when the
// node stops as it should: a leader that hands over leadership sees the
// new leader's higher term on its next replication ("peer has newer
// term"), and a node already removed from the configuration does not
// stand for election. While the node closes these are INFO.
var raftShutdownNoise = map[string]bool{
	"peer has newer term, stopping replication":           true,
	"not part of stable configuration, aborting election": true,
}

// raftLogger is Raft's logger: its warnings and errors at the default
// level, its narration at DEBUG, and what it warns of as a healthy
// cluster forms and stops at INFO.
func (n *Node) raftLogger() hclog.Logger {
	return logx.Hclog(n.cfg.Logger, logx.HclogOptions{
		Name:  "raft",
		Quiet: true,
		Adjust: func(level slog.Level, msg string, args []any) slog.Level {
			switch {
			case level <= slog.LevelInfo:
			case n.closing.Load() && raftShutdownNoise[msg]:
				return slog.LevelInfo
			case msg == "failed to decode incoming command" && peerHungUp(args):
				// A peer that stops (or drops a pooled connection)
				// resets it: no command was lost.
				return slog.LevelInfo
			case raftStartNoise(msg, args):
				return slog.LevelInfo
			case msg == "failed to get previous log" && argUint(args, "previous-index") <= n.ri.expect.Load():
				// A commit notice that came before its entry (notice.go):
				// refused, and sent again.
				return slog.LevelDebug
			}
			return level
		},
	})
}

// raftStartNoise reports whether Raft's warning is what a healthy
// cluster logs as it forms: a node's first election, with no leader ever
// seen (a cluster of one bootstrapping), and a new member with an empty
// log being caught up from its first entry (on the leader and on the new
// member), and a client's idle Raft, in no configuration.
func raftStartNoise(msg string, args []any) bool {
	switch msg {
	case "heartbeat timeout reached, starting election":
		return fmt.Sprint(argValue(args, "last-leader-id")) == ""
	case "appendEntries rejected, sending older logs":
		return fmt.Sprint(argValue(args, "next")) == "1"
	case "failed to get previous log":
		return fmt.Sprint(argValue(args, "last-index")) == "0"
	case "no known peers, aborting election":
		// A client's Raft: it is in no configuration, and stays idle.
		return true
	}
	return false
}

// argValue is the value of key in hclog's key, value list, or nil.
func argValue(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == key {
			return args[i+1]
		}
	}
	return nil
}

// argUint is an unsigned value of hclog's key, value list, or the
// largest uint64 when there is none.
func argUint(args []any, key string) uint64 {
	v, err := strconv.ParseUint(fmt.Sprint(argValue(args, key)), 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return v
}

// peerHungUp reports whether an hclog "error" value is a connection the
// other end closed or reset.
func peerHungUp(args []any) bool {
	err, _ := argValue(args, "error").(error)
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// The decoder may flatten the error into its text.
	text := err.Error()
	return strings.Contains(text, syscall.ECONNRESET.Error()) || strings.Contains(text, net.ErrClosed.Error())
}

// gossipLogOutput is memberlist's log. Once the node closes, gossip that
// fails on the connection this node just closed is INFO.
func (n *Node) gossipLogOutput() io.Writer {
	return logx.AdjustedWriter(n.cfg.Logger, slog.LevelInfo, func(level slog.Level, msg string) slog.Level {
		if level > slog.LevelInfo && n.closing.Load() && strings.Contains(msg, net.ErrClosed.Error()) {
			return slog.LevelInfo
		}
		return level
	})
}

// logNotes logs what ParseMeta noted about a tool being published
// (legacy fields ignored and the like), one line each.
func (n *Node) logNotes(tool string, notes []string) {
	for _, note := range notes {
		n.logger.Printf("tools: %s.meta: %s", tool, note)
	}
}

// logDirs says at start which directories the node watches and publishes,
// and what happens with one that does not exist: it is watched for (its
// parent, and a poll), and published once it is created.
func (n *Node) logDirs() {
	for _, d := range []struct{ kind, dir string }{
		{"tools", n.cfg.ToolsDir}, {"agents", n.cfg.AgentsDir},
	} {
		switch fi, err := os.Stat(d.dir); {
		case d.dir == "":
			n.cfg.Logger.Info(d.kind + ": no directory to watch")
		case errors.Is(err, fs.ErrNotExist):
			n.warnf("%s: directory %s does not exist; watching for it: what it holds is published once it is created", d.kind, d.dir)
		case err != nil:
			n.warnf("%s: directory %s: %v; watching for it", d.kind, d.dir, err)
		case !fi.IsDir():
			n.warnf("%s: %s is not a directory; watching for a directory there", d.kind, d.dir)
		default:
			n.cfg.Logger.Info(fmt.Sprintf("%s: watching and publishing %s", d.kind, d.dir))
		}
	}
}
