package mcpbridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options tunes a Bridge. The zero value is usable.
type Options struct {
	// Profile, when set, is the agent profile (a/NAME.json) the bridge's
	// agent is made from; its autoLoad tools are loaded at once.
	Profile string
	// Session is the name of the toolnode session the bridge makes
	// (default "mcp-" and 8 random hex digits).
	Session string
	// PageSize is how many tools a page of tools/list holds (default
	// 100); a longer list has a nextCursor.
	PageSize int
	// WatchCalls, when set, sends the lines the agent's calls write while
	// they run (fd 2 and fd 3, notify.go) to f until stop is called; the
	// bridge then passes them on as progress and logging notifications.
	WatchCalls func(session, agent string, f func(tool string, fd int, line string)) (stop func())
	// Version is the server version shown to clients.
	Version string
	// Logf receives a line for each problem the bridge meets (default:
	// discarded).
	Logf func(format string, args ...any)
	// SessionID, when set, is the MCP session id the server gives its
	// session (Streamable HTTP's Mcp-Session-Id).
	SessionID string
	// Ended, when set, is called once the first MCP session the server
	// served has ended (closed by the client, or expired).
	Ended func()
	// Msize, when set, is the msize the node negotiated on the bridge's
	// connection (Conn.Msize). Answers are then read without the read of
	// 0 bytes after them: the node keeps an answer whole and a read of
	// it returns all that is left up to the count asked, so a read
	// shorter than its count is the end. Without it an answer is read to
	// a read of 0 bytes, one more round trip.
	Msize uint32
}

// ErrNoProfile: the profile Options.Profile names is not in the cluster.
var ErrNoProfile = errors.New("no such agent profile")

