package mcpserve

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolnode/toolnode/internal/netx"
)

// A request that would start an MCP session is checked whole before
// anything is made (DESIGN §7 "MCP"): the Host and Origin it names (the
// transport's defence against DNS rebinding), its content type, that it
// is an initialize with a protocol version, its credential, and the
// bounds on live sessions. A refused request changes nothing and leaves
// no session, agent or audit line of a session behind.

// Bounds on live MCP sessions: per principal, and in all (a quarter of
// the 9P server's connection slots, so MCP never takes the slots other
// clients need).
const (
	MaxPerPrincipal = 16
	MaxSessions     = 256
)

// MaxInit bounds the body of an initialize request.
const MaxInit = 1 << 20

// errBadToken refuses a token the node does not know, or one that may
// not attach (the text of the 9P attach's refusal).
var errBadToken = errors.New("permission denied: unknown or revoked token")

// refusal is a refused request: its HTTP status and why.
type refusal struct {
	status int
	err    error
}

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status, fmt.Errorf(format, args...)}
}

// hostsOf are the host names and addresses a request may name in Host
// and Origin: loopback names for a loopback listener; else the
// listener's own address and the names of the certificate it serves.
func hostsOf(addr string, tlsConf *tls.Config) (loopback bool, names map[string]bool) {
	host, _, _ := net.SplitHostPort(addr)
	names = map[string]bool{}
	if netx.LoopbackHost(host) {
		return true, names
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		names[ip.String()] = true
	}
	if tlsConf != nil {
		for _, c := range tlsConf.Certificates {
			leaf := c.Leaf
			if leaf == nil && len(c.Certificate) > 0 {
				leaf, _ = x509.ParseCertificate(c.Certificate[0])
			}
			if leaf == nil {
				continue
			}
			for _, d := range leaf.DNSNames {
				names[strings.ToLower(d)] = true
			}
			for _, ip := range leaf.IPAddresses {
				names[ip.String()] = true
			}
		}
	}
	return false, names
}

// hostAllowed reports whether host (a Host header's or an Origin's host,
// with or without a port) is one this listener answers for.
func (s *Server) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if s.loopback {
		return netx.LoopbackHost(host)
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return s.hosts[host]
}

// checkNew checks a request that would start an MCP session; the body
// is read (bounded) and put back. token is its bearer token.
func (s *Server) checkNew(r *http.Request, token string) *refusal {
	if !s.hostAllowed(r.Host) {
		return refuse(http.StatusForbidden, "Host %q is not this MCP endpoint's", r.Host)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !s.hostAllowed(u.Host) {
			return refuse(http.StatusForbidden, "Origin %q is not this MCP endpoint's", o)
		}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		return refuse(http.StatusUnsupportedMediaType, "Content-Type %q: an MCP request is application/json", ct)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxInit+1))
	if err != nil {
		return refuse(http.StatusBadRequest, "reading the request: %v", err)
	}
	if len(body) > MaxInit {
		return refuse(http.StatusRequestEntityTooLarge, "an initialize request of more than %d bytes", MaxInit)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var init struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &init); err != nil || init.JSONRPC != "2.0" || init.Method != "initialize" || init.Params.ProtocolVersion == "" {
		return refuse(http.StatusBadRequest, "a request without Mcp-Session-Id must be a JSON-RPC initialize with a protocolVersion")
	}
	switch {
	case token != "":
		if _, ok := s.host.Token(token); !ok {
			return &refusal{http.StatusUnauthorized, errBadToken}
		}
	case !s.anon:
		return &refusal{http.StatusUnauthorized, errors.New("permission denied: an MCP request without a token is refused here (Authorization: Bearer TOKEN)")}
	}
	return nil
}

// principalKey is who a new MCP session counts against: its token, or
// the client's address without one.
func principalKey(r *http.Request, token string, sum [32]byte) string {
	if token != "" {
		return string(sum[:])
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "anon@" + host
}

// admit counts the live sessions of key, and in all; a refusal when
// either bound is reached (429).
func (s *Server) admit(key string) *refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= MaxSessions {
		return refuse(http.StatusTooManyRequests, "this node serves %d MCP sessions, its most; end one or try again later", MaxSessions)
	}
	k := 0
	for _, ss := range s.sessions {
		if ss.who == key {
			k++
		}
	}
	if k >= MaxPerPrincipal {
		return refuse(http.StatusTooManyRequests, "this principal has %d live MCP sessions, its most; end one (DELETE with its Mcp-Session-Id) or let one idle out", MaxPerPrincipal)
	}
	return nil
}
