package testcluster

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer collects a process's output; it is read while written.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is how many bytes have been written.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Since is what was written after the first from bytes.
func (b *Buffer) Since(from int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[min(from, b.buf.Len()):])
}

// Proc is one running process (a toolnode node, or a process a benchmark
// compares it with), its output collected in Log.
type Proc struct {
	Cmd  *exec.Cmd
	Log  *Buffer
	Done chan struct{} // closed when the process has exited and Log is complete
	err  error
}

// waitDelay bounds how long a leftover child holding the output can keep
// a Proc from being done once the process itself has exited.
const waitDelay = 5 * time.Second

// Start starts cmd with environ as its environment and its output in the
// Proc's Log, without waiting for it.
func Start(cmd *exec.Cmd, environ []string) (*Proc, error) {
	p := &Proc{Cmd: cmd, Log: &Buffer{}, Done: make(chan struct{})}
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = p.Log, p.Log
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = waitDelay
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.Done)
	}()
	return p, nil
}

// StartT is Start for a test: a failure to start fails tb, and at the
// end of the test the process is killed if still running and its log,
// under label, shown if the test failed.
func StartT(tb testing.TB, label string, cmd *exec.Cmd, environ []string) *Proc {
	tb.Helper()
	p, err := Start(cmd, environ)
	if err != nil {
		tb.Fatalf("start %s: %v", label, err)
	}
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("log of %s (pid %d):\n%s", label, p.Pid(), p.Log.String())
		}
	})
	return p
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned; it is set once Done is
// closed.
func (p *Proc) Err() error {
	<-p.Done
	return p.err
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	if !p.Exited() {
		p.Cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.Done
}

// Stop sends SIGTERM and waits up to d for the process to exit, then
// kills it. It reports whether the process exited of the SIGTERM.
func (p *Proc) Stop(d time.Duration) bool {
	if !p.Exited() {
		p.Cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.Done:
		return true
	case <-time.After(d):
		p.Kill()
		return false
	}
}

// Tail is the last n bytes of the process's output, for failure messages.
func (p *Proc) Tail(n int) string {
	s := p.Log.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// tailBytes is how much output a WaitLog error shows.
const tailBytes = 4000

// WaitLog polls the output until it has a line with every one of subs
// and returns that line. It fails when d passes first or the process
// exits without such a line, with the output's tail in the error.
func (p *Proc) WaitLog(d time.Duration, subs ...string) (string, error) {
	var line string
	exited := false
	Poll(d, func() bool {
		exited = p.Exited() // before the read: the log is complete once exited
		line = findLine(p.Log.String(), subs)
		return line != "" || exited
	})
	switch {
	case line != "":
		return line, nil
	case exited:
		return "", fmt.Errorf("the process exited (%v) with no log line with %q; output:\n%s", p.err, subs, p.Tail(tailBytes))
	}
	return "", fmt.Errorf("no log line with %q within %v; output:\n%s", subs, d, p.Tail(tailBytes))
}

// findLine is the first line of s with every one of subs, or "".
func findLine(s string, subs []string) string {
	for _, line := range strings.Split(s, "\n") {
		ok := line != ""
		for _, sub := range subs {
			ok = ok && strings.Contains(line, sub)
		}
		if ok {
			return line
		}
	}
	return ""
}

// GoTool is the go command that builds the binaries under test.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// RaceEnabled reports whether this test binary was built with -race, so
// the binaries it starts are built the same way.
func RaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
