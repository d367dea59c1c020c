package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"
)

// FlushInterval bounds how long a record waits in the buffer.
const FlushInterval = 200 * time.Millisecond

// Record is one line of the log.
type Record struct {
	Time     time.Time     // when the action started
	Node     string        // the node that served it
	Who      string        // a token's name, anon@ADDR, or node:NAME
	Via      string        // the node a routed call came from, if any
	Action   string        // publish-meta, new-session, load, call, ...
	Target   string        // what it acted on: a tool, session, agent
	Err      error         // nil: the action succeeded
	Duration time.Duration // how long it took
}

// line is a Record as written: field names and order are the format.
type line struct {
	Time       string  `json:"time"`
	Node       string  `json:"node"`
	Who        string  `json:"who"`
	Via        string  `json:"via,omitempty"`
	Action     string  `json:"action"`
	Target     string  `json:"target"`
	Result     string  `json:"result"`
	DurationMS float64 `json:"duration_ms"`
}

// Log is an open audit log. A nil *Log records nothing.
type Log struct {
	path string
	logf func(format string, args ...any)

	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	closed  bool
	failing bool        // the last write or flush failed: logged once
	timer   *time.Timer // pending flush, nil when the buffer is empty
}

// Open opens (creating it, mode 0600) the log at path for appending.
// logf receives write errors (nil: log.Printf).
func Open(path string, logf func(format string, args ...any)) (*Log, error) {
	if logf == nil {
		logf = log.Printf
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	return &Log{path: path, logf: logf, f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

func openFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}

// Path is the file the log appends to.
func (l *Log) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Write appends one record. It never fails: an error is logged.
func (l *Log) Write(r Record) {
	if l == nil {
		return
	}
	ln := line{
		Time:       r.Time.UTC().Format(time.RFC3339Nano),
		Node:       r.Node,
		Who:        r.Who,
		Via:        r.Via,
		Action:     r.Action,
		Target:     r.Target,
		Result:     "ok",
		DurationMS: float64(r.Duration.Microseconds()) / 1000,
	}
	if r.Err != nil {
		ln.Result = r.Err.Error()
	}
	b, err := json.Marshal(ln)
	if err != nil { // cannot happen: strings and a float
		l.logf("audit: encoding a record: %v", err)
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.logf("audit: record after close, not written: %s", b)
		return
	}
	_, err = l.w.Write(b)
	l.noteErr("writing", err)
	if l.timer == nil {
		l.timer = time.AfterFunc(FlushInterval, l.timedFlush)
	}
}

func (l *Log) timedFlush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if !l.closed {
		l.noteErr("writing", l.w.Flush())
	}
}

// noteErr logs the first of a run of failures and the recovery; l.mu is
// held.
func (l *Log) noteErr(what string, err error) {
	switch {
	case err != nil && !l.failing:
		l.failing = true
		l.logf("audit: %s %s: %v; records may be lost until it works again", what, l.path, err)
	case err == nil && l.failing:
		l.failing = false
		l.logf("audit: writing %s works again", l.path)
	}
}

// Flush writes what is buffered to the file.
func (l *Log) Flush() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	err := l.w.Flush()
	l.noteErr("writing", err)
	return err
}

// Reopen writes what is buffered to the file open now, closes it and
// opens the path again: after logrotate moved the file away, a new one
// is made there. If the path cannot be opened the old file is kept.
func (l *Log) Reopen() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("audit log: reopen after close")
	}
	flushErr := l.w.Flush()
	l.noteErr("writing", flushErr)
	f, err := openFile(l.path)
	if err != nil {
		return err
	}
	old := l.f
	l.f = f
	l.w.Reset(f)
	if err := old.Close(); err != nil {
		l.logf("audit: closing the previous file of %s: %v", l.path, err)
	}
	return flushErr
}

// Close flushes the buffer, syncs the file to disk and closes it. Later
// records are not written (each is logged).
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	err := l.w.Flush()
	if serr := l.f.Sync(); err == nil {
		err = serr
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	return nil
}
