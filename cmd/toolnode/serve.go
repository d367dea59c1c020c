package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolnode/toolnode/examples"
	"github.com/toolnode/toolnode/logx"
	"github.com/toolnode/toolnode/node"
)

func serve(args []string) (err error) {
	envFile := configPath("env")
	if err := loadEnvFile(envFile); err != nil {
		return err
	}
	var o serveOptions
	fs := serveFlags(&o)
	cfg := &o.cfg
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	cfg.CredentialFiles = []string{envFile}
	// From here on an error is logged, not printed: stderr is all records.
	defer func() {
		if err != nil {
			logger.Error("toolnode: " + err.Error())
			err = errReported
		}
	}()
	if cfg.ReconnectTimeout <= 0 {
		cfg.ReconnectTimeout = -1 // off: cluster reads 0 as its default
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.join != "" {
		cfg.Join = strings.Split(o.join, ",")
	}
	if o.workdirs != "" {
		cfg.Workdirs = strings.Split(o.workdirs, ",")
	}
	if o.toolEnv != "" {
		cfg.ToolEnv = strings.Split(o.toolEnv, ",")
	}
	if o.encrypt != "" {
		key, err := base64.StdEncoding.DecodeString(o.encrypt)
		if err != nil || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
			return errors.New("-encrypt needs a base64 key of 32 bytes (toolnode keygen makes one)")
		}
		cfg.EncryptKey = key
	}
	if o.examples {
		tools, agents, err := examples.Extract(filepath.Join(cfg.DataDir, "examples"))
		if err != nil {
			return fmt.Errorf("extract examples: %w", err)
		}
		if !set["tools"] {
			cfg.ToolsDir = tools
		}
		if !set["agents"] {
			cfg.AgentsDir = agents
		}
	}

	if os.Getenv("GOMAXPROCS") == "" {
		// A client runs on one processor (node/procs.go): its idle
		// wake-ups each woke a second thread. $GOMAXPROCS keeps a
		// setting of the operator's.
		cfg.ClientProcs = 1
	}
	cfg.LogOutput = os.Stderr
	logger.Info("toolnode: starting", "data", cfg.DataDir, "tools", orNone(cfg.ToolsDir), "agents", orNone(cfg.AgentsDir))
	// Signals are caught before the node starts: starting can wait for a
	// leader, and a SIGTERM then must still stop the node cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	// SIGHUP reopens the audit log (logrotate moves it, then signals).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	n, err := node.New(*cfg)
	if err != nil {
		return err
	}
	var s os.Signal
	for s == nil {
		select {
		case s = <-sig:
		case <-hup:
			n.ReopenAudit()
		}
	}
	logger.Info(fmt.Sprintf("toolnode: %v: shutting down", s))
	signal.Stop(sig)
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err == nil {
			logger.Info("toolnode: stopped")
		}
		return err
	case <-time.After(30 * time.Second):
		return errors.New("shutdown took longer than 30s")
	}
}

// serveOptions are what the flags of toolnode serve set.
type serveOptions struct {
	cfg                              node.Config
	join, encrypt, workdirs, toolEnv string
	examples                         bool
	logLevel, logFormat              string
}

