package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets the test binary stand in for an upstream server:
// UPSTREAM_TEST_SERVER=MODE makes it one, on standard input and output.
func TestMain(m *testing.M) {
	if mode := os.Getenv("UPSTREAM_TEST_SERVER"); mode != "" {
		serveStdio(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveStdio is the stand-in: "ok" a go-sdk server with testServer's
// tools, "hang" one that reads and never answers, "garbage" one that
// answers anything with lines that are not JSON-RPC.
func serveStdio(mode string) {
	switch mode {
	case "ok":
		testServer().Run(context.Background(), &mcp.StdioTransport{})
	case "hang":
		bufio.NewReader(os.Stdin).ReadString(0)
	case "garbage":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println("this is not JSON-RPC")
		}
	}
}

// testServer offers echo, fail, slow (answers when its call is
// cancelled), progress, and a tool whose name clients refuse.
func testServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "echo", Description: "echoes", InputSchema: obj, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(r.Params.Arguments)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: obj},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "progress", InputSchema: obj},
		func(ctx context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i := 1; i <= 3; i++ {
				r.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: r.Params.GetProgressToken(), Progress: float64(i), Total: 3, Message: fmt.Sprint("step ", i)})
			}
			// The work after the last step: a notification still in
			// flight when the answer arrives is dropped (Server.Call).
			time.Sleep(100 * time.Millisecond)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "bad.name", InputSchema: obj},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	return s
}

// toolLists records what a Server reports.
type toolLists struct {
	mu    sync.Mutex
	lists [][]Tool
}

func (l *toolLists) on(ts []Tool) {
	l.mu.Lock()
	l.lists = append(l.lists, ts)
	l.mu.Unlock()
}

