package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testport"
)

func httpGet(url string) (int, string, error) { return httpGetAs(http.DefaultTransport, url, "") }

// httpGetAs is a GET with token as its bearer ("" for none), over rt.
func httpGetAs(rt http.RoundTripper, url, token string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: rt}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metricsToken is the admin token of the cluster of the node whose
// -metrics is addr ("" when it is not known yet).
func metricsToken(addr string) string {
	p9, _ := metricsHomes.Load(addr)
	s, _ := p9.(string)
	return tokenOf(s)
}

// TestE2E_Metrics scrapes a node's /metrics after a call and finds it
// counted, and watches /readyz fail while the cluster has no leader and
// pass once it has one again.
func TestE2E_Metrics(t *testing.T) {
	a := newCnode(t, "meta")
	b := newCnode(t, "metb").joining(a)
	if err := os.WriteFile(filepath.Join(a.e.tools, "hello.meta"), []byte(`{"description":"hi","cmd":"echo hi"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := testport.Pick(t, 2)
	a.flags = append(a.flags, "-metrics", ports[0])
	b.flags = append(b.flags, "-metrics", ports[1])
	a.start(t)
	b.start(t)
	waitFormed(t, 60*time.Second, a, b)
	base := "http://" + ports[0]

	if code, body, err := httpGet(base + "/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz: %d %q %v", code, body, err)
	}
	pollUntil(t, 10*time.Second, "/readyz passes on a formed cluster", func() (bool, string) {
		code, body, _ := httpGet(base + "/readyz")
		return code == 200, body
	})

	s := strings.TrimSpace(mustAsk9(t, a, "session/new", "name=m"))
	ag := strings.TrimSpace(mustAsk9(t, a, "session/"+s+"/agent/new", "name=x"))
	dir := "session/" + s + "/agent/" + ag
	mustAsk9(t, a, dir+"/ctl", "tool_load hello")
	if out := mustAsk9(t, a, dir+"/call", "hello {}"); out != "hi\n" {
		t.Fatalf("call: %q", out)
	}
	_, text, err := httpGetAs(http.DefaultTransport, base+"/metrics", adminToken(t, a))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^toolnode_calls_total\{node="meta",result="ok",self="meta",tool="hello"\} 1$`,
		`(?m)^toolnode_call_duration_seconds_count\{self="meta",tool="hello"\} 1$`,
		`(?m)^toolnode_9p_operations_total\{op="walk",self="meta"\} [1-9]`,
		`(?m)^toolnode_raft_state\{self="meta",state="Leader"\} 1$`,
		`(?m)^toolnode_members\{self="meta",state="alive"\} 2$`,
		`(?m)^toolnode_raft_applied_index\{self="meta"\} [1-9]`,
		`(?m)^toolnode_publish_propagation_seconds_count\{self="meta"\} [1-9]`,
		`(?m)^toolnode_raft_(commitTime|apply|fsm_apply)`, // hashicorp/raft's own, through go-metrics
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("/metrics has no line matching %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}

	// Two voters: without b there is no quorum, so no leader.
	b.kill(t)
	pollUntil(t, 15*time.Second, "/readyz fails without a leader", func() (bool, string) {
		code, body, _ := httpGet(base + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "leader"), body
	})
	b.start(t)
	pollUntil(t, 30*time.Second, "/readyz passes with a leader again", func() (bool, string) {
		code, body, _ := httpGet(base + "/readyz")
		return code == 200, body
	})
}

// adminToken is the bootstrap node's admin token, from its data directory.
func adminToken(t *testing.T, n *cnode) string {
	t.Helper()
	var b []byte
	pollUntil(t, 20*time.Second, n.name+"'s admin token", func() (bool, string) {
		var err error
		b, err = os.ReadFile(filepath.Join(n.e.data, "admin.token"))
		return err == nil, fmt.Sprint(err)
	})
	return strings.TrimSpace(string(b))
}

// The metrics listener's credentials: /metrics, /readyz?verbose and
// /debug/pprof need a read token on loopback too, the probes do not; off
// loopback the node refuses to start without a certificate, and with one
// serves HTTPS only. The control, -insecure, serves plain HTTP off
// loopback: a raw client's bearer token crosses the network in the clear
// and is accepted.
func TestE2E_Metrics_Credentials(t *testing.T) {
	t.Parallel()
	a := newCnode(t, "metc")
	ports := testport.Pick(t, 1)
	a.flags = append(a.flags, "-metrics", ports[0])
	a.start(t)
	base := "http://" + ports[0]
	read := strings.TrimSpace(mustAsk9(t, a, "token/new", "name=scraper role=read"))
	for _, path := range []string{"/metrics", "/readyz?verbose", "/debug/pprof/"} {
		if code, body, err := httpGet(base + path); err != nil || code != http.StatusUnauthorized || !strings.Contains(body, "needs a token") {
			t.Errorf("%s without a token: %d %q %v, want 401 saying it needs a token", path, code, body, err)
		}
		if code, body, err := httpGetAs(http.DefaultTransport, base+path, "tn_not-a-token"); err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d %q %v, want 401", path, code, body, err)
		}
		pollUntil(t, 10*time.Second, path+" with a read token", func() (bool, string) {
			code, body, err := httpGetAs(http.DefaultTransport, base+path, read)
			return err == nil && code == 200, fmt.Sprint(code, err, body)
		})
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := httpGet(base + path); err != nil || code != 200 {
			t.Errorf("%s, a probe, without a token: %d %q %v", path, code, body, err)
		}
	}

	// Off loopback without a certificate: refused, naming the flag.
	open := newCnode(t, "meto")
	port := strings.Split(testport.Pick(t, 1)[0], ":")[1]
	open.flags = append(open.flags, "-metrics", "0.0.0.0:"+port)
	p := open.launch(t)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("a node with -metrics off loopback and no certificate started")
	}
	if !strings.Contains(p.log.String(), "-metrics 0.0.0.0:"+port+" is not a loopback address") {
		t.Fatalf("the refusal does not name -metrics:\n%s", p.log.String())
	}

	// Control: -insecure serves plain HTTP off loopback, and a token sent
	// over a raw connection, readable by anyone on the path, is accepted.
	open.flags = append(open.flags, "-insecure")
	open.start(t)
	otok := adminToken(t, open)
	pollUntil(t, 10*time.Second, "a plain-HTTP scrape off loopback under -insecure", func() (bool, string) {
		nc, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 2*time.Second)
		if err != nil {
			return false, err.Error()
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(nc, "GET /metrics HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", otok)
		line, err := bufio.NewReader(nc).ReadString('\n')
		return strings.HasPrefix(line, "HTTP/1.0 200"), fmt.Sprint(line, err)
	})

	// With the 9P certificate: HTTPS only.
	ca := newTestCA(t, "metrics-ca")
	tlsNode := newCnode(t, "metl")
	cert, key := ca.issue(t, tlsNode.e.root, "metl")
	tport := strings.Split(testport.Pick(t, 1)[0], ":")[1]
	tlsNode.flags = append(tlsNode.flags, "-metrics", "0.0.0.0:"+tport, "-9p-tls-cert", cert, "-9p-tls-key", key)
	tlsNode.launch(t)
	ttok := adminToken(t, tlsNode)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	rt := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	pollUntil(t, 20*time.Second, "an HTTPS scrape with the token", func() (bool, string) {
		code, body, err := httpGetAs(rt, "https://127.0.0.1:"+tport+"/metrics", ttok)
		return err == nil && code == 200, fmt.Sprint(code, err, body)
	})
	if code, _, err := httpGetAs(http.DefaultTransport, "http://127.0.0.1:"+tport+"/metrics", ttok); err == nil && code == 200 {
		t.Fatal("plain HTTP is served beside HTTPS")
	}
}
