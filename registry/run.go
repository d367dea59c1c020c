package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolnode/toolnode/sandbox"
)

// Defaults of RunnerConfig.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultOutputCap = 4 << 20
	// StderrTail is how much of the end of a failed tool's standard error
	// its ExitError carries.
	StderrTail = sandbox.StderrTail
)

// Environment variables a tool receives on top of the base environment.
const (
	EnvSession = "OLLIE_SESSION_ID"
	EnvAgent   = "OLLIE_AGENT"
	EnvNode    = "TOOLNODE_NODE"
)

// RunnerConfig configures a Runner. Zero values take the defaults.
type RunnerConfig struct {
	Timeout    time.Duration // limit of one call; default DefaultTimeout
	OutputCap  int64         // bytes of stdout kept; over it the tool is killed; default DefaultOutputCap
	Yolo       bool          // run tools without the sandbox
	ScratchDir string        // parent of the per-call scratch directories; default os.TempDir()
	NodeName   string        // the value of TOOLNODE_NODE
	Env        []string      // base environment; nil: os.Environ() as of NewRunner
	ExtraPath  []string      // directories appended to the tool's PATH (and searched for tools without a command)
	MaxProcs   int           // processes one call may have at once, where a pids controller exists; default sandbox.DefaultMaxProcs

	// Protected are trees and files a sandboxed tool may not read (the
	// node's data directory, its key and certificate files); ScratchDir is
	// always among them, so a call sees its own scratch directory only.
	Protected []string
	// Readable are trees a sandboxed tool may read and execute even when
	// they lie in a protected one (a tools directory inside the data
	// directory, as -examples makes it).
	Readable []string
	// ToolEnv names variables of Env passed to sandboxed tools on top of
	// the allow-list (a trailing '*' passes a prefix); see
	// sandbox.CheckToolEnv.
	ToolEnv []string
}

// Runner runs tools: it validates arguments, resolves the command and the
// environment, and has its sandbox run the tool (unconfined under Yolo).
// It is safe for concurrent use.
type Runner struct {
	cfg     RunnerConfig
	baseEnv []string // cfg.Env without the variables Run sets
	path    string   // the tool's PATH
	sb      *sandbox.Sandbox
}

// NewRunner returns a Runner for cfg, with defaults filled in.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	r := &Runner{cfg: cfg, sb: sandbox.New(sandbox.Config{
		Off:        cfg.Yolo,
		ScratchDir: cfg.ScratchDir,
		MaxProcs:   cfg.MaxProcs,
		Protected:  cfg.Protected,
		Readable:   cfg.Readable,
	})}
	var path string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvSession, EnvAgent, EnvNode, "TMPDIR":
		case "PATH":
			path = v
		default:
			if cfg.Yolo || sandbox.EnvAllowed(k, cfg.ToolEnv) {
				r.baseEnv = append(r.baseEnv, kv)
			}
		}
	}
	for _, d := range cfg.ExtraPath {
		if d == "" {
			continue
		}
		if path != "" {
			path += string(os.PathListSeparator)
		}
		path += d
	}
	r.path = path
	return r
}

// Invocation is one call of one tool.
type Invocation struct {
	Tool    string
	Meta    *Meta  // resolved metadata (variants merged); nil: the defaults
	Exec    string // the tool's own executable, "" if none
	Args    []byte // one JSON object; empty: {}
	Session string // OLLIE_SESSION_ID
	Agent   string // OLLIE_AGENT
	Cwd     string // the session's working directory; "": run in the scratch directory
}

// ExitError is the error of a tool that exited with a non-zero status.
type ExitError struct {
	Tool   string
	Status int    // exit status; 128+N when killed by signal N
	Signal int    // the signal that killed the tool, 0 if it exited
	Stderr string // the last StderrTail bytes of its standard error
}

