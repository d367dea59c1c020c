package raftfsm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/toolnode/toolnode/upstream"
)

// Upstream MCP servers (DESIGN §9): m/NAME.json definitions, replicated
// as published, `${VAR}` references unexpanded, so a secret never enters
// the log. The tools a running server offers are ordinary tools of origin
// OriginMCP, named SERVER__TOOL, published by the nodes that run it.

// OriginMCP is the origin of a tool an upstream MCP server offers.
const OriginMCP = "mcp"

// Server is a published upstream server definition; immutable like Tool.
type Server struct {
	Name   string `json:"name"`
	Data   []byte `json:"data"` // m/NAME.json as published
	Owner  string `json:"owner"`
	Origin string `json:"origin,omitempty"`
	Index  uint64 `json:"index"`
	Time   int64  `json:"time,omitempty"`
}

// PutServer publishes (adds or replaces) one server definition.
type PutServer struct {
	Owner  string `json:"owner"`
	Origin string `json:"origin,omitempty"` // OriginDir when empty
	Time   int64  `json:"time"`
	Name   string `json:"name"`
	Data   []byte `json:"data"`
}

// DropServer withdraws a server definition, and with it the tools of
// origin OriginMCP named after it. With Owner set, only a definition
// that Owner published from Origin is withdrawn (a node's watcher).
type DropServer struct {
	Owner  string `json:"owner,omitempty"`
	Origin string `json:"origin,omitempty"`
	Name   string `json:"name"`
}

func init() {
	commandNames[CmdPutServer] = "put-server"
	commandNames[CmdDropServer] = "drop-server"
	applyTable[CmdPutServer] = applyPutServer
	applyTable[CmdDropServer] = applyDropServer
	validators[CmdPutServer] = validatePutServer
	validators[CmdDropServer] = validateDropServer
}

// maxServerDef bounds a definition's size.
const maxServerDef = 64 << 10

func validatePutServer(body []byte, _ Limits) error {
	var c PutServer
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, true); err != nil {
		return err
	}
	if err := checkOrigin(c.Origin, true); err != nil {
		return err
	}
	if err := checkTime(c.Time); err != nil {
		return err
	}
	if len(c.Data) > maxServerDef {
		return fmt.Errorf("definition of server %s is over %d bytes", c.Name, maxServerDef)
	}
	_, err := upstream.Parse(c.Name, c.Data)
	return err
}

func validateDropServer(body []byte, _ Limits) error {
	var c DropServer
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkOwner(c.Owner, false); err != nil {
		return err
	}
	if err := checkOrigin(c.Origin, true); err != nil {
		return err
	}
	return upstream.CheckName(c.Name)
}

func applyPutServer(st *state, index uint64, body []byte, ev *[]Event) any {
	var c PutServer
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := upstream.CheckName(c.Name); err != nil {
		return refuse(ErrInvalid, "%v", err)
	}
	origin := c.Origin
	if origin == "" {
		origin = OriginDir
	}
	st.Servers[c.Name] = &Server{Name: c.Name, Data: c.Data, Owner: c.Owner, Origin: origin, Index: index, Time: c.Time}
	*ev = append(*ev, Event{index, "server+", c.Name})
	return Result{}
}

func applyDropServer(st *state, index uint64, body []byte, ev *[]Event) any {
	var c DropServer
	if err := decode(body, &c); err != nil {
		return err
	}
	s, ok := st.Servers[c.Name]
	if !ok {
		if c.Owner != "" {
			return Result{}
		}
		return refuse(ErrNotFound, "no mcp server %q", c.Name)
	}
	if (c.Owner != "" && s.Owner != c.Owner) || (c.Origin != "" && s.Origin != c.Origin) {
		return Result{}
	}
	delete(st.Servers, c.Name)
	*ev = append(*ev, Event{index, "server-", c.Name})
	prefix := c.Name + upstream.Sep
	for _, name := range sortedKeys(st.Tools) {
		t := st.Tools[name]
		if t.Origin != OriginMCP || !strings.HasPrefix(name, prefix) {
			continue
		}
		st.setTool(name, nil)
		if t.Published() {
			*ev = append(*ev, Event{index, "tool-", name})
		}
	}
	return Result{}
}

// Server returns a published server definition.
func (f *FSM) Server(name string) (*Server, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.st.Servers[name]
	return s, ok
}

// Servers lists the published server definitions, sorted by name.
func (f *FSM) Servers() []*Server {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Server, 0, len(f.st.Servers))
	for _, s := range f.st.Servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
