package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of Config.
const (
	// DefaultInitTimeout bounds a session's start: connecting, the
	// initialize handshake and the first tools/list.
	DefaultInitTimeout = 10 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a
	// session is started again; it doubles after each failure and is back
	// to the least once a session has listed its tools.
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// listTimeout bounds a tools/list after list_changed.
	listTimeout = 5 * time.Second
)

// Tool is one tool an upstream server offers, as the catalog shows it.
type Tool struct {
	Name         string // in the catalog: SERVER__TOOL
	Upstream     string // the server's own name for it
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage // nil when it declares none
	Annotations  *mcp.ToolAnnotations
}

// Result is what a call returned: its text content, joined, and whether
// the server called it an error (isError).
type Result struct {
	Text    string
	IsError bool
}

// Progress receives a call's progress notifications.
type Progress func(progress, total float64, message string)

// Config configures a Server.
type Config struct {
	Name string      // the server's name (m/NAME.json)
	Def  *Definition // expanded for this host
	// Connect makes the transport of one session (Transport makes the
	// usual one, with no sandbox). It is called for every start.
	Connect func(ctx context.Context) (mcp.Transport, error)
	// OnTools is called with the tools the cluster shows after each start
	// and each list_changed, and with nil when the session ends; calls
	// are in order, never concurrent.
	OnTools func([]Tool)
	// Logf logs starts, ends, failures and skipped tools.
	Logf func(format string, args ...any)

	InitTimeout            time.Duration // DefaultInitTimeout when 0
	MinBackoff, MaxBackoff time.Duration // the Default* when 0
}

// Server runs one upstream MCP server on this host (see the package
// documentation). Its methods are safe for concurrent use.
type Server struct {
	cfg Config

	mu      sync.Mutex
	sess    *mcp.ClientSession
	lastErr error
	running bool

	restart  chan struct{} // end the session now (a call outlived its deadline)
	relist   chan struct{} // list the tools again (list_changed)
	progress sync.Map      // progress token → Progress
	nextTok  atomic.Uint64
}

// NewServer returns a Server for cfg; Run runs it.
func NewServer(cfg Config) *Server {
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = DefaultInitTimeout
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.OnTools == nil {
		cfg.OnTools = func([]Tool) {}
	}
	return &Server{cfg: cfg, restart: make(chan struct{}, 1), relist: make(chan struct{}, 1),
		lastErr: errors.New("not started yet")}
}

// Transport is the usual transport of a definition: its command run as
// given (no sandbox) for a stdio server, a Streamable HTTP client with
// its headers for a URL.
func Transport(d *Definition, environ []string) func(ctx context.Context) (mcp.Transport, error) {
	return func(ctx context.Context) (mcp.Transport, error) {
		if d.URL != "" {
			return &mcp.StreamableClientTransport{Endpoint: d.URL, MaxRetries: -1,
				HTTPClient: &http.Client{Transport: headers{d.Headers, http.DefaultTransport}}}, nil
		}
		cmd := exec.Command(d.Command, d.Args...)
		cmd.Env = append(append([]string(nil), environ...), envList(d.Env)...)
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil
	}
}

