package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/internal/testport"
)

func httpGet(url string) (int, string, error) { return httpGetAs(url, "") }

// httpGetAs is httpGet presenting token as a bearer token (none if "").
func httpGetAs(url, token string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url, nil)
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

// Test_E2E_Metrics scrapes a node's /metrics after a call and finds it
// counted, and watches /readyz fail while the cluster has no leader and
// pass once it has one again.
func Test_E2E_Metrics(t *testing.T) {
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
	// /metrics needs a read token, on loopback too; the probes do not.
	if code, body, err := httpGet(base + "/metrics"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d %q %v, want 401", code, body, err)
	}
	_, text, err := httpGetAs(base+"/metrics", waitToken(t, a.e.p9))
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
