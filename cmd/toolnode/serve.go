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
	stopProfile, err := startProfile()
	if err != nil {
		return err
	}
	defer stopProfile()
	envFile := configPath("env")
	if err := loadEnvFile(envFile); err != nil {
		return err
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var (
		cfg      node.Config
		join     string
		encrypt  string
		useExamp bool
		toolEnv  string
	)
	fs.StringVar(&cfg.Name, "name", "", "node name (default: hostname)")
	fs.StringVar(&cfg.DataDir, "data", dataDefault(), "data dir")
	fs.StringVar(&cfg.ToolsDir, "tools", toolsDefault(), "tools dir to watch and publish")
	fs.StringVar(&cfg.AgentsDir, "agents", configPath("agents"), "agent profiles dir")
	fs.StringVar(&cfg.P9Addr, "9p", node.DefaultP9Addr, "9P listen address")
	fs.StringVar(&cfg.GossipAddr, "gossip", node.DefaultGossipAddr, "memberlist bind address")
	fs.StringVar(&cfg.ClusterAddr, "cluster", node.DefaultClusterAddr, "raft + node-to-node address")
	fs.StringVar(&cfg.Advertise, "advertise", "", "address peers use to reach this node")
	fs.StringVar(&join, "join", "", "gossip address(es) of existing members, comma-separated")
	fs.IntVar(&cfg.Voters, "voters", node.DefaultVoters, "raft voters the leader keeps")
	fs.IntVar(&cfg.Servers, "servers", 0, "raft servers (voters and non-voters) the leader keeps; the other nodes are clients (default: -voters)")
	fs.BoolVar(&cfg.Server, "server", false, "ask the leader to make this node a raft server (a non-voter beyond -voters) rather than a client")
	fs.StringVar(&encrypt, "encrypt", os.Getenv("TOOLNODE_GOSSIP_KEY"), "gossip key (base64, from toolnode keygen; default $TOOLNODE_GOSSIP_KEY, which keeps it out of ps)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "node-to-node TLS certificate")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "node-to-node TLS key")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "CA that signs every node's certificate")
	fs.StringVar(&cfg.P9TLSCert, "9p-tls-cert", "", "9P over TLS: the 9P server's certificate (with -9p-tls-key)")
	fs.StringVar(&cfg.P9TLSKey, "9p-tls-key", "", "9P over TLS: the certificate's private key")
	fs.StringVar(&cfg.MCPAddr, "mcp", "", "serve MCP over Streamable HTTP on this loopback address (e.g. 127.0.0.1:9566)")
	fs.StringVar(&cfg.MetricsAddr, "metrics", "", "serve Prometheus /metrics, /healthz and /readyz on this loopback address (e.g. 127.0.0.1:9567)")
	fs.DurationVar(&cfg.CallTimeout, "call-timeout", node.DefaultCallTimeout, "limit of one tool run")
	fs.BoolVar(&cfg.Yolo, "yolo", false, "run tools without the sandbox")
	fs.StringVar(&cfg.P9Anon, "9p-anon", "", "role of an attach without a token, on every listener: none, read, call, publish or admin; anything but none is logged loudly (default none)")
	fs.StringVar(&cfg.AuditFile, "audit", "", "append one JSON line per state change and per call to `FILE` (reopened on SIGHUP)")
	fs.IntVar(&cfg.MaxCalls, "max-calls", 0, "concurrent calls on this node (default 4 x cores)")
	cfg.MaxExecSize = node.DefaultMaxExecSize
	fs.Func("max-exec-size", "largest published executable, in bytes or with KiB, MiB, GiB (default 256MiB)", func(v string) error {
		n, err := parseSize(v)
		if err != nil {
			return err
		}
		cfg.MaxExecSize = n
		return nil
	})
	var workdirs string
	fs.StringVar(&workdirs, "workdirs", "", "trees a session cwd must lie in, comma-separated")
	fs.StringVar(&toolEnv, "tool-env", "", "extra variables passed to tools, comma-separated (NAME or PREFIX*)")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "start even when a port leaves loopback without its credential (logged loudly)")
	fs.DurationVar(&cfg.ReconnectTimeout, "reconnect-timeout", 24*time.Hour, "how long a failed gossip member is tried again before it is forgotten (0: never tried again)")
	fs.DurationVar(&cfg.CommitTimeout, "raft-commit-timeout", node.DefaultCommitTimeout, "how long an idle Raft leader waits before sending followers the commit index (tuning)")
	fs.BoolVar(&cfg.NoNudge, "raft-no-nudge", false, "do not tell followers at once that a forwarded write committed (measurement only)")
	fs.BoolVar(&cfg.NudgeBarrier, "raft-nudge-barrier", false, "tell followers that a forwarded write committed by appending a Barrier, not with a commit notice (measurement only)")
	fs.BoolVar(&cfg.NoCommitBroadcast, "raft-no-commit-broadcast", false, "tell only the node that forwarded a write of its commit, not every server of every commit (measurement only)")
	fs.BoolVar(&useExamp, "examples", false, "serve the built-in example tools and profiles (unless -tools/-agents are given)")
	logLevel := fs.String("log-level", "info", "least level logged: debug, info, warn or error")
	logFormat := fs.String("log-format", logx.Text, "log format on stderr: text (key=value) or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(*logFormat, *logLevel)
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
	if join != "" {
		cfg.Join = strings.Split(join, ",")
	}
	if workdirs != "" {
		cfg.Workdirs = strings.Split(workdirs, ",")
	}
	if toolEnv != "" {
		cfg.ToolEnv = strings.Split(toolEnv, ",")
	}
	if encrypt != "" {
		key, err := base64.StdEncoding.DecodeString(encrypt)
		if err != nil || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
			return errors.New("-encrypt needs a base64 key of 32 bytes (toolnode keygen makes one)")
		}
		cfg.EncryptKey = key
	}
	if useExamp {
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
	n, err := node.New(cfg)
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
