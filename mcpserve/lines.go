package mcpserve

import "sync"

// Lines is the side channel of DESIGN §9 between a node's calls and the
// MCP sessions that made them: what a running tool writes to fd 3
// (progress) and to its standard error, line by line, reaches the bridge
// whose agent made the call, which sends it on as notifications while
// the call runs. The node asks For at each call that runs on it; each
// bridge watches its own agent. The zero value is ready; it is safe for
// concurrent use.
type Lines struct {
	mu sync.Mutex
	m  map[string]func(tool string, fd int, line string) // "S/A" →
}

// Watch sends the lines of the calls of agent A of session S to f until
// stop is called. f must not block.
func (l *Lines) Watch(session, agent string, f func(tool string, fd int, line string)) (stop func()) {
	key := session + "/" + agent
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]func(string, int, string){}
	}
	l.m[key] = f
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.m, key)
		l.mu.Unlock()
	}
}

// For is where the lines of a call of tool by agent A of session S go:
// nil when no MCP session watches that agent.
func (l *Lines) For(session, agent, tool string) func(fd int, line string) {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	f := l.m[session+"/"+agent]
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	return func(fd int, line string) { f(tool, fd, line) }
}
