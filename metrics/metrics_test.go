package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
)

type fakeState struct{ ready error }

func (f fakeState) RaftStats() map[string]string {
	return map[string]string{"state": "Leader", "term": "3", "commit_index": "9", "applied_index": "9", "last_contact": "0"}
}
func (fakeState) MemberStates() map[string]int { return map[string]int{"alive": 3, "dead": 1} }
func (fakeState) P9Conns() int                 { return 2 }
func (f fakeState) Ready() error               { return f.ready }

func get(t *testing.T, h http.Handler, path, token string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// /metrics needs what authorize accepts; the probes never do. The
// control: with no authorize, /metrics is open.
func TestHandler_Authorize(t *testing.T) {
	s := New("n1", fakeState{ready: errors.New("the cluster has no leader")})
	s.Call("echo", "n1", 3*time.Millisecond, nil)
	auth := func(r *http.Request) error {
		if r.Header.Get("Authorization") != "Bearer good" {
			return errors.New("permission denied: needs a token")
		}
		return nil
	}
	h := s.Handler(auth)
	if code, body := get(t, h, "/metrics", ""); code != 401 || !strings.Contains(body, "permission denied") {
		t.Errorf("/metrics without a token: %d %q", code, body)
	}
	if code, body := get(t, h, "/metrics", "good"); code != 200 || !strings.Contains(body, `toolnode_calls_total{node="n1",result="ok",self="n1",tool="echo"} 1`) {
		t.Errorf("/metrics with a token: %d\n%s", code, body)
	}
	if code, _ := get(t, h, "/healthz", ""); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := get(t, h, "/readyz", ""); code != 503 || !strings.Contains(body, "no leader") {
		t.Errorf("/readyz of a node without a leader: %d %q", code, body)
	}
	// ?verbose says more than ready or not: it needs a token where
	// /metrics does, and is open where /metrics is (the control).
	if code, body := get(t, h, "/readyz?verbose", ""); code != 401 || strings.Contains(body, "members") {
		t.Errorf("/readyz?verbose without a token: %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz?verbose", "good"); code != 503 || !strings.Contains(body, "no leader") || !strings.Contains(body, "members alive=3 ") {
		t.Errorf("/readyz?verbose with a token: %d %q", code, body)
	}
	if code, body := get(t, s.Handler(nil), "/readyz?verbose", ""); code != 503 || !strings.Contains(body, "members alive=3 ") {
		t.Errorf("control: open /readyz?verbose: %d %q", code, body)
	}
	if code, body := get(t, s.Handler(nil), "/metrics", ""); code != 200 || !strings.Contains(body, `toolnode_members{self="n1",state="alive"} 3`) {
		t.Errorf("control: open /metrics: %d\n%s", code, body)
	}
}

func TestBlobSeries(t *testing.T) {
	s := New("n1", fakeState{})
	s.BlobFetched("n2", 1000, nil)
	s.BlobFetched("n3", 1000, errors.New("digest mismatch"))
	s.BlobServed("sent")
	s.BlobServed("busy")
	_, body := get(t, s.Handler(nil), "/metrics", "")
	for _, want := range []string{
		`toolnode_blob_fetches_total{from="n2",result="ok",self="n1"} 1`,
		`toolnode_blob_fetches_total{from="n3",result="error",self="n1"} 1`,
		`toolnode_blob_fetched_bytes_total{self="n1"} 1000`,
		`toolnode_blobs_served_total{answer="busy",self="n1"} 1`,
		`toolnode_blobs_served_total{answer="sent",self="n1"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var none *Set // a node without -metrics
	none.BlobFetched("n2", 1, nil)
	none.BlobServed("sent")
}

// memberlist's per-packet series never reach the sink; its rarer ones
// (a suspicion) and raft's do.
func TestPerPacketMemberlistSeriesBlocked(t *testing.T) {
	sink := gometrics.NewInmemSink(time.Hour, time.Hour)
	m, err := gometrics.New(goMetricsConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	m.IncrCounterWithLabels([]string{"memberlist", "udp", "received"}, 100, nil)
	m.IncrCounterWithLabels([]string{"memberlist", "msg", "alive"}, 1, nil)
	m.MeasureSinceWithLabels([]string{"memberlist", "gossip"}, time.Now(), nil)
	m.MeasureSinceWithLabels([]string{"memberlist", "probeNode"}, time.Now(), nil)
	m.IncrCounterWithLabels([]string{"memberlist", "msg", "suspect"}, 1, nil)
	m.IncrCounterWithLabels([]string{"raft", "apply"}, 1, nil)
	got := map[string]bool{}
	for _, iv := range sink.Data() {
		for k := range iv.Counters {
			got[k] = true
		}
		for k := range iv.Samples {
			got[k] = true
		}
	}
	for _, blocked := range []string{"toolnode.memberlist.udp.received", "toolnode.memberlist.msg.alive", "toolnode.memberlist.gossip", "toolnode.memberlist.probeNode"} {
		if got[blocked] {
			t.Errorf("the sink got %s", blocked)
		}
	}
	for _, kept := range []string{"toolnode.memberlist.msg.suspect", "toolnode.raft.apply"} {
		if !got[kept] {
			t.Errorf("the sink lacks %s (it has %v)", kept, got)
		}
	}
}
