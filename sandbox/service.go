package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// Service is a long-running process to start confined, as a tool's is:
// an upstream MCP server, which speaks on its standard input and output.
type Service struct {
	Argv []string // Argv[0] is an absolute path
	// Dir is its state directory: its working directory and TMPDIR, the
	// one tree it may write besides Write (and its HOME, when Env says
	// so).
	Dir     string
	Env     []string
	Network bool     // it may open TCP and UDP sockets
	Read    []string // trees it may read even where they are protected
	Write   []string // trees it may write
	Stderr  io.Writer
}

// Proc is a started Service. Stdin and Stdout are its standard input and
// output; closing Stdin is the usual way to end it, Kill the other.
type Proc struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser

	pid     int
	done    chan struct{}
	waitErr error
	once    sync.Once
}

// Start starts c confined like a call's tool (unless Off): Landlock on a
// thread of its own that lives as long as the process, in a process
// group of its own, killed when the node dies; reads everything but the
// protected trees (and Read), writes Dir and Write; without Network no
// TCP or UDP socket.
func (s *Sandbox) Start(c Service) (*Proc, error) {
	if len(c.Argv) == 0 || c.Dir == "" {
		return nil, errors.New("sandbox: a service needs a command and a directory")
	}
	var sb *sandboxSpec
	if !s.cfg.Off {
		sb = &sandboxSpec{view: s.view, readable: s.cfg.Readable, noNet: !c.Network, scratch: c.Dir}
		if !s.view.grants(c.Argv[0]) {
			sb.ro = append(sb.ro, c.Argv[0])
		}
		for _, d := range c.Read {
			s.grantCwd(sb, d, false)
		}
		for _, d := range c.Write {
			s.grantCwd(sb, d, true)
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderr := c.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	cmd := &exec.Cmd{
		Path: c.Argv[0], Args: c.Argv, Dir: c.Dir,
		Env:   append(c.Env[:len(c.Env):len(c.Env)], "TMPDIR="+c.Dir),
		Stdin: inR, Stdout: outW, Stderr: stderr,
		SysProcAttr: procAttr(),
	}
	beginStart()
	thread, err := newCallThread(sb != nil, nil)
	var release func()
	if err == nil {
		release, err = thread.start(cmd, sb)
	}
	inR.Close()
	outW.Close()
	if err != nil {
		endStart(0)
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("cannot start %s: %w", c.Argv[0], err)
	}
	pid := cmd.Process.Pid
	endStart(pid)
	p := &Proc{Stdin: inW, Stdout: outR, pid: pid, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		waitLeader(cmd)
		killGroup(pid)
		if !waitReaps {
			p.waitErr = cmd.Wait()
		} else if cmd.ProcessState != nil && !cmd.ProcessState.Success() {
			p.waitErr = &exec.ExitError{ProcessState: cmd.ProcessState}
		}
		leaderReaped(pid)
		release()
	}()
	return p, nil
}

// Kill kills its process group.
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

// Wait waits until it has exited and says how.
func (p *Proc) Wait() error {
	<-p.done
	return p.waitErr
}

// Done is closed once it has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }
