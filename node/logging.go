package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"

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
			case n.closing.Load() && logx.RaftShutdownNoise(msg):
				return slog.LevelInfo
			case msg == "failed to decode incoming command" && logx.PeerHungUp(args):
				// A peer that stops (or drops a pooled connection)
				// resets it: no command was lost.
				return slog.LevelInfo
			case logx.RaftStartNoise(msg, args):
				return slog.LevelInfo
			case msg == "failed to get previous log" && logx.ArgUint(args, "previous-index") <= n.ri.expect.Load():
				// A commit notice that came before its entry (raftnode):
				// refused, and sent again.
				return slog.LevelDebug
			}
			return level
		},
	})
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
