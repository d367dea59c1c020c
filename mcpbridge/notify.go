package mcpbridge

import (
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a running call says while it runs (DESIGN §9): its "progress N/M
// MESSAGE" lines on fd 3 are notifications/progress for a client that
// gave a progress token, its standard error's lines notifications/message
// at level info for a client that set a logging level. The lines come
// from the node (Options.WatchCalls) by the agent and the tool, not by the
// call: two calls of one tool at once both get the lines of each.

// Descriptors of the lines WatchCalls gives.
const (
	fdStderr = 2
	fdSide   = 3
)

// flight is one tools/call in progress.
type flight struct {
	req   *mcp.CallToolRequest
	token any // the client's progress token, nil for none
}

// flights are a bridge's calls in progress, by tool.
type flights struct {
	mu sync.Mutex
	m  map[string][]*flight
}

func (fs *flights) add(tool string, req *mcp.CallToolRequest) func() {
	f := &flight{req: req, token: req.Params.GetProgressToken()}
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[string][]*flight{}
	}
	fs.m[tool] = append(fs.m[tool], f)
	fs.mu.Unlock()
	return func() {
		fs.mu.Lock()
		l := fs.m[tool]
		for i, g := range l {
			if g == f {
				l = append(l[:i], l[i+1:]...)
				break
			}
		}
		if len(l) == 0 {
			delete(fs.m, tool)
		} else {
			fs.m[tool] = l
		}
		fs.mu.Unlock()
	}
}

func (fs *flights) of(tool string) []*flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]*flight(nil), fs.m[tool]...)
}

// onLine is Options.WatchCalls's function: it is called on the node's
// pipe readers and must not block, so the notifications are sent from a
// goroutine of their own, in order per bridge.
func (b *Bridge) onLine(tool string, fd int, line string) {
	fl := b.flights.of(tool)
	if len(fl) == 0 {
		return
	}
	var send []func()
	for _, f := range fl {
		ss := f.req.Session
		switch fd {
		case fdSide:
			p, ok := parseProgress(line)
			if !ok || f.token == nil {
				continue
			}
			p.ProgressToken = f.token
			send = append(send, func() { _ = ss.NotifyProgress(b.ctx, p) })
		case fdStderr:
			p := &mcp.LoggingMessageParams{Level: "info", Logger: tool, Data: line}
			send = append(send, func() { _ = ss.Log(b.ctx, p) })
		}
	}
	if len(send) == 0 {
		return
	}
	select {
	case b.notes <- send:
	default:
		b.opt.Logf("mcp: notifications of %s dropped: the client reads them too slowly", tool)
	}
}

// sendNotes sends the notifications onLine queued, in order.
func (b *Bridge) sendNotes() {
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case send := <-b.notes:
			for _, f := range send {
				f()
			}
		}
	}
}

// parseProgress reads "progress N[/M] [MESSAGE]".
func parseProgress(line string) (*mcp.ProgressNotificationParams, bool) {
	rest, ok := strings.CutPrefix(line, "progress ")
	if !ok {
		return nil, false
	}
	num, msg, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	n, m, hasTotal := strings.Cut(num, "/")
	p := &mcp.ProgressNotificationParams{Message: strings.TrimSpace(msg)}
	var err error
	if p.Progress, err = strconv.ParseFloat(n, 64); err != nil {
		return nil, false
	}
	if hasTotal {
		if p.Total, err = strconv.ParseFloat(m, 64); err != nil {
			return nil, false
		}
	}
	return p, true
}
