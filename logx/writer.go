package logx

import (
	"context"
	"io"
	"log/slog"
	"strings"
)

// Writer returns a writer for a standard *log.Logger that turns each
// Write into one record of l. The log package's date and time, when the
// logger adds them, are dropped (the record has its own); a level prefix
// ("[DEBUG]", "[INFO]", "[WARN]", "[ERR]", "[ERROR]", as memberlist and
// hclog write them) sets the record's level, and a line without one is
// logged at level.
func Writer(l *slog.Logger, level slog.Level) io.Writer {
	return &writer{l: l, level: level}
}

// AdjustedWriter is Writer with a hook that may change a record's level
// given its level and message (without the level prefix).
func AdjustedWriter(l *slog.Logger, level slog.Level, adjust func(level slog.Level, msg string) slog.Level) io.Writer {
	return &writer{l: l, level: level, adjust: adjust}
}

type writer struct {
	l      *slog.Logger
	level  slog.Level
	prefix string // put before every message (an hclog name and ": ")
	adjust func(slog.Level, string) slog.Level
}

// Write logs p as one record. *log.Logger calls it once per message,
// with the message whole, so a message of several lines stays one record.
func (w *writer) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\r\n")
	msg = stripTimestamp(msg)
	level, msg := parseLevel(msg, w.level)
	if w.adjust != nil {
		level = w.adjust(level, msg)
	}
	if !w.l.Enabled(context.Background(), level) {
		return len(p), nil
	}
	w.l.Log(context.Background(), level, w.prefix+msg)
	return len(p), nil
}

// parseLevel strips a leading "[LEVEL]" and returns its level, or def
// when there is none.
func parseLevel(msg string, def slog.Level) (slog.Level, string) {
	if !strings.HasPrefix(msg, "[") {
		return def, msg
	}
	end := strings.IndexByte(msg, ']')
	if end < 0 {
		return def, msg
	}
	var level slog.Level
	switch msg[1:end] {
	case "TRACE", "DEBUG":
		level = slog.LevelDebug
	case "INFO":
		level = slog.LevelInfo
	case "WARN", "WARNING":
		level = slog.LevelWarn
	case "ERR", "ERROR":
		level = slog.LevelError
	default:
		return def, msg
	}
	return level, strings.TrimLeft(msg[end+1:], " ")
}

// stripTimestamp drops the "2006/01/02 15:04:05 " (and ".000000 ")
// prefix of log.LstdFlags and log.Lmicroseconds.
func stripTimestamp(msg string) string {
	rest, ok := skipDigits(msg, "dddd/dd/dd dd:dd:dd")
	if !ok {
		return msg
	}
	if strings.HasPrefix(rest, ".") {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		rest = rest[i:]
	}
	if !strings.HasPrefix(rest, " ") {
		return msg
	}
	return rest[1:]
}

// skipDigits matches s against pattern, where 'd' is any digit, and
// returns what follows.
func skipDigits(s, pattern string) (string, bool) {
	if len(s) < len(pattern) {
		return s, false
	}
	for i := 0; i < len(pattern); i++ {
		c := s[i]
		if pattern[i] == 'd' {
			if c < '0' || c > '9' {
				return s, false
			}
		} else if c != pattern[i] {
			return s, false
		}
	}
	return s[len(pattern):], true
}
