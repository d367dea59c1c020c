package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/mcpbridge"
	"github.com/toolnode/toolnode/node"
)

// mcpStdio is `toolnode mcp [-a ADDR] [-profile P]`: an MCP server on
// standard input and output, the way desktop clients start servers, for
// one agent of its own on the node at ADDR. Its log goes to standard
// error; standard output is the protocol's.
//
// When the node ends the 9P connection (the token was revoked, or the
// node stopped) the MCP session cannot go on: every call would fail. It
// ends then, with the reason on standard error and exit status 1, so the
// MCP client sees the server gone and its user reads why.
func mcpStdio(args []string) error {
	if len(args) > 0 && args[0] == "import" {
		return mcpImport(args[1:])
	}
	fs := newFlagSet("mcp", "mcp [-a ADDR] [-profile P]")
	addr := fs.String("a", defaultAddr(), "node 9P address")
	fs.StringVar(addr, "addr", defaultAddr(), "node 9P address (same as -a)")
	profile := fs.String("profile", "", "make the agent from this profile (a/NAME.json)")
	cr := &creds{}
	fs.StringVar(&cr.data, "data", "", "the node's data dir, whose "+node.AdminTokenFile+" is presented without $TOOLNODE_TOKEN (default "+dataDefault()+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	logger := log.New(os.Stderr, "toolnode mcp: ", log.LstdFlags)
	if os.Getenv("GOMAXPROCS") == "" {
		// One processor: the bridge relays one MCP session, one message
		// at a time, and with one processor the hand-overs between its
		// goroutines (the 9P reply read by one, answered by another) stay
		// on one thread instead of waking a second one for each.
		runtime.GOMAXPROCS(1)
	}
	var wc *mcpbridge.Conn
	fsys, err := cr.mountWith(*addr, func(nc net.Conn) io.ReadWriteCloser {
		wc = mcpbridge.WatchConn(nc)
		return wc
	})
	if err != nil {
		return err
	}
	b, err := mcpbridge.New(fsys, mcpbridge.Options{Profile: *profile, Logf: logger.Printf, Msize: wc.Msize()})
	if err != nil {
		fsys.Close()
		return err
	}
	// Closing the bridge and the connection talks over the connection
	// (clunks, the session's kill). Once the node has ended it there is
	// nothing to clean up there (every request then fails at once,
	// answered by wc): the process just ends.
	defer func() {
		if wc.Err() == nil {
			b.Close()
			fsys.Close()
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-wc.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	stdin, restore := pollableStdin(logger)
	defer restore()
	err = b.Server().Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: nopCloser{os.Stdout}})
	if cerr := wc.Err(); cerr != nil {
		return connEnded(cr, *addr, cerr)
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// connEnded says why the node ended the bridge's 9P connection: an attach
// with the same token, refused, names a revoked token; one that succeeds
// means the node dropped the connection for another reason.
func connEnded(cr *creds, addr string, cause error) error {
	fsys, err := cr.mount(addr)
	if err != nil {
		return fmt.Errorf("the node at %s ended the 9P connection (%v), and a new attach fails: %v; ending the MCP session", addr, cause, err)
	}
	fsys.Close()
	return fmt.Errorf("the node at %s ended the 9P connection (%v); ending the MCP session", addr, cause)
}

// pollableStdin is standard input read through Go's network poller when
// it is a pipe or a socket (as MCP clients start servers), so that no
// thread sits in a blocking read(2) between messages. A thread blocked in
// a system call keeps the runtime's monitor (sysmon) polling every 20 µs
// to take its processor back: about thirty wake-ups of the process, and
// CPU time taken from the node and the tool, for every tools/call that
// waits on a tool. restore puts the blocking mode back, for whatever
// shares the pipe after this process. A terminal or a file is left as it
// is.
func pollableStdin(logger *log.Logger) (stdin io.ReadCloser, restore func()) {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil {
		return os.Stdin, func() {}
	}
	if t := st.Mode & syscall.S_IFMT; t != syscall.S_IFIFO && t != syscall.S_IFSOCK {
		return os.Stdin, func() {}
	}
	if err := syscall.SetNonblock(0, true); err != nil {
		logger.Printf("standard input stays in blocking mode: %v", err)
		return os.Stdin, func() {}
	}
	f := os.NewFile(0, "/dev/stdin") // non-blocking now: os registers it with the poller
	return polledStdin{f}, func() { syscall.SetNonblock(0, false) }
}

// polledStdin is standard input through the poller. Close ends a read in
// progress without closing descriptor 0, which must not be reused by a
// connection made after the session (connEnded's attach) that restore
// would then put in blocking mode.
type polledStdin struct{ f *os.File }

func (s polledStdin) Read(p []byte) (int, error) { return s.f.Read(p) }

func (s polledStdin) Close() error { return s.f.SetReadDeadline(time.Now()) }

// nopCloser is standard output for the MCP transport, which closes its
// writer when the session ends: the process's log and exit come after.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