// serveFlags is the flag set of toolnode serve, writing into o; its
// defaults read the environment ($HOME, $XDG_*, $OLLIE_TOOLS_PATH,
// $TOOLNODE_GOSSIP_KEY). docs/flags.md is generated from it.
func serveFlags(o *serveOptions) *flag.FlagSet {
	fs := newFlagSet("serve", "[serve] [flags]")
	cfg := &o.cfg
	fs.StringVar(&cfg.Name, "name", "", "node `NAME` (default: hostname)")
	fs.StringVar(&cfg.DataDir, "data", dataDefault(), "data `DIR`: the Raft log and snapshots, published executables, scratch directories")
	fs.StringVar(&cfg.ToolsDir, "tools", toolsDefault(), "tools `DIR`, watched and published (default $OLLIE_TOOLS_PATH, else $XDG_CONFIG_HOME/ollie/tools)")
	fs.StringVar(&cfg.AgentsDir, "agents", configPath("agents"), "agent profiles `DIR`, watched and published")
	fs.StringVar(&cfg.McpServersDir, "mcp-servers", configPath("mcp"), "upstream MCP server definitions `DIR` (NAME.json), watched and published")
	fs.StringVar(&cfg.P9Addr, "9p", node.DefaultP9Addr, "9P listen `ADDR`")
	fs.StringVar(&cfg.GossipAddr, "gossip", node.DefaultGossipAddr, "memberlist bind `ADDR`")
	fs.StringVar(&cfg.ClusterAddr, "cluster", node.DefaultClusterAddr, "Raft and node-to-node `ADDR`")
	fs.StringVar(&cfg.Advertise, "advertise", "", "`HOST` peers dial to reach this node, for gossip and the cluster port (behind NAT, or when binding 0.0.0.0)")
	fs.StringVar(&o.join, "join", "", "gossip `ADDR`s of existing members, comma-separated; tried again until one answers")
	fs.IntVar(&cfg.Voters, "voters", node.DefaultVoters, "Raft voters the leader keeps")
	fs.IntVar(&cfg.Servers, "servers", 0, "Raft servers (voters and non-voters) the leader keeps; every other node is a client (default: -voters)")
	fs.BoolVar(&cfg.Server, "server", false, "ask the leader to make this node a Raft server (a non-voter beyond -voters) rather than a client")
	fs.StringVar(&o.encrypt, "encrypt", os.Getenv("TOOLNODE_GOSSIP_KEY"), "gossip `KEY` (base64, from toolnode keygen), which also authenticates and encrypts the cluster port (default $TOOLNODE_GOSSIP_KEY, which keeps it out of ps)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "the cluster port's mutual TLS: this node's certificate `FILE`")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "the cluster port's mutual TLS: the certificate's key `FILE`")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "the cluster port's mutual TLS: the CA `FILE` that signs every node's certificate")
	fs.StringVar(&cfg.P9TLSCert, "9p-tls-cert", "", "9P over TLS: the 9P server's certificate `FILE` (with -9p-tls-key)")
	fs.StringVar(&cfg.P9TLSKey, "9p-tls-key", "", "9P over TLS: the certificate's private key `FILE`")
	fs.StringVar(&cfg.MCPAddr, "mcp", "", "serve MCP over Streamable HTTP on `ADDR` (e.g. 127.0.0.1:9566); off loopback only over HTTPS, with -9p-tls-*")
	fs.StringVar(&cfg.MetricsAddr, "metrics", "", "serve Prometheus /metrics, /healthz and /readyz on `ADDR` (e.g. 127.0.0.1:9567); off loopback /metrics needs a token of role read")
	fs.DurationVar(&cfg.CallTimeout, "call-timeout", node.DefaultCallTimeout, "limit of one tool run")
	fs.BoolVar(&cfg.Yolo, "yolo", false, "run tools without the sandbox (logged loudly at start)")
	fs.StringVar(&cfg.P9Anon, "9p-anon", "", "`ROLE` of an attach without a token, on every listener: none, read, call, publish or admin; anything but none is logged loudly (default none)")
	fs.StringVar(&cfg.AuditFile, "audit", "", "append one JSON line per state change and per call to `FILE` (reopened on SIGHUP)")
	fs.IntVar(&cfg.MaxCalls, "max-calls", 0, "calls run at once on this node; more wait in turn, then fail \"node busy\" (default 4 x cores)")
	cfg.MaxExecSize = node.DefaultMaxExecSize
	fs.Func("max-exec-size", "largest executable published through this node, a `SIZE` in bytes or with KiB, MiB, GiB; the leader's own bounds what any node may publish (default 256MiB)", func(v string) error {
		n, err := parseSize(v)
		if err != nil {
			return err
		}
		cfg.MaxExecSize = n
		return nil
	})
	fs.IntVar(&cfg.KeepVersions, "keep-versions", node.DefaultKeepVersions, "newest versions of each tool the cluster keeps for v/ and rollback (the live one always), at most 1000; the leader's value holds")
	fs.StringVar(&cfg.SignKey, "sign-key", "", "OpenSSH private key `FILE` (unencrypted) this node signs its tools directory's tools with when they have no NAME.sig; tools may not read it")
	fs.StringVar(&o.workdirs, "workdirs", "", "`DIR`s a session's cwd must lie in, comma-separated")
	fs.StringVar(&o.toolEnv, "tool-env", "", "variables passed to tools beyond the allow-list, comma-separated (`NAME`, or PREFIX* for a prefix)")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "start even when a port leaves loopback without its credential (logged loudly at every start)")
	fs.DurationVar(&cfg.ReconnectTimeout, "reconnect-timeout", 24*time.Hour, "how long a failed gossip member is tried again before it is forgotten (0: never tried again)")
	fs.DurationVar(&cfg.CommitTimeout, "raft-commit-timeout", node.DefaultCommitTimeout, "how often an idle Raft leader sends followers the commit index (hashicorp/raft's CommitTimeout; a fallback: the leader tells every server of each commit at once)")
	fs.BoolVar(&o.examples, "examples", false, "serve the example tools and profiles built into the binary (extracted into DATA/examples), unless -tools/-agents are given")
	fs.StringVar(&o.logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", logx.Text, "log format on stderr, one record a line: text (key=value) or json")
	return fs
}

// newLogger makes the process's log on stderr and routes the standard
// logger into it too (a dependency of the Raft log store writes through
// it), so that everything the node writes is one format.
func newLogger(format, level string) (*slog.Logger, error) {
	lv, err := logx.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	logger, err := logx.New(os.Stderr, format, lv)
	if err != nil {
		return nil, err
	}
	slog.SetDefault(logger)
	log.SetOutput(logx.Writer(logger, slog.LevelInfo))
	log.SetFlags(0)
	log.SetPrefix("")
	return logger, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func home() string {
	h, _ := os.UserHomeDir()
	return h
}

// configPath is $XDG_CONFIG_HOME/ollie/NAME (default ~/.config/ollie/NAME).
func configPath(name string) string {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		base = filepath.Join(home(), ".config")
	}
	return filepath.Join(base, "ollie", name)
}

func dataDefault() string {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" {
		base = filepath.Join(home(), ".local", "share")
	}
	return filepath.Join(base, "toolnode")
}