// Bridge is one MCP session's agent. Its methods are safe for concurrent
// use.
type Bridge struct {
	tree *tree
	opt  Options
	srv  *mcp.Server

	session string
	dir     string // session/S/agent/A

	refreshMu sync.Mutex        // one refresh at a time; held across 9P, never across the SDK's locks of other sessions
	listed    map[string]string // tool → fingerprint of its listing (where it runs included)

	inited atomic.Bool // the MCP session finished its initialisation

	calls, ctls fidPool // open fids of the agent's call and ctl files

	flights   flights       // calls in progress, for their notifications
	notes     chan []func() // notifications to send (notify.go)
	stopWatch func()        // ends Options.WatchCalls; nil without

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Built-in tools every agent has (DESIGN §2).
var builtins = []*mcp.Tool{
	{
		Name:        "tool_load",
		Description: "Load a tool from the cluster's catalog into this agent, so it can be called. Argument: the tool's name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"the tool's name"}},"required":["name"]}`),
	},
	{
		Name:        "tool_unload",
		Description: "Unload a tool from this agent. Argument: the tool's name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"the tool's name"}},"required":["name"]}`),
	},
	{
		Name:        "tools_all",
		Description: "List every tool the cluster knows: NAME<TAB>description<TAB>nodes that can run it, one a line.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	},
}

// New makes a toolnode session and agent through fsys and an MCP server
// that serves them. Close undoes it.
func New(fsys *client.Fsys, opt Options) (*Bridge, error) {
	if opt.Logf == nil {
		opt.Logf = func(string, ...any) {}
	}
	if opt.Version == "" {
		opt.Version = "dev"
	}
	if opt.Session == "" {
		var r [4]byte
		rand.Read(r[:])
		opt.Session = "mcp-" + hex.EncodeToString(r[:])
	}
	if opt.PageSize <= 0 {
		opt.PageSize = 100
	}
	b := &Bridge{tree: &tree{fsys: fsys, msize: opt.Msize}, opt: opt, listed: map[string]string{}, notes: make(chan []func(), 256)}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if opt.Profile != "" {
		if _, err := fsys.Stat("a/" + opt.Profile + ".json"); err != nil {
			if strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "not found") {
				return nil, fmt.Errorf("%w: %q (a/%s.json): %v", ErrNoProfile, opt.Profile, opt.Profile, err)
			}
			return nil, fmt.Errorf("reading profile %q: %w", opt.Profile, err)
		}
	}

	s, err := ask(b.tree, "session/new", "name="+opt.Session)
	if err != nil {
		return nil, fmt.Errorf("making a session: %w", err)
	}
	b.session = strings.TrimSpace(s)
	spec := "name=mcp"
	if opt.Profile != "" {
		spec += " profile=" + opt.Profile
	}
	a, err := ask(b.tree, "session/"+b.session+"/agent/new", spec)
	if err != nil {
		b.killSession()
		return nil, fmt.Errorf("making an agent: %w", err)
	}
	b.dir = "session/" + b.session + "/agent/" + strings.TrimSpace(a)
	b.calls = fidPool{tree: b.tree, path: b.dir + "/call"}
	b.ctls = fidPool{tree: b.tree, path: b.dir + "/ctl"}

	var getID func() string
	if opt.SessionID != "" {
		getID = func() string { return opt.SessionID }
	}
	var ended sync.Once
	b.srv = mcp.NewServer(&mcp.Implementation{Name: "toolnode", Version: opt.Version}, &mcp.ServerOptions{
		GetSessionID: getID,
		PageSize:     opt.PageSize,
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			b.inited.Store(true)
			if opt.Ended != nil {
				ended.Do(func() {
					go func() {
						req.Session.Wait()
						opt.Ended()
					}()
				})
			}
		},
		Instructions: "Tools of a toolnode cluster. tool_load NAME makes a tool of the catalog (tools_all) callable; the list changes as tools are loaded, published or withdrawn.",
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Logging:   &mcp.LoggingCapabilities{},
			Prompts:   &mcp.PromptCapabilities{ListChanged: false},
			Resources: &mcp.ResourceCapabilities{},
		},
	})
	for _, t := range builtins {
		b.srv.AddTool(t, b.builtin(t.Name))
	}
	b.srv.AddPrompt(&mcp.Prompt{
		Name:        "preamble",
		Description: "The agent's tool preamble: a compact listing of the tools it can discover, then the full documentation of each loaded tool.",
	}, b.preamble)
	b.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "tool documentation",
		URITemplate: "toolnode://tool/{name}",
		MIMEType:    "text/markdown",
		Description: "The full documentation of a tool of the cluster.",
	}, b.toolDoc)
	if err := b.refresh(); err != nil {
		b.Close()
		return nil, err
	}
	if opt.WatchCalls != nil {
		f := strings.Split(b.dir, "/") // session/S/agent/A
		b.stopWatch = opt.WatchCalls(f[1], f[3], b.onLine)
	}
	b.wg.Add(2)
	go b.watchEvents()
	go b.sendNotes()
	return b, nil
}

// Server is the MCP server of this bridge's session.
func (b *Bridge) Server() *mcp.Server { return b.srv }

// Initialized reports whether an MCP session has finished its
// initialisation with the server.
func (b *Bridge) Initialized() bool { return b.inited.Load() }

// Session is the name of the toolnode session the bridge made.
func (b *Bridge) Session() string { return b.session }

// Close stops the watchers and kills the bridge's toolnode session. A
// watcher blocked in a read of events ends when that read returns or
// when the caller closes the 9P connection.
func (b *Bridge) Close() { b.stop(true) }

// Abandon stops the watchers as Close does but leaves the toolnode
// session: for a 9P connection the node has ended, over which it cannot
// be removed (whoever ended it removes the session, or kills it later).
func (b *Bridge) Abandon() { b.stop(false) }

func (b *Bridge) stop(kill bool) {
	b.once.Do(func() {
		if b.stopWatch != nil {
			b.stopWatch()
		}
		b.cancel()
		b.calls.close()
		b.ctls.close()
		if kill {
			b.killSession()
		}
	})
}

// Wait waits until the watchers have ended (after Close, and after the
// 9P connection is closed or its pending read has returned).
func (b *Bridge) Wait() { b.wg.Wait() }