func (e *ExitError) Error() string {
	var b strings.Builder
	if e.Signal != 0 {
		fmt.Fprintf(&b, "tool %q was killed by signal %d (status %d)", e.Tool, e.Signal, e.Status)
	} else {
		fmt.Fprintf(&b, "tool %q exited with status %d", e.Tool, e.Status)
	}
	if e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

// Run runs one call and returns the tool's standard output.
//
// Before anything runs it validates Args against Meta.Args (a real JSON
// Schema validator; compiled schemas are cached by content), resolves the
// command — the tool's own executable, else Meta.Cmd through /bin/sh -c,
// else Tool found in PATH, else ErrNoCommand — and, unless Yolo, checks
// that the host can sandbox (sandbox.ErrNoSandbox). The tool gets Args on
// standard input, the base environment (under the sandbox only its
// allow-listed variables and ToolEnv, see sandbox.CheckToolEnv) plus
// OLLIE_SESSION_ID, OLLIE_AGENT, TOOLNODE_NODE and TMPDIR (its scratch
// directory, created for the call and removed after it), and runs in Cwd
// or the scratch directory, confined by the sandbox (sandbox.Sandbox.Run).
//
// Exit 0 gives standard output (for outputFormat json it must be valid
// JSON, else ErrBadOutput). A non-zero exit gives an *ExitError. Running
// past the timeout (the sooner of ctx's deadline and the Runner's
// Timeout), writing more than the output cap, or ctx being cancelled kills
// the tool's whole process group and gives ErrTimeout, ErrOutputCap or the
// context's error. No process of the call outlives Run: when the tool
// exits, what is left of its process group is killed.
func (r *Runner) Run(ctx context.Context, inv Invocation) ([]byte, error) {
	c, err := r.Check(inv)
	if err != nil {
		return nil, err
	}
	return c.Run(ctx)
}

// Checked is a call whose checks have passed (Runner.Check); Run runs it.
type Checked struct {
	r    *Runner
	inv  Invocation
	meta *Meta
	args []byte
	argv []string
	cwd  string
}

// Check makes the checks of Run that need no process: the tool's name,
// the arguments against Meta.Args, the command, whether the host can
// sandbox, and Cwd. Its errors are Run's. A caller that answers before
// the tool runs (a 9P write of the call file) reports them at once and
// runs the call with Checked.Run.
func (r *Runner) Check(inv Invocation) (*Checked, error) {
	if err := ValidName(inv.Tool); err != nil {
		return nil, err
	}
	meta := inv.Meta
	if meta == nil {
		meta = &Meta{Args: DefaultArgs, Tier: DefaultTier, OutputFormat: DefaultOutputFormat}
	}
	args := inv.Args
	if len(strings.TrimSpace(string(args))) == 0 {
		args = []byte("{}")
	}
	if err := validateArgs(meta.Args, args); err != nil {
		return nil, fmt.Errorf("tool %q: %w: %v", inv.Tool, ErrInvalidArgs, err)
	}
	argv, err := r.command(inv, meta)
	if err != nil {
		return nil, err
	}
	if err := r.sb.Ready(); err != nil {
		return nil, err
	}
	cwd := ""
	if inv.Cwd != "" {
		if cwd, err = filepath.Abs(inv.Cwd); err != nil {
			return nil, fmt.Errorf("tool %q: working directory %s: %w", inv.Tool, inv.Cwd, err)
		}
		if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("tool %q: working directory %s is not a directory", inv.Tool, cwd)
		}
	}
	return &Checked{r: r, inv: inv, meta: meta, args: args, argv: argv, cwd: cwd}, nil
}

// Run runs the checked call once; see Runner.Run.
func (c *Checked) Run(ctx context.Context) ([]byte, error) {
	r, inv, meta := c.r, c.inv, c.meta
	env := append(r.baseEnv[:len(r.baseEnv):len(r.baseEnv)],
		EnvSession+"="+inv.Session,
		EnvAgent+"="+inv.Agent,
		EnvNode+"="+r.cfg.NodeName,
	)
	if r.path != "" {
		env = append(env, "PATH="+r.path)
	}

	limit := r.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < limit {
		limit = time.Until(dl)
	}
	runCtx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	res, err := r.sb.Run(runCtx, sandbox.Call{
		Argv:      c.argv,
		Dir:       c.cwd,
		ReadOnly:  meta.Scope == "read",
		Network:   meta.Network,
		Env:       env,
		Stdin:     c.args,
		OutputCap: r.cfg.OutputCap,
	})
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", inv.Tool, err)
	}
	switch {
	case res.OverCap:
		return nil, fmt.Errorf("tool %q: %w: it wrote more than %d bytes to standard output, and its process group was killed", inv.Tool, ErrOutputCap, r.cfg.OutputCap)
	case errors.Is(res.Killed, context.DeadlineExceeded):
		return nil, fmt.Errorf("tool %q: %w after %s, and its process group was killed", inv.Tool, ErrTimeout, limit.Round(time.Millisecond))
	case res.Killed != nil:
		return nil, fmt.Errorf("tool %q: call abandoned (%w), and its process group was killed", inv.Tool, res.Killed)
	case res.Status != 0:
		return nil, &ExitError{Tool: inv.Tool, Status: res.Status, Signal: res.Signal, Stderr: res.StderrTail}
	}
	if meta.OutputFormat == OutputJSON && !json.Valid(res.Stdout) {
		return nil, fmt.Errorf("tool %q: %w: its outputFormat is json, but it printed %s", inv.Tool, ErrBadOutput, describeOutput(res.Stdout))
	}
	return res.Stdout, nil
}

// command resolves the argv of a call, without the sandbox launcher.
func (r *Runner) command(inv Invocation, meta *Meta) ([]string, error) {
	switch {
	case inv.Exec != "":
		p, err := filepath.Abs(inv.Exec)
		if err != nil {
			return nil, fmt.Errorf("tool %q: executable %s: %w", inv.Tool, inv.Exec, err)
		}
		return []string{p}, nil
	case meta.Cmd != "":
		// The tool's name is $0, so the shell names it in its messages.
		return []string{"/bin/sh", "-c", meta.Cmd, inv.Tool}, nil
	}
	if p := lookPathIn(inv.Tool, r.path); p != "" {
		return []string{p}, nil
	}
	return nil, fmt.Errorf("tool %q: %w: it has no executable of its own, no cmd, and %q is not in PATH", inv.Tool, ErrNoCommand, inv.Tool)
}

// lookPathIn finds the executable name in the directories of path. Relative
// directories (including the empty one, meaning ".") are skipped: a tool
// call must not depend on the node's working directory.
func lookPathIn(name, path string) string {
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if isExecutable(p) {
			return p
		}
	}
	return ""
}

// Protections lists what protects the node and other calls from r's
// tools, one item a phrase; see sandbox.Sandbox.Protections.
func (r *Runner) Protections() []string { return r.sb.Protections() }

// Close removes what the Runner made on the host (its cgroups). Calls
// still running are not waited for.
func (r *Runner) Close() error { return r.sb.Close() }

// describeOutput quotes the start of out for an error message.
func describeOutput(out []byte) string {
	if len(strings.TrimSpace(string(out))) == 0 {
		return "nothing"
	}
	const max = 80
	s := string(out)
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