// waitNames polls until the last list reported has exactly names.
func (l *toolLists) waitNames(t *testing.T, d time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l.mu.Lock()
		var got []string
		n := len(l.lists)
		if n > 0 {
			for _, tl := range l.lists[n-1] {
				got = append(got, tl.Name)
			}
		}
		l.mu.Unlock()
		slices.Sort(got)
		if n > 0 && slices.Equal(got, names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the tools are %v, want %v", d, got, names)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func run(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.Logf = t.Logf
	s := NewServer(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s
}

// inMemory is a Connect that serves each session from srv in process.
func inMemory(srv *mcp.Server) func(context.Context) (mcp.Transport, error) {
	return func(ctx context.Context) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

func TestServerToolsAndCalls(t *testing.T) {
	srv := testServer()
	def, _ := Parse("t", []byte(`{"command": "x"}`))
	var lists toolLists
	s := run(t, Config{Name: "t", Def: def, Connect: inMemory(srv), OnTools: lists.on})
	lists.waitNames(t, 5*time.Second, "t__echo", "t__fail", "t__progress", "t__slow")

	lists.mu.Lock()
	echo := lists.lists[len(lists.lists)-1][0]
	lists.mu.Unlock()
	if echo.Upstream != "echo" || echo.Description != "echoes" || echo.Annotations == nil || !echo.Annotations.ReadOnlyHint || !json.Valid(echo.InputSchema) {
		t.Fatalf("echo as listed: %+v", echo)
	}
	ctx := context.Background()
	if r, err := s.Call(ctx, "echo", json.RawMessage(`{"x":1}`), nil); err != nil || r.Text != `{"x":1}` || r.IsError {
		t.Fatalf("echo: %+v %v", r, err)
	}
	if r, err := s.Call(ctx, "fail", nil, nil); err != nil || !r.IsError || r.Text != "it failed" {
		t.Fatalf("fail: %+v %v", r, err)
	}
	var steps []string
	var mu sync.Mutex
	r, err := s.Call(ctx, "progress", nil, func(p, total float64, msg string) {
		mu.Lock()
		steps = append(steps, fmt.Sprintf("%v/%v %s", p, total, msg))
		mu.Unlock()
	})
	if err != nil || r.Text != "done" {
		t.Fatalf("progress: %+v %v", r, err)
	}
	// Notifications travel beside the result, and may land after it.
	waitFor(t, 5*time.Second, "three progress notifications", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(steps) == 3 && steps[2] == "3/3 step 3"
	})

	// list_changed: a tool added upstream reaches the list at once.
	start := time.Now()
	srv.AddTool(&mcp.Tool{Name: "later", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	lists.waitNames(t, 2*time.Second, "t__echo", "t__fail", "t__later", "t__progress", "t__slow")
	t.Logf("list_changed reached the list %v after the tool was added", time.Since(start).Round(time.Millisecond))

	// A call past its deadline fails and restarts the server: the tools
	// leave the list and come back.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.Call(cctx, "slow", nil, nil)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "did not answer slow in time") {
		t.Fatalf("slow: %v", err)
	}
	waitFor(t, 5*time.Second, "the tools withdrawn", func() bool {
		lists.mu.Lock()
		defer lists.mu.Unlock()
		for _, l := range lists.lists {
			if l == nil {
				return true
			}
		}
		return false
	})
	lists.waitNames(t, 10*time.Second, "t__echo", "t__fail", "t__later", "t__progress", "t__slow")
}

func TestServerAllowList(t *testing.T) {
	def, _ := Parse("t", []byte(`{"command": "x", "tools": ["e*", "progress"]}`))
	var lists toolLists
	run(t, Config{Name: "t", Def: def, Connect: inMemory(testServer()), OnTools: lists.on})
	lists.waitNames(t, 5*time.Second, "t__echo", "t__progress")
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subprocess is a Connect that runs this test binary as a stdio server in
// mode, through the definition's usual transport.
func subprocess(t *testing.T, mode string) (*Definition, func(context.Context) (mcp.Transport, error)) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	def := &Definition{Command: self, Args: []string{"-test.run=^$"}, Env: map[string]string{"UPSTREAM_TEST_SERVER": mode}}
	return def, Transport(def, os.Environ())
}

// A real stdio server: started, listed, called; killed, it is started
// again and its tools come back.
func TestServerSubprocessRestarts(t *testing.T) {
	def, connect := subprocess(t, "ok")
	var lists toolLists
	var mu sync.Mutex
	var cmds []*exec.Cmd
	s := run(t, Config{Name: "p", Def: def, OnTools: lists.on, MinBackoff: 50 * time.Millisecond,
		Connect: func(ctx context.Context) (mcp.Transport, error) {
			tr, err := connect(ctx)
			if ct, ok := tr.(*mcp.CommandTransport); ok {
				mu.Lock()
				cmds = append(cmds, ct.Command)
				mu.Unlock()
			}
			return tr, err
		}})
	lists.waitNames(t, 10*time.Second, "p__echo", "p__fail", "p__progress", "p__slow")
	if r, err := s.Call(context.Background(), "echo", json.RawMessage(`{}`), nil); err != nil || r.Text != "{}" {
		t.Fatalf("echo: %+v %v", r, err)
	}
	mu.Lock()
	cmds[0].Process.Kill()
	mu.Unlock()
	waitFor(t, 10*time.Second, "a second start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cmds) >= 2
	})
	lists.waitNames(t, 10*time.Second, "p__echo", "p__fail", "p__progress", "p__slow")
	if running, _ := s.Status(); !running {
		t.Fatal("not running after the restart")
	}
}

// A server that never answers initialize, and one that answers with
// garbage: neither runs, each says why, and each is tried again.
func TestServerBadUpstreams(t *testing.T) {
	for mode, want := range map[string]string{"hang": "no answer within", "garbage": "initialize"} {
		t.Run(mode, func(t *testing.T) {
			def, connect := subprocess(t, mode)
			var mu sync.Mutex
			starts := 0
			s := run(t, Config{Name: "b", Def: def, InitTimeout: 300 * time.Millisecond, MinBackoff: 50 * time.Millisecond,
				Connect: func(ctx context.Context) (mcp.Transport, error) {
					mu.Lock()
					starts++
					mu.Unlock()
					return connect(ctx)
				}})
			waitFor(t, 10*time.Second, "a second try", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return starts >= 2
			})
			running, why := s.Status()
			if running || why == nil || !strings.Contains(why.Error(), want) {
				t.Fatalf("status: running %v, %v; want %q", running, why, want)
			}
			if _, err := s.Call(context.Background(), "echo", nil, nil); err == nil || !strings.Contains(err.Error(), "is not running on this node") {
				t.Fatalf("a call to a server that does not run: %v", err)
			}
		})
	}
}
