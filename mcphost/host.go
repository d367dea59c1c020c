package mcphost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/upstream"
)

// Connector makes the transport of the sessions of server name, whose
// definition is d (expanded for this host) and whose state directory is
// home.
type Connector func(name string, d *upstream.Definition, home string) func(ctx context.Context) (mcp.Transport, error)

// Config configures a Host.
type Config struct {
	// Host is this host, for the definitions' match; its Getenv also
	// expands their references.
	Host registry.Host
	// StateDir holds a directory per server, its HOME (DATA/mcp).
	StateDir string
	// Connect makes a server's transport; nil: Plain.
	Connect Connector
	// Publish is called with the tools a server offers here after each
	// change, and with nil when it stops offering any; the calls for one
	// server are in order, never concurrent.
	Publish func(server string, tools []upstream.Tool)
	// Logf logs what the servers do.
	Logf func(format string, args ...any)

	// InitTimeout, MinBackoff and MaxBackoff are upstream.Config's (its
	// defaults when 0).
	InitTimeout, MinBackoff, MaxBackoff time.Duration
}

// Host runs this node's upstream servers. Its methods are safe for
// concurrent use.
type Host struct {
	cfg Config

	syncMu  sync.Mutex // one Sync at a time
	mu      sync.Mutex
	running map[string]*run // by server name
	closed  bool
}

// run is one running definition.
type run struct {
	data   []byte // the definition as published
	srv    *upstream.Server
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	tools map[string]upstream.Tool // catalog name → tool, offered now
}

// New returns a Host running nothing; Sync starts servers.
func New(cfg Config) *Host {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Publish == nil {
		cfg.Publish = func(string, []upstream.Tool) {}
	}
	if cfg.Connect == nil {
		cfg.Connect = Plain
	}
	if cfg.Host.Getenv == nil {
		cfg.Host.Getenv = os.Getenv
	}
	return &Host{cfg: cfg, running: map[string]*run{}}
}

// Plain is the Connector without confinement: upstream.Transport with
// an environment of PATH and HOME (the state directory) besides the
// definition's own env.
func Plain(_ string, d *upstream.Definition, home string) func(ctx context.Context) (mcp.Transport, error) {
	return upstream.Transport(d, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home})
}

// Sync makes the running servers those of defs (name → m/NAME.json as
// published) that this host runs: it starts the new ones, stops the
// withdrawn ones and those whose match or variables fail here now, and
// starts a changed one again.
func (h *Host) Sync(defs map[string][]byte) {
	r := registry.NewResolver(h.cfg.Host)
	want := map[string]*upstream.Definition{}
	for _, name := range sortedKeys(defs) {
		d, err := upstream.Parse(name, defs[name])
		if err != nil {
			h.cfg.Logf("mcp server %s: not run here: %v", name, err)
			continue
		}
		if !r.Match(d.Match) {
			continue
		}
		x, missing := d.Expand(h.cfg.Host.Getenv)
		if len(missing) > 0 {
			h.cfg.Logf("mcp server %s: not run here: this host does not set %s", name, strings.Join(missing, ", "))
			continue
		}
		want[name] = &x
	}
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	var stop []*run
	for name, ru := range h.running {
		if want[name] == nil || !bytes.Equal(ru.data, defs[name]) {
			stop = append(stop, ru)
			delete(h.running, name)
		}
	}
	h.mu.Unlock()
	// Stopped before a changed one starts again, so its last report
	// (none) comes before the new one's.
	for _, ru := range stop {
		ru.stop()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range sortedKeys(want) {
		if h.running[name] == nil && !h.closed {
			h.running[name] = h.start(name, want[name], defs[name])
		}
	}
}

// Tools lists the tools server name offers here now, sorted by name.
func (h *Host) Tools(server string) []upstream.Tool {
	h.mu.Lock()
	ru := h.running[server]
	h.mu.Unlock()
	if ru == nil {
		return nil
	}
	ru.mu.Lock()
	defer ru.mu.Unlock()
	out := make([]upstream.Tool, 0, len(ru.tools))
	for _, k := range sortedKeys(ru.tools) {
		out = append(out, ru.tools[k])
	}
	return out
}

// start starts server name; h.mu is held.
func (h *Host) start(name string, d *upstream.Definition, data []byte) *run {
	home := filepath.Join(h.cfg.StateDir, name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		h.cfg.Logf("mcp server %s: its state directory: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ru := &run{data: data, cancel: cancel, done: make(chan struct{}), tools: map[string]upstream.Tool{}}
	ru.srv = upstream.NewServer(upstream.Config{
		Name: name, Def: d, Connect: h.cfg.Connect(name, d, home),
		OnTools: func(tools []upstream.Tool) {
			m := make(map[string]upstream.Tool, len(tools))
			for _, t := range tools {
				m[t.Name] = t
			}
			ru.mu.Lock()
			ru.tools = m
			ru.mu.Unlock()
			h.cfg.Publish(name, tools)
		},
		Logf:        h.cfg.Logf,
		InitTimeout: h.cfg.InitTimeout, MinBackoff: h.cfg.MinBackoff, MaxBackoff: h.cfg.MaxBackoff,
	})
	h.cfg.Logf("mcp server %s: starting on this host", name)
	go func() {
		defer close(ru.done)
		ru.srv.Run(ctx)
	}()
	return ru
}

// stop ends the server and waits for it.
func (ru *run) stop() {
	ru.cancel()
	<-ru.done
}

// server is the run that offers the catalog's tool name.
func (h *Host) server(name string) (*run, upstream.Tool, bool) {
	srv, _, ok := upstream.SplitToolName(name)
	if !ok {
		return nil, upstream.Tool{}, false
	}
	h.mu.Lock()
	ru := h.running[srv]
	h.mu.Unlock()
	if ru == nil {
		return nil, upstream.Tool{}, false
	}
	ru.mu.Lock()
	t, ok := ru.tools[name]
	ru.mu.Unlock()
	return ru, t, ok
}

// Offers reports whether a server running here offers the catalog's tool
// name now.
func (h *Host) Offers(name string) bool {
	_, _, ok := h.server(name)
	return ok
}

// Call calls the catalog's tool name with the JSON object args: the
// text of its result, or an error; a result the server marks isError is
// an error with its text.
func (h *Host) Call(ctx context.Context, name string, args []byte, progress upstream.Progress) ([]byte, error) {
	ru, t, ok := h.server(name)
	if !ok {
		return nil, fmt.Errorf("tool %q: no mcp server running on this node offers it", name)
	}
	r, err := ru.srv.Call(ctx, t.Upstream, json.RawMessage(args), progress)
	if err != nil {
		return nil, err
	}
	if r.IsError {
		return nil, fmt.Errorf("%s: %s", name, r.Text)
	}
	return []byte(r.Text), nil
}

// Running lists the servers running here, sorted.
func (h *Host) Running() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sortedKeys(h.running)
}

// Close stops every server.
func (h *Host) Close() {
	h.mu.Lock()
	h.closed = true
	runs := h.running
	h.running = map[string]*run{}
	h.mu.Unlock()
	for _, ru := range runs {
		ru.stop()
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