// envList is env as KEY=VALUE lines, sorted.
func envList(env map[string]string) []string {
	var out []string
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// headers adds a definition's headers to every request.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// Run starts the server and keeps it running until ctx ends.
func (s *Server) Run(ctx context.Context) {
	backoff := s.cfg.MinBackoff
	for ctx.Err() == nil {
		listed, err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if listed {
			backoff = s.cfg.MinBackoff
		}
		s.cfg.Logf("mcp server %s: %v; starting it again in %s", s.cfg.Name, err, backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
}

// session runs one session: start, list, serve until it ends. It reports
// whether the tools were listed, and why the session ended.
func (s *Server) session(ctx context.Context) (listed bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, tools, err := s.start(sctx)
	if err != nil {
		s.down(err)
		return false, err
	}
	defer cs.Close()
	s.mu.Lock()
	s.sess, s.running, s.lastErr = cs, true, nil
	s.mu.Unlock()
	s.cfg.Logf("mcp server %s: running, %d tools", s.cfg.Name, len(tools))
	s.cfg.OnTools(tools)
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	for {
		select {
		case <-ctx.Done():
			s.down(ctx.Err())
			return true, ctx.Err()
		case err := <-ended:
			if err == nil {
				err = errors.New("the server ended the session")
			}
			err = fmt.Errorf("the session ended: %w", err)
			s.down(err)
			return true, err
		case <-s.restart:
			err := errors.New("a call outlived its deadline: restarting the server")
			s.down(err)
			return true, err
		case <-s.relist:
			lctx, lcancel := context.WithTimeout(ctx, listTimeout)
			tools, err := s.list(lctx, cs)
			lcancel()
			if err != nil {
				err = fmt.Errorf("listing its tools after list_changed: %w", err)
				s.down(err)
				return true, err
			}
			s.cfg.OnTools(tools)
		}
	}
}

// down records why the server is not serving and withdraws its tools.
func (s *Server) down(err error) {
	s.mu.Lock()
	was := s.running
	s.sess, s.running, s.lastErr = nil, false, err
	s.mu.Unlock()
	if was {
		s.cfg.OnTools(nil)
	}
}

// start connects and initializes a session and lists its tools, within
// InitTimeout.
func (s *Server) start(ctx context.Context) (*mcp.ClientSession, []Tool, error) {
	ictx, cancel := context.WithTimeout(ctx, s.cfg.InitTimeout)
	defer cancel()
	t, err := s.cfg.Connect(ictx)
	if err != nil {
		return nil, nil, fmt.Errorf("starting: %w", err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolnode", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if p, ok := s.progress.Load(fmt.Sprint(r.Params.ProgressToken)); ok {
				p.(Progress)(r.Params.Progress, r.Params.Total, r.Params.Message)
			}
		},
	})
	type res struct {
		cs  *mcp.ClientSession
		err error
	}
	// Connect itself obeys ictx for the handshake; the watch below also
	// covers a transport that ignores it.
	done := make(chan res, 1)
	go func() {
		cs, err := c.Connect(ctx, t, nil)
		done <- res{cs, err}
	}()
	var cs *mcp.ClientSession
	select {
	case r := <-done:
		if r.err != nil {
			return nil, nil, fmt.Errorf("initialize: %w", r.err)
		}
		cs = r.cs
	case <-ictx.Done():
		go func() {
			if r := <-done; r.cs != nil {
				r.cs.Close()
			}
		}()
		return nil, nil, fmt.Errorf("initialize: no answer within %s", s.cfg.InitTimeout)
	}
	tools, err := s.list(ictx, cs)
	if err != nil {
		cs.Close()
		return nil, nil, fmt.Errorf("listing its tools: %w", err)
	}
	return cs, tools, nil
}

// list reads every page of the server's tools and keeps those the
// definition shows whose catalog names clients accept.
func (s *Server) list(ctx context.Context, cs *mcp.ClientSession) ([]Tool, error) {
	var out []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if !s.cfg.Def.Shows(t.Name) {
			continue
		}
		name, err := ToolName(s.cfg.Name, t.Name)
		if err != nil {
			s.cfg.Logf("mcp server %s: skipping a tool: %v", s.cfg.Name, err)
			continue
		}
		tool := Tool{Name: name, Upstream: t.Name, Description: t.Description, Annotations: t.Annotations}
		if tool.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
			return nil, err
		}
		if t.OutputSchema != nil {
			if tool.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
				return nil, err
			}
		}
		out = append(out, tool)
	}
	return out, nil
}

// Status reports whether the server serves, and why not when it does not.
func (s *Server) Status() (running bool, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.lastErr
}

// Call calls the server's tool named tool (its own name) with the JSON
// arguments args, within ctx's deadline; progress, when not nil, gets the
// call's progress notifications until the call returns (one that arrives
// after the answer is dropped). A call that outlives its deadline
// restarts the server: one that answers no call cannot be trusted with
// the next.
func (s *Server) Call(ctx context.Context, tool string, args json.RawMessage, progress Progress) (Result, error) {
	s.mu.Lock()
	cs, why := s.sess, s.lastErr
	s.mu.Unlock()
	if cs == nil {
		return Result{}, fmt.Errorf("mcp server %s is not running on this node: %v", s.cfg.Name, why)
	}
	params := &mcp.CallToolParams{Name: tool}
	if len(args) > 0 {
		params.Arguments = args
	}
	if progress != nil {
		tok := "tn-" + strconv.FormatUint(s.nextTok.Add(1), 10)
		params.SetProgressToken(tok)
		s.progress.Store(tok, progress)
		defer s.progress.Delete(tok)
	}
	r, err := cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			select {
			case s.restart <- struct{}{}:
			default:
			}
			return Result{}, fmt.Errorf("mcp server %s did not answer %s in time (%v); it is being restarted", s.cfg.Name, tool, ctx.Err())
		}
		return Result{}, fmt.Errorf("mcp server %s: %s: %w", s.cfg.Name, tool, err)
	}
	return Result{Text: text(r), IsError: r.IsError}, nil
}

// text is a result's text content, joined; other content is named.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		default:
			if j, err := json.Marshal(c); err == nil {
				b.Write(j)
			}
		}
	}
	if b.Len() == 0 && r.StructuredContent != nil {
		if j, err := json.Marshal(r.StructuredContent); err == nil {
			b.Write(j)
		}
	}
	return b.String()
}
