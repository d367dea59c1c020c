package node

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/logx"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/sandbox"
)

// Config is everything a node needs. Zero values take the defaults of
// DESIGN §5 where one exists.
type Config struct {
	Name      string // node name; default: hostname
	DataDir   string // raft log, snapshots, the blob store of executables, scratch
	ToolsDir  string // watched and published; "" = none
	AgentsDir string // agent profiles; "" = none
	// McpServersDir holds upstream MCP server definitions (NAME.json),
	// watched and published (upstream.go); "" = none.
	McpServersDir string

	P9Addr      string // default 127.0.0.1:9564
	GossipAddr  string // default 127.0.0.1:7946
	ClusterAddr string // default 127.0.0.1:9565
	Advertise   string // host peers use to reach this node
	Join        []string
	Voters      int    // default 5
	Servers     int    // servers (voters and non-voters) the leader keeps; default: Voters
	Server      bool   // this node asks to be a server (-server)
	EncryptKey  []byte // gossip key
	TLSCert     string
	TLSKey      string
	TLSCA       string

	// ReconnectTimeout is how long a failed gossip member is tried again
	// before it is forgotten; 0 = 24 h, negative = never tried again.
	ReconnectTimeout time.Duration

	MCPAddr     string // MCP over Streamable HTTP (loopback); "" = off
	MetricsAddr string // /metrics, /healthz, /readyz (loopback); "" = off

	// P9TLSCert and P9TLSKey, both set, make the 9P listener speak TLS
	// 1.3 with this certificate (-9p-tls-cert, -9p-tls-key).
	P9TLSCert string
	P9TLSKey  string

	// MaxExecSize is the largest executable this node takes through t/
	// or its tools directory, and, when it leads, lets a command name
	// (-max-exec-size; default raftfsm.DefaultMaxExecSize, 256 MiB).
	MaxExecSize int64
	// BlobGrace is how long an executable no tool refers to stays in the
	// blob store before it is removed; default DefaultBlobGrace.
	BlobGrace time.Duration
	// KeepVersions is how many of the newest versions of each tool the
	// cluster keeps, the live one always kept besides (-keep-versions;
	// default DefaultKeepVersions, at most raftfsm.MaxKeepVersions); the
	// leader's value holds.
	KeepVersions int
	// SignKey is an OpenSSH private key file this node signs its tools
	// directory's tools with when they have no NAME.sig (-sign-key); ""
	// = none. Tools may not read it.
	SignKey string

	CallTimeout time.Duration // default 30s
	AuditFile   string        // the audit log (-audit); "" = none
	Yolo        bool          // run tools without the sandbox
	MaxCalls    int           // calls run at once on this node; default 4 × cores
	Workdirs    []string      // trees a session's cwd must lie in; none: anywhere the rules allow
	ToolEnv     []string      // variables passed to sandboxed tools beyond the allow-list (-tool-env)
	// CredentialFiles are files the node read credentials from beyond
	// its flags (the env file): sandboxed tools cannot read them.
	CredentialFiles []string

	// ClientProcs, when above 0, is GOMAXPROCS while this node is a
	// client (package procs); a server has the runtime's default. GOMAXPROCS
	// is the process's: set it only where the process runs one node.
	ClientProcs int

	// P9Anon is the role of an attach without a token: none, read,
	// call, publish or admin; "" is none, on every listener (DESIGN §7
	// "Local trust").
	P9Anon string

	// Insecure starts the node even when a port leaves loopback without
	// its credential (DESIGN §7 "Ports"; ports.go), and says so loudly in
	// the log at every start.
	Insecure bool
	// MaxClusterConns bounds the cluster port's concurrent connections;
	// default DefaultMaxClusterConns. Excess connections are closed at once,
	// with a log line.
	MaxClusterConns int

	// ResolveEvery is how often variants are re-resolved against the host
	// (a binary can be installed later). Default 30s.
	ResolveEvery time.Duration
	// Debounce is how long the watched directories must be quiet before
	// they are rescanned. Default 100ms.
	Debounce time.Duration
	// Host is what variants are resolved against; default the real host.
	Host *registry.Host

	// LogOutput receives the node's log; default stderr.
	LogOutput io.Writer
	// Logger, when set, is the node's log and LogOutput is not used;
	// default: logx text records of level info and above to LogOutput.
	// Raft, memberlist and the node's own lines all go through it.
	Logger *slog.Logger

	// P9Listener and ClusterListener, when set, are used instead of
	// listening on P9Addr and ClusterAddr (tests pass port-0 listeners).
	P9Listener      net.Listener
	ClusterListener net.Listener

	// RaftTransport replaces Raft over the cluster port (fast multi-node
	// tests use raft's InmemTransport); GossipTransport replaces
	// memberlist's network (memberlist's MockNetwork); Dial replaces
	// dialing a peer's cluster port for forwarded writes (tests connect
	// in-process nodes with net.Pipe and ServeClusterConn).
	RaftTransport   raft.Transport
	GossipTransport memberlist.Transport
	Dial            func(addr string, timeout time.Duration) (net.Conn, error)

	// CommitTimeout is Raft's: how long a leader with nothing to send
	// waits before it sends followers the commit index anyway; default
	// DefaultCommitTimeout. After each commit the leader tells every
	// server at once with a commit notice (raftnode), so this is the
	// fallback for a notice that was lost.
	CommitTimeout time.Duration

	// StreamLeaderless is how long a client follows a server that says
	// it has no leader (cut off from it) before it moves to another;
	// default stream.DefaultLeaderless.
	StreamLeaderless time.Duration
}

