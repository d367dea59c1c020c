package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// pipeGrace is how long, once the tool's process group is gone, Run waits
// for its pipes to reach end of file. Only a process that left the group
// (setsid) can hold them open longer; the pipes are then closed on it.
const pipeGrace = 250 * time.Millisecond

// pipeAtomic is the most a pipe takes in one write whatever its buffer
// (PIPE_BUF; a pipe's buffer is at least that).
const pipeAtomic = 4096

// proc is one process to run.
type proc struct {
	argv   []string // argv[0] is an absolute path
	dir    string
	env    []string
	stdin  []byte
	outCap int64
	sb     *sandboxSpec // non-nil: start sandboxed

	cg     *containment // nil: the process group is all that is killed
	group  *callGroup   // the call's cgroups made ahead; nil: made here from cg
	thread *callThread  // its thread made ahead, in group; nil: made here

	started func() // called once the tool runs, if not nil
	// after takes the work that can wait until the call has answered
	// (the thread let go, the cgroups taken back), to do it in order; nil:
	// runProcess does it before it returns.
	after func(func())
}

// runProcess runs p as the leader of a new process group, feeding stdin
// and collecting stdout (up to outCap) and the tail of stderr. On ctx done
// or stdout over the cap it kills the group. When the leader has exited
// (before it is reaped, so its group id cannot be reused) the rest of the
// group is killed too. It returns once every process, goroutine and file
// it made is gone. err is only for a process that could not start.
func runProcess(ctx context.Context, p proc) (Result, error) {
	var res Result
	after := p.after
	if after == nil {
		after = func(f func()) { f() }
	}
	group := p.group
	thread := p.thread
	defer func() { // deferred first, so it runs after release
		if thread != nil {
			thread.discard() // never given its tool: ends now
		}
		after(func() { p.cg.recycle(group) })
	}()
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close() // some are closed already; nothing else to do
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return res, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return res, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return res, err
	}
	// fd 3, always open: the call's side channel (lines.go).
	sideR, sideW, err := pipe()
	if err != nil {
		closeAll()
		return res, err
	}
	lines := linesOf(ctx)
	// Arguments that fit in an empty pipe's buffer are written before the
	// tool starts: no goroutine has to wait to feed them.
	stdinWritten := false
	if len(p.stdin) <= pipeAtomic {
		_, _ = inW.Write(p.stdin) // into an empty pipe: at once
		_ = inW.Close()
		stdinWritten = true
	}
	if group == nil {
		if group, err = p.cg.newCall(); err != nil {
			closeAll()
			return res, err
		}
	}
	cmd := &exec.Cmd{
		Path:        p.argv[0],
		Args:        p.argv,
		Dir:         p.dir,
		Env:         p.env,
		Stdin:       inR,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{sideW},
		SysProcAttr: procAttr(),
	}
	group.setAttr(cmd.SysProcAttr)
	beginStart()
	if thread == nil {
		thread, err = newCallThread(p.sb != nil, group)
	}
	var release func()
	if err == nil {
		release, err = thread.start(cmd, p.sb)
		thread = nil // it ends by itself, or with release
	}
	if err == nil {
		endStart(cmd.Process.Pid)
	} else {
		endStart(0)
	}
	// The child has its own copies; ours would keep the pipes open.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	_ = sideW.Close()
	if err != nil {
		closeAll()
		return res, err
	}
	defer after(release)
	if p.started != nil {
		p.started()
	}
	pid := cmd.Process.Pid

	var pipes sync.WaitGroup
	if !stdinWritten {
		pipes.Go(func() {
			// An error means the tool did not read all of it (EPIPE),
			// which is its business.
			_, _ = inW.Write(p.stdin)
			_ = inW.Close()
		})
	}
	capHit := make(chan struct{})
	pipes.Go(func() { res.Stdout, res.OverCap = readCapped(outR, p.outCap, capHit) })
	var tail tailBuffer
	pipes.Go(func() { tail.readFrom(errR, lines) })
	pipes.Go(func() { readSide(sideR, lines) })

	exited := make(chan struct{})
	go func() {
		waitLeader(cmd)
		close(exited)
	}()
	select {
	case <-exited:
	case <-ctx.Done():
		res.Killed = ctx.Err()
		killGroup(pid)
		group.kill()
		<-exited
	case <-capHit:
		killGroup(pid)
		group.kill()
		<-exited
	}
	killGroup(pid)
	group.killExited()
	if !waitReaps {
		_ = cmd.Wait() // the status is read from ProcessState below
	}
	leaderReaped(pid)

	grace := time.AfterFunc(pipeGrace, closeAll)
	pipes.Wait()
	grace.Stop()
	closeAll()
	reapGroup(pid, pipeGrace)
	sweepOrphans(p.cg != nil && p.cg.subreaper, pipeGrace)

	if ps := cmd.ProcessState; ps != nil {
		res.Status = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = int(ws.Signal())
			res.Status = 128 + res.Signal
		}
	}
	res.StderrTail = tail.String()
	return res, nil
}

// killGroup kills every process of the group pgid.
func killGroup(pgid int) {
	// ESRCH: the group is gone already. EPERM: a member changed its
	// credentials (setuid), and nothing more can be done from here.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// reapGroup reaps the members of the killed group pgid that became this
// process's children: when the node is PID 1 (in a container) or a child
// subreaper, orphaned processes are reparented to it, and would stay
// zombies. Otherwise it returns at once (no child in the group).
func reapGroup(pgid int, within time.Duration) {
	deadline := time.Now().Add(within)
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR) || pid > 0:
			continue
		case err != nil: // ECHILD: none left
			return
		case time.Now().After(deadline):
			return // a killed member is slow to die; its new parent is us or init
		}
		time.Sleep(time.Millisecond) // killed members die within milliseconds
	}
}

// readCapped reads r to the end and returns what it read, unless that is
// more than limit bytes: then it closes hit and returns (nil, true) at
// once, leaving the writer blocked until it is killed.
func readCapped(r *os.File, limit int64, hit chan<- struct{}) ([]byte, bool) {
	var buf bytes.Buffer
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			if int64(buf.Len())+int64(n) > limit {
				close(hit)
				return nil, true
			}
			buf.Write(chunk[:n])
		}
		if err != nil {
			return buf.Bytes(), false
		}
	}
}

// tailBuffer keeps the last StderrTail bytes written to it.
type tailBuffer struct {
	buf []byte
}

func (t *tailBuffer) readFrom(r *os.File, lines LineFunc) {
	sp := splitter{fd: FdStderr, f: lines}
	defer sp.flush()
	chunk := make([]byte, 4<<10)
	for {
		n, err := r.Read(chunk)
		sp.write(chunk[:n])
		t.buf = append(t.buf, chunk[:n]...)
		if len(t.buf) > 2*StderrTail {
			t.buf = append(t.buf[:0], t.buf[len(t.buf)-StderrTail:]...)
		}
		if err != nil {
			return
		}
	}
}

// String returns the tail as text: at most StderrTail bytes, starting at a
// character boundary, invalid UTF-8 replaced, surrounding space trimmed.
func (t *tailBuffer) String() string {
	b := t.buf
	if len(b) > StderrTail {
		b = b[len(b)-StderrTail:]
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
}