func toolsDefault() string {
	if p := os.Getenv("OLLIE_TOOLS_PATH"); p != "" {
		return expandHome(p)
	}
	return configPath("tools")
}

func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return filepath.Join(home(), p[1:])
	}
	return p
}

// loadEnvFile reads KEY=VALUE lines into the environment. The real
// environment wins: a variable already set is left alone. A missing file
// is no error.
func loadEnvFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		text = strings.TrimPrefix(text, "export ")
		k, v, ok := strings.Cut(text, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%s:%d: want KEY=VALUE, got %q", path, line, text)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if _, set := os.LookupEnv(k); set {
			continue
		}
		os.Setenv(k, expandHome(os.ExpandEnv(v)))
	}
	return sc.Err()
}

// parseSize reads a byte count: digits, optionally followed by KiB, MiB or
// GiB (K, M, G and KB, MB, GB mean the same powers of two).
func parseSize(v string) (int64, error) {
	num := strings.TrimRight(v, "KMGiBkmgb")
	unit := strings.ToLower(v[len(num):])
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size (bytes, or a number with KiB, MiB or GiB)", v)
	}
	shift := map[string]uint{"": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20, "g": 30, "gb": 30, "gib": 30}
	sh, ok := shift[unit]
	if !ok || n > (1<<62)>>sh {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB or GiB)", v)
	}
	return n << sh, nil
}
