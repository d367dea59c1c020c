package mcpserve

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/netx"
)

// tokenHost knows the tokens of its map; the checks ask it nothing else.
type tokenHost map[string]string // secret → name; name "" for a token that may not attach

func (h tokenHost) Serve9P(c net.Conn) { c.Close() }

func (h tokenHost) Token(secret string) (string, bool) {
	name, ok := h[secret]
	return name, ok && name != ""
}

func (tokenHost) KillSession(string) error                        { return nil }
func (tokenHost) Record(time.Time, string, string, string, error) {}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

func checkServer(t *testing.T, addr string, anon bool) *Server {
	t.Helper()
	s := &Server{host: tokenHost{"tn_bob": "bob", "tn_none": ""}, logf: t.Logf, sessions: map[string]*session{}}
	s.loopback, s.hosts = hostsOf(addr, nil)
	s.anon = anon && s.loopback
	return s
}

// The checks of a request that would start a session refuse each bad
// part with its status; the control, a valid initialize, passes them.
func TestMCP_ChecksRefuseBeforeAnything(t *testing.T) {
	for _, tc := range []struct {
		what   string
		addr   string
		anon   bool
		body   string
		hdr    map[string]string
		status int // 0: passes
	}{
		{"control: a valid initialize", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob"}, 0},
		{"control: a loopback Origin", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Origin": "http://localhost:9566"}, 0},
		{"control: no token, anon on loopback", "127.0.0.1:9566", true, initBody, nil, 0},
		{"control: the listener's own address", "192.0.2.7:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Host": "192.0.2.7:9566"}, 0},
		{"a foreign Host", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Host": "evil.example:80"}, http.StatusForbidden},
		{"a foreign Origin", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"an Origin not http", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Origin": "file://127.0.0.1"}, http.StatusForbidden},
		{"a loopback Host off loopback", "192.0.2.7:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Host": "127.0.0.1:9566"}, http.StatusForbidden},
		{"text/plain", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_bob", "Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"no initialize", "127.0.0.1:9566", false, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Authorization": "Bearer tn_bob"}, http.StatusBadRequest},
		{"no protocol version", "127.0.0.1:9566", false, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, map[string]string{"Authorization": "Bearer tn_bob"}, http.StatusBadRequest},
		{"too large", "127.0.0.1:9566", false, initBody + strings.Repeat(" ", MaxInit), map[string]string{"Authorization": "Bearer tn_bob"}, http.StatusRequestEntityTooLarge},
		{"no token", "127.0.0.1:9566", false, initBody, nil, http.StatusUnauthorized},
		{"no token, anon off loopback", "192.0.2.7:9566", true, initBody, map[string]string{"Host": "192.0.2.7"}, http.StatusUnauthorized},
		{"an unknown token", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_nope"}, http.StatusUnauthorized},
		{"a token that may not attach", "127.0.0.1:9566", false, initBody, map[string]string{"Authorization": "Bearer tn_none"}, http.StatusUnauthorized},
	} {
		s := checkServer(t, tc.addr, tc.anon)
		r := httptest.NewRequest("POST", "http://127.0.0.1:9566/", strings.NewReader(tc.body))
		r.Header.Set("Content-Type", "application/json")
		for k, v := range tc.hdr {
			if k == "Host" {
				r.Host = v
				continue
			}
			r.Header.Set(k, v)
		}
		no := s.checkNew(r, netx.Bearer(r))
		switch {
		case tc.status == 0 && no != nil:
			t.Errorf("%s: refused (%d): %v", tc.what, no.status, no.err)
		case tc.status != 0 && no == nil:
			t.Errorf("%s: passed; want %d", tc.what, tc.status)
		case tc.status != 0 && no.status != tc.status:
			t.Errorf("%s: %d (%v); want %d", tc.what, no.status, no.err, tc.status)
		}
	}
}

// A principal has at most MaxPerPrincipal live sessions and the server
// MaxSessions in all; another principal is admitted beside a full one.
func TestMCP_AdmitBounds(t *testing.T) {
	s := checkServer(t, "127.0.0.1:9566", false)
	for i := range MaxPerPrincipal {
		if no := s.admit("bob"); no != nil {
			t.Fatalf("bob's session %d: %v", i+1, no.err)
		}
		s.sessions[string(rune('a'+i))] = &session{who: "bob"}
	}
	if no := s.admit("bob"); no == nil || no.status != http.StatusTooManyRequests {
		t.Errorf("bob's session %d: %v; want 429", MaxPerPrincipal+1, no)
	}
	if no := s.admit("alice"); no != nil {
		t.Errorf("alice beside bob's %d: %v", MaxPerPrincipal, no.err)
	}
	for i := len(s.sessions); i < MaxSessions; i++ {
		s.sessions[strings.Repeat("x", i)] = &session{who: "other"}
	}
	if no := s.admit("alice"); no == nil || no.status != http.StatusTooManyRequests {
		t.Errorf("a session beyond %d in all: %v; want 429", MaxSessions, no)
	}
}
