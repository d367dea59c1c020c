package mcphost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/upstream"
)

var (
	echoOnce sync.Once
	echoBin  string
	echoErr  error
)

// mcpecho builds the test server (internal/mcpecho) once.
func mcpecho(t *testing.T) string {
	t.Helper()
	echoOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpecho")
		if err != nil {
			echoErr = err
			return
		}
		echoBin = filepath.Join(dir, "mcpecho")
		out, err := exec.Command("go", "build", "-o", echoBin, "../internal/mcpecho").CombinedOutput()
		if err != nil {
			echoErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if echoErr != nil {
		t.Fatal(echoErr)
	}
	return echoBin
}

func testHost(t *testing.T, env map[string]string) (*Host, *logs) {
	t.Helper()
	l := &logs{}
	h := New(Config{
		Host: registry.Host{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
			Getenv:   func(k string) string { return env[k] },
			LookPath: exec.LookPath},
		StateDir:    t.TempDir(),
		Logf:        l.add,
		InitTimeout: 2 * time.Second, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	t.Cleanup(h.Close)
	return h, l
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) add(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logs) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHostRunsMatchingServers(t *testing.T) {
	bin := mcpecho(t)
	h, l := testHost(t, map[string]string{"ECHO_KEY": "s3cret", "HERE": "1"})
	def := fmt.Sprintf(`{"command":%q,"env":{"ECHO_KEY":"${ECHO_KEY}"},"match":{"env":"HERE"}}`, bin)
	h.Sync(map[string][]byte{
		"echo":      []byte(def),
		"elsewhere": []byte(fmt.Sprintf(`{"command":%q,"match":{"env":"NOT_HERE"}}`, bin)),
		"needs":     []byte(fmt.Sprintf(`{"command":%q,"env":{"OTHER_TOKEN":"${OTHER_TOKEN}"}}`, bin)),
	})
	waitFor(t, "echo's tools", 10*time.Second, func() bool { return h.Offers("echo__echo") })
	if got := h.Running(); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("running %v, want [echo]", got)
	}
	if !l.has("this host does not set OTHER_TOKEN") {
		t.Error("no log line names the missing variable")
	}
	if h.Offers("echo__bad.name") || !l.has("bad.name") {
		t.Error("a tool whose name clients refuse was not skipped with a log line")
	}
	ctx := context.Background()
	out, err := h.Call(ctx, "echo__getenv", []byte(`{"name":"ECHO_KEY"}`), nil)
	if err != nil || string(out) != "s3cret" {
		t.Fatalf("getenv = %q, %v: the reference was not expanded", out, err)
	}
	out, err = h.Call(ctx, "echo__home", []byte(`{}`), nil)
	if err != nil || !strings.HasSuffix(string(out), "/echo") {
		t.Fatalf("home = %q, %v: want the server's state directory", out, err)
	}
	// The server's progress reaches the caller while the call runs.
	var mu sync.Mutex
	var steps []string
	out, err = h.Call(ctx, "echo__steps", []byte(`{}`), func(p, total float64, msg string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, fmt.Sprintf("%g/%g %s", p, total, msg))
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || string(out) != "done" || strings.Join(steps, ",") != "1/2 step 1,2/2 step 2" {
		t.Errorf("steps = %q, %v; progress %q", out, err, steps)
	}
	if _, err := h.Call(ctx, "echo__fail", []byte(`{}`), nil); err == nil || !strings.Contains(err.Error(), "it failed") {
		t.Fatalf("fail = %v, want its text as the error", err)
	}
	// list_changed reaches the tools within 500 ms.
	if _, err := h.Call(ctx, "echo__grow", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "extra after list_changed", 500*time.Millisecond, func() bool { return h.Offers("echo__extra") })
	// A call that outlives its deadline fails and restarts the server.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = h.Call(cctx, "echo__slow", []byte(`{}`), nil)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("slow = %v, want a failure that restarts the server", err)
	}
	waitFor(t, "the restarted server", 10*time.Second, func() bool {
		out, err := h.Call(ctx, "echo__echo", []byte(`{"a":1}`), nil)
		return err == nil && string(out) == `{"a":1}`
	})
	// Withdrawn: stopped, its tools gone.
	h.Sync(map[string][]byte{})
	if h.Offers("echo__echo") || len(h.Running()) != 0 {
		t.Fatal("a withdrawn server still runs")
	}
}

func TestHostServerThatNeverInitializes(t *testing.T) {
	bin := mcpecho(t)
	h, l := testHost(t, nil)
	h.Sync(map[string][]byte{"mute": []byte(fmt.Sprintf(`{"command":%q,"env":{"MCPECHO_MODE":"hang"}}`, bin))})
	waitFor(t, "a log line of the failed initialize", 10*time.Second, func() bool { return l.has("mcp server mute: initialize: no answer") })
	waitFor(t, "a second attempt", 10*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, x := range l.lines {
			if strings.Contains(x, "starting it again") {
				n++
			}
		}
		return n >= 2
	})
	if len(h.Tools("mute")) != 0 {
		t.Fatal("a server that never initialized offers tools")
	}
}

func TestMeta(t *testing.T) {
	m := Meta(upstream.Tool{Name: "s__t", Upstream: "t", Description: "d", InputSchema: []byte(`{"type":"object","properties":{"x":{"type":"string"}}}`), OutputSchema: []byte(`{"type":"object"}`)})
	parsed, _, err := registry.ParseMeta(m)
	if err != nil {
		t.Fatalf("%s: %v", m, err)
	}
	if parsed.Description != "d" || parsed.OutputFormat != "json" || !strings.Contains(string(parsed.Args), `"x"`) {
		t.Fatalf("meta %s parsed as %+v", m, parsed)
	}
	// The server's annotations and output schema are kept for MCP's
	// tools/list, readOnlyHint as scope read.
	m = Meta(upstream.Tool{Name: "s__t", Upstream: "t", OutputSchema: []byte(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "T", OpenWorldHint: ptr(false)}})
	var got struct {
		Scope        string
		OutputSchema json.RawMessage
		Annotations  map[string]any
	}
	if err := json.Unmarshal(m, &got); err != nil {
		t.Fatal(err)
	}
	if got.Scope != "read" || string(got.OutputSchema) != `{"type":"object"}` || got.Annotations["title"] != "T" || got.Annotations["openWorldHint"] != false {
		t.Fatalf("meta %s", m)
	}
}

func ptr[T any](v T) *T { return &v }