func (b *Bridge) killSession() {
	if err := tell(b.tree, "session/"+b.session+"/ctl", "kill"); err != nil {
		b.opt.Logf("mcp: removing session %s: %v", b.session, err)
	}
}

// ---- the tool list

// refresh lists the agent's loaded tools again and brings the server's
// set in line: the SDK sends tools/list_changed for every change.
func (b *Bridge) refresh() error {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	text, err := read(b.tree, b.dir+"/tools")
	if err != nil {
		return fmt.Errorf("listing the agent's tools: %w", err)
	}
	names := lines(text)
	want := map[string]*mcp.Tool{}
	for _, name := range names {
		t, err := b.describe(name)
		if err != nil {
			// Withdrawn between the two reads: the next event lists again.
			b.opt.Logf("mcp: describing %s: %v", name, err)
			continue
		}
		want[name] = t
	}
	var gone []string
	for name := range b.listed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(b.listed, name)
		}
	}
	if len(gone) > 0 {
		b.srv.RemoveTools(gone...)
	}
	for name, t := range want {
		fp, _ := json.Marshal(t)
		if b.listed[name] == string(fp) {
			continue
		}
		b.listed[name] = string(fp)
		b.srv.AddTool(t, b.call(name, t))
	}
	return nil
}

// toolMeta is what the bridge reads of a .meta document.
type toolMeta struct {
	Description  string          `json:"description"`
	Prompt       string          `json:"prompt"`
	Args         json.RawMessage `json:"args"`
	OutputFormat string          `json:"outputFormat"`
	Scope        string          `json:"scope"`
	// OutputSchema and Annotations are not .meta fields of DESIGN §1
	// (unknown fields are kept as published): a tool that declares them
	// (an upstream server's, DESIGN §9) has them shown as they are.
	OutputSchema json.RawMessage      `json:"outputSchema"`
	Annotations  *mcp.ToolAnnotations `json:"annotations"`
}

// describe makes the MCP listing of one loaded tool, with where it can
// run.
func (b *Bridge) describe(name string) (*mcp.Tool, error) {
	raw, err := read(b.tree, "t/"+name+".meta")
	if err != nil {
		return nil, err
	}
	var m toolMeta
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		// A declared field of the wrong shape (annotations, outputSchema)
		// loses that field, not the tool.
		m = toolMeta{}
		var core struct {
			Description, Prompt, OutputFormat, Scope string
			Args                                     json.RawMessage
		}
		if err2 := json.Unmarshal([]byte(raw), &core); err2 != nil {
			return nil, fmt.Errorf("t/%s.meta: %w", name, err)
		}
		b.opt.Logf("mcp: t/%s.meta: %v: listed without annotations and outputSchema", name, err)
		m.Description, m.Prompt, m.OutputFormat, m.Scope, m.Args = core.Description, core.Prompt, core.OutputFormat, core.Scope, core.Args
	}
	where, err := ask(b.tree, "cluster/where", name)
	if err != nil {
		return nil, err
	}
	nodes := lines(where)
	schema := m.Args
	if len(schema) == 0 || string(schema) == "null" {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	if m.OutputFormat == "" {
		m.OutputFormat = "text"
	}
	desc := m.Description
	if m.Prompt != "" {
		desc = strings.TrimSpace(desc + "\n\n" + m.Prompt)
	}
	t := &mcp.Tool{
		Name:        name,
		Description: desc,
		InputSchema: schema,
		Annotations: annotations(m),
		Meta:        mcp.Meta{"toolnode/nodes": nodes, "toolnode/outputFormat": m.OutputFormat},
	}
	if isJSONObject(m.OutputSchema) {
		t.OutputSchema = m.OutputSchema
	}
	return t, nil
}

// annotations are a tool's MCP annotations: those it declares, and for
// scope read readOnlyHint true and destructiveHint false (DESIGN §9).
func annotations(m toolMeta) *mcp.ToolAnnotations {
	a := m.Annotations
	if m.Scope == "read" {
		if a == nil {
			a = &mcp.ToolAnnotations{}
		}
		no := false
		a.ReadOnlyHint, a.DestructiveHint = true, &no
	}
	return a
}

