package logx

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// HclogOptions shape the records of an hclog adapter.
type HclogOptions struct {
	// Name is the logger's name; records read "NAME: message", and
	// Named appends to it ("raft.wal").
	Name string
	// Quiet logs hclog's Info, Debug and Trace as slog Debug, so that a
	// chatty library shows only its warnings and errors at the default
	// level (Raft's info lines narrate every election and configuration
	// change).
	Quiet bool
	// Adjust, when set, may change the level of a record given its
	// level, message (without the name) and hclog's key, value list: a
	// library's ERROR that is expected in some state of the caller
	// becomes an INFO there.
	Adjust func(level slog.Level, msg string, args []any) slog.Level
}

// Hclog returns an hclog.Logger that logs into l.
func Hclog(l *slog.Logger, opt HclogOptions) hclog.Logger {
	return &hcLogger{l: l, opt: opt}
}

type hcLogger struct {
	l    *slog.Logger
	opt  HclogOptions
	args []any // implied by With
}

var _ hclog.Logger = (*hcLogger)(nil)

func (h *hcLogger) level(l hclog.Level) slog.Level {
	switch {
	case l == hclog.NoLevel || l == hclog.Off:
		return slog.LevelInfo
	case l >= hclog.Error:
		return slog.LevelError
	case l == hclog.Warn:
		return slog.LevelWarn
	case h.opt.Quiet:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

func (h *hcLogger) Log(l hclog.Level, msg string, args ...any) {
	level := h.level(l)
	if h.opt.Adjust != nil {
		level = h.opt.Adjust(level, msg, args)
	}
	ctx := context.Background()
	if !h.l.Enabled(ctx, level) {
		return
	}
	if h.opt.Name != "" {
		msg = h.opt.Name + ": " + msg
	}
	all := make([]any, 0, len(h.args)+len(args))
	all = append(append(all, h.args...), args...)
	h.l.Log(ctx, level, msg, attrs(all)...)
}

// attrs turns hclog's key, value list into slog attributes.
func attrs(kv []any) []any {
	out := make([]any, 0, len(kv)/2+1)
	for i := 0; i < len(kv); i += 2 {
		if i+1 == len(kv) {
			out = append(out, slog.Any("EXTRA_VALUE_AT_END", kv[i]))
			break
		}
		key := fmt.Sprint(kv[i])
		switch v := kv[i+1].(type) {
		case hclog.Format:
			if len(v) > 0 {
				if f, ok := v[0].(string); ok {
					out = append(out, slog.String(key, fmt.Sprintf(f, v[1:]...)))
					continue
				}
			}
			out = append(out, slog.String(key, fmt.Sprint(v...)))
		case error:
			out = append(out, slog.String(key, v.Error()))
		case fmt.Stringer:
			out = append(out, slog.String(key, v.String()))
		default:
			out = append(out, slog.Any(key, v))
		}
	}
	return out
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) enabled(l hclog.Level) bool {
	return h.l.Enabled(context.Background(), h.level(l))
}

func (h *hcLogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hcLogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hcLogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hcLogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hcLogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hcLogger) ImpliedArgs() []any { return append([]any(nil), h.args...) }

func (h *hcLogger) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *hcLogger) Name() string { return h.opt.Name }

func (h *hcLogger) Named(name string) hclog.Logger {
	c := *h
	if c.opt.Name != "" {
		name = c.opt.Name + "." + name
	}
	c.opt.Name = name
	return &c
}

func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.opt.Name = name
	return &c
}

// SetLevel does nothing: the level is the slog handler's.
func (h *hcLogger) SetLevel(hclog.Level) {}

// GetLevel is the lowest hclog level that is logged.
func (h *hcLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Error
}

func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

// StandardWriter logs each write as one record, at the level its
// "[LEVEL]" prefix says, else at opts.ForceLevel, else at Info.
func (h *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = h.level(opts.ForceLevel)
	}
	prefix := ""
	if h.opt.Name != "" {
		prefix = h.opt.Name + ": "
	}
	return &writer{l: h.l.With(attrs(h.args)...), level: level, prefix: prefix}
}
