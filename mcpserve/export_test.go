package mcpserve

import (
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/mcpbridge"
)

// Live is a live session as the tests see it: its bridge and the
// bridge's 9P connection.
type Live struct {
	Bridge *mcpbridge.Bridge
	Conn   *client.Conn
}

// Live lists the server's live sessions.
func (s *Server) Live() []Live {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Live, 0, len(s.sessions))
	for _, ss := range s.sessions {
		out = append(out, Live{ss.bridge, ss.conn})
	}
	return out
}

// Waiting is how many sessions' initialisations are watched.
func (s *Server) Waiting() int64 { return s.waiting.Load() }