// DefaultCommitTimeout is five times hashicorp/raft's own default (50 ms):
// followers learn each commit from the leader's commit notice at once
// (raftnode), so the idle leader's periodic AppendEntries to each
// follower is only a fallback, and at 50 ms it is half of an idle
// leader's wake-ups (BENCHMARKS.md).
const DefaultCommitTimeout = 250 * time.Millisecond

// Defaults of DESIGN §5.
const (
	DefaultP9Addr      = "127.0.0.1:9564"
	DefaultGossipAddr  = "127.0.0.1:7946"
	DefaultClusterAddr = "127.0.0.1:9565"
	// DefaultMaxExecSize is -max-exec-size's default, 256 MiB.
	DefaultMaxExecSize = raftfsm.DefaultMaxExecSize
	// DefaultKeepVersions is -keep-versions' default, 10.
	DefaultKeepVersions = raftfsm.DefaultKeepVersions
	DefaultVoters       = 5
	DefaultCallTimeout  = 30 * time.Second
)

func (c *Config) fill() error {
	if c.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: no -name and no hostname: %w", err)
		}
		c.Name = h
	}
	if err := registry.ValidName(c.Name); err != nil {
		return fmt.Errorf("node name: %w", err)
	}
	if c.DataDir == "" {
		return errors.New("a data directory is required")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("data directory %q: %w", c.DataDir, err)
	}
	c.DataDir = abs
	for _, d := range []*string{&c.ToolsDir, &c.AgentsDir, &c.McpServersDir} {
		if *d != "" {
			if *d, err = filepath.Abs(*d); err != nil {
				return err
			}
		}
	}
	if err := sandbox.CheckToolEnv(c.ToolEnv); err != nil {
		return err
	}
	if c.P9Addr == "" {
		c.P9Addr = DefaultP9Addr
	}
	if c.GossipAddr == "" {
		c.GossipAddr = DefaultGossipAddr
	}
	if c.ClusterAddr == "" {
		c.ClusterAddr = DefaultClusterAddr
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.Voters <= 0 {
		c.Voters = DefaultVoters
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.MaxCalls <= 0 {
		c.MaxCalls = 4 * runtime.NumCPU()
	}
	if c.MaxExecSize <= 0 {
		c.MaxExecSize = DefaultMaxExecSize
	}
	if c.BlobGrace <= 0 {
		c.BlobGrace = DefaultBlobGrace
	}
	if c.KeepVersions <= 0 {
		c.KeepVersions = DefaultKeepVersions
	}
	if c.KeepVersions > raftfsm.MaxKeepVersions {
		return fmt.Errorf("-keep-versions %d: at most %d", c.KeepVersions, raftfsm.MaxKeepVersions)
	}
	c.Workdirs = append([]string(nil), c.Workdirs...) // the caller's slice stays as it was
	for i, w := range c.Workdirs {
		abs, err := filepath.Abs(w)
		if err != nil {
			return fmt.Errorf("-workdirs %q: %w", w, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return fmt.Errorf("-workdirs %q is not a directory", w)
		}
		c.Workdirs[i] = abs
	}
	if c.ResolveEvery <= 0 {
		c.ResolveEvery = 30 * time.Second
	}
	if c.Debounce <= 0 {
		c.Debounce = 100 * time.Millisecond
	}
	if c.LogOutput == nil {
		c.LogOutput = os.Stderr
	}
	if c.Logger == nil {
		c.Logger, _ = logx.New(c.LogOutput, logx.Text, slog.LevelInfo)
	}
	if c.MaxClusterConns <= 0 {
		c.MaxClusterConns = DefaultMaxClusterConns
	}
	if _, err := c.checkPorts(); err != nil {
		return err
	}
	return nil
}
