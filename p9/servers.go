package p9

import (
	"errors"
	"time"
)

// Servers is m/, the upstream MCP server definitions (DESIGN §9), as a
// Backend offers them. A Backend that does not implement it shows an
// empty m/ that refuses writes.
type Servers interface {
	// ServerNames lists the published definitions, sorted.
	ServerNames() []string
	// ServerDef returns a definition as published.
	ServerDef(name string) ([]byte, bool)
	// ServerTime is when it was published, as ToolTime.
	ServerTime(name string) time.Time
	// PublishServer validates and publishes m/NAME.json.
	PublishServer(name string, data []byte) error
	// WithdrawServer withdraws a definition (rm m/NAME.json).
	WithdrawServer(name string) error
}

// serversOf is b's m/.
func serversOf(b Backend) Servers {
	if s, ok := b.(Servers); ok {
		return s
	}
	return noServers{}
}

type noServers struct{}

var errNoServers = errors.New("permission denied: this node does not front MCP servers")

func (noServers) ServerNames() []string              { return nil }
func (noServers) ServerDef(string) ([]byte, bool)    { return nil, false }
func (noServers) ServerTime(string) time.Time        { return time.Time{} }
func (noServers) PublishServer(string, []byte) error { return errNoServers }
func (noServers) WithdrawServer(string) error        { return errNoServers }
