package node

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/internal/netx"
	"github.com/toolnode/toolnode/mcpserve"
	"github.com/toolnode/toolnode/p9"
)

// startMCP serves MCP over Streamable HTTP (-mcp ADDR) with package
// mcpserve, whose sessions attach to this node's own 9P server.
func (n *Node) startMCP() error {
	if n.cfg.MCPAddr == "" {
		return nil
	}
	// Off loopback, as for 9P: HTTPS with the 9P certificate, or not at
	// all (a bearer token must not cross a network in the clear).
	var tlsConf *tls.Config
	if !netx.LoopbackAddr(n.cfg.MCPAddr) {
		if n.cfg.P9TLSCert == "" || n.cfg.P9TLSKey == "" {
			return fmt.Errorf("-mcp %s leaves loopback: give -9p-tls-cert and -9p-tls-key (MCP is then served over HTTPS with them), or reach it through an ssh tunnel", n.cfg.MCPAddr)
		}
		var err error
		if tlsConf, err = p9.LoadTLS(n.cfg.P9TLSCert, n.cfg.P9TLSKey); err != nil {
			return err
		}
	}
	m, err := mcpserve.Listen(mcpserve.Config{
		Addr: n.cfg.MCPAddr, TLS: tlsConf, Anon: n.anon != p9.RoleNone, Logf: n.logger.Printf,
		Lines: &n.callLines,
	}, mcpHost{n})
	if err != nil {
		return fmt.Errorf("-mcp: %w", err)
	}
	n.mcp = m
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := m.Serve(); err != nil {
			n.logger.Printf("mcp: %v", err)
		}
	}()
	return nil
}

// MCPAddr is the address MCP over HTTP listens on, "" when off.
func (n *Node) MCPAddr() string {
	if n.mcp == nil {
		return ""
	}
	return n.mcp.Addr().String()
}

// mcpHost is the node as mcpserve.Host.
type mcpHost struct{ n *Node }

var _ mcpserve.Host = mcpHost{}

func (h mcpHost) Serve9P(c net.Conn) { h.n.p9.ServeConn(c) }

func (h mcpHost) Token(secret string) (string, bool) {
	t, ok := h.n.fsm.TokenByHash(acl.Hash(secret))
	if !ok {
		return "", false
	}
	r, err := p9.ParseRole(t.Role)
	return t.Name, err == nil && r != p9.RoleNone
}

func (h mcpHost) KillSession(session string) error { return h.n.KillSession(session) }

func (h mcpHost) Record(start time.Time, who, action, target string, err error) {
	h.n.record(start, who, action, target, err)
}

// CallLines is where the lines of this node's calls go to MCP sessions
// (mcpserve.Config.Lines), for an mcpserve.Server run beside the node.
func (n *Node) CallLines() *mcpserve.Lines { return &n.callLines }