func isJSONObject(b json.RawMessage) bool {
	var v map[string]any
	return len(b) > 0 && json.Unmarshal(b, &v) == nil && v != nil
}

// ---- calls

func (b *Bridge) call(name string, t *mcp.Tool) mcp.ToolHandler {
	jsonOut := t.Meta["toolnode/outputFormat"] == "json"
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := "{}"
		if a := req.Params.Arguments; len(a) > 0 && string(a) != "null" {
			args = string(a)
		}
		done := b.flights.add(name, req)
		out, err := b.calls.ask(name + " " + args)
		done()
		if err != nil {
			return errorResult(err), nil
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}
		if jsonOut {
			var v any
			if err := json.Unmarshal([]byte(out), &v); err == nil {
				res.StructuredContent = v
			}
		}
		return res, nil
	}
}

func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
}

func (b *Bridge) builtin(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Name string `json:"name"`
		}
		if a := req.Params.Arguments; len(a) > 0 && string(a) != "null" {
			if err := json.Unmarshal(a, &in); err != nil {
				return errorResult(fmt.Errorf("invalid arguments: %v", err)), nil
			}
		}
		cmd := name
		if name != "tools_all" {
			if in.Name == "" || strings.ContainsAny(in.Name, " \t\n") {
				return errorResult(fmt.Errorf("invalid arguments: %s needs {\"name\": TOOL}", name)), nil
			}
			cmd += " " + in.Name
		}
		out, err := b.ctls.ask(cmd)
		if err != nil {
			return errorResult(err), nil
		}
		if name != "tools_all" {
			// Change the list now rather than when the event arrives.
			if err := b.refresh(); err != nil {
				b.opt.Logf("mcp: %v", err)
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out}}}, nil
	}
}

func (b *Bridge) preamble(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	text, err := read(b.tree, b.dir+"/preamble")
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{
		Description: "toolnode tool preamble",
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}},
	}, nil
}

func (b *Bridge) toolDoc(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	name, ok := strings.CutPrefix(req.Params.URI, "toolnode://tool/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	doc, err := ask(b.tree, "tools", name)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/markdown", Text: doc}}}, nil
}

// ---- watching the cluster

// watchEvents reads the events file and lists the tools again when an
// event concerns this agent's list.
func (b *Bridge) watchEvents() {
	defer b.wg.Done()
	for b.ctx.Err() == nil {
		fid, err := b.tree.open("events", plan9.OREAD)
		if err != nil {
			b.opt.Logf("mcp: opening events: %v", err)
			if !b.sleep(time.Second) {
				return
			}
			continue
		}
		b.readEvents(fid)
		b.tree.clunk(fid)
	}
}

func (b *Bridge) readEvents(fid *client.Fid) {
	agent := strings.TrimPrefix(b.dir, "session/")
	agent = strings.Replace(agent, "/agent/", "/", 1) + "/" // events name an agent S/A
	buf := make([]byte, 8192)
	for b.ctx.Err() == nil {
		n, err := fid.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			if b.ctx.Err() == nil {
				b.opt.Logf("mcp: reading events: %v", err)
				b.sleep(time.Second)
			}
			return
		}
		if n == 0 {
			continue
		}
		if b.concerns(string(buf[:n]), agent) {
			if err := b.refresh(); err != nil {
				b.opt.Logf("mcp: %v", err)
			}
		}
	}
}

// concerns reports whether any of the event lines may change this
// agent's tool list.
func (b *Bridge) concerns(events, agent string) bool {
	b.refreshMu.Lock()
	defer b.refreshMu.Unlock()
	for _, l := range lines(events) {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		switch kind, name := f[1], f[2]; kind {
		case "load", "unload":
			if strings.HasPrefix(name, agent) {
				return true
			}
		case "tool+", "tool-":
			if _, ok := b.listed[name]; ok {
				return true
			}
		case "node+", "node-":
			return true
		}
	}
	return false
}

// sleep waits d; false once the bridge is closing.
func (b *Bridge) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-b.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ---- 9P
