package mcpserve_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool's progress lines on fd 3 are notifications/progress for a call
// that gave a progress token, and its standard error's lines
// notifications/message at level info once the client set a level,
// while it runs; the control: a call without a token and a session
// without a level get none.
func TestMCP_ProgressAndLogging(t *testing.T) {
	_, url, secret := mcpNode(t, 0, map[string]string{
		"slow": `{"description":"reports","cmd":"echo 'progress 1/2 half' >&3; echo working >&2; sleep 0.05; echo 'progress 2/2 done' >&3; echo done"}`,
	})
	var mu sync.Mutex
	var progress []string
	var logs []string
	opt := &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, string(r.Params.Level)+":"+r.Params.Data.(string))
			mu.Unlock()
		},
	}
	s := connect(t, url+"?profile=p", secret, opt)
	ctx := context.Background()
	// Control first: no token, no level.
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "slow"}); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "slow"}
	params.SetProgressToken("tok-1")
	if res, err := s.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	waitFor(t, "the notifications", 5e9, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 2 && len(logs) >= 1
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(progress, []string{"half", "done"}) {
		t.Errorf("progress %q, want [half done] (and none for the call without a token)", progress)
	}
	if !slices.Equal(logs, []string{"info:working"}) {
		t.Errorf("logs %q, want [info:working] (and none before the level was set)", logs)
	}
}
