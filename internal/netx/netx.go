// Package netx holds the address and header helpers that several of
// toolnode's listeners share: whether an address binds loopback only,
// and the bearer token of an HTTP request.
package netx

import (
	"net"
	"net/http"
	"strings"
)

// LoopbackAddr reports whether a HOST:PORT address binds loopback only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return LoopbackHost(host)
}

// LoopbackHost: an IP in 127.0.0.0/8, ::1, or "localhost".
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Bearer is the token of a request's "Authorization: Bearer" header, or "".
func Bearer(r *http.Request) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}
