package metrics

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// State is what the node answers at scrape time.
type State interface {
	// RaftStats is hashicorp/raft's Stats().
	RaftStats() map[string]string
	// MemberStates counts the gossip members by state (alive, suspect,
	// dead, left).
	MemberStates() map[string]int
	// P9Conns is the number of 9P connections served now.
	P9Conns() int
	// Ready is nil when the node can serve writes and reads that reflect
	// the cluster: it has a leader and has applied what it knows is
	// committed; otherwise the error says why not.
	Ready() error
}

// Set holds a node's collectors.
type Set struct {
	reg *prometheus.Registry
	st  State

	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	routed      *prometheus.CounterVec
	running     prometheus.Gauge
	waiting     prometheus.Gauge
	p9ops       *prometheus.CounterVec
	p9errors    *prometheus.CounterVec
	propagation prometheus.Histogram
	blobFetches *prometheus.CounterVec
	blobBytes   prometheus.Counter
	blobServed  *prometheus.CounterVec
}

var raftSinkOnce sync.Once

// New makes the collectors of one node, named node, reading st.
func New(node string, st State) *Set {
	reg := prometheus.NewRegistry()
	s := &Set{reg: reg, st: st}
	constLabels := prometheus.Labels{"self": node}
	s.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolnode_calls_total", Help: "Tool calls run on this node, by tool, the node that asked for it and result (ok, error).", ConstLabels: constLabels,
	}, []string{"tool", "node", "result"})
	s.callSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "toolnode_call_duration_seconds", Help: "Duration of tool calls run on this node.", ConstLabels: constLabels,
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"tool"})
	s.routed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolnode_calls_routed_total", Help: "Calls made on this node and run on another, by the node that ran them and result.", ConstLabels: constLabels,
	}, []string{"to", "result"})
	s.running = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolnode_calls_running", Help: "Tool processes running on this node now.", ConstLabels: constLabels,
	})
	s.waiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolnode_calls_waiting", Help: "Calls waiting for a free slot (-max-calls).", ConstLabels: constLabels,
	})
	s.p9ops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolnode_9p_operations_total", Help: "9P requests served, by message type.", ConstLabels: constLabels,
	}, []string{"op"})
	s.p9errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolnode_9p_errors_total", Help: "9P requests answered with Rerror, by message type.", ConstLabels: constLabels,
	}, []string{"op"})
	s.propagation = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "toolnode_publish_propagation_seconds", Help: "From a tool's publication on its publishing node to its application on this node.", ConstLabels: constLabels,
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	s.blobFetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolnode_blob_fetches_total", Help: "Executables fetched from another node, by the node asked and result (ok, error).", ConstLabels: constLabels,
	}, []string{"from", "result"})
	s.blobBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolnode_blob_fetched_bytes_total", Help: "Bytes of executables fetched from other nodes and stored.", ConstLabels: constLabels,
	})
	s.blobServed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolnode_blobs_served_total", Help: "Executable requests answered to other nodes, by answer (sent, missing, busy, error).", ConstLabels: constLabels,
	}, []string{"answer"})
	reg.MustRegister(s.calls, s.callSeconds, s.routed, s.running, s.waiting, s.p9ops, s.p9errors, s.propagation,
		s.blobFetches, s.blobBytes, s.blobServed)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolnode_9p_connections", Help: "9P connections served now.", ConstLabels: constLabels,
	}, func() float64 { return float64(st.P9Conns()) }))
	reg.MustRegister(newStateCollector(st, constLabels))
	raftSinkOnce.Do(func() {
		// hashicorp/raft reports through go-metrics' global registry.
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Expiration: time.Minute, Registerer: reg})
		if err != nil {
			return
		}
		gometrics.NewGlobal(goMetricsConfig(), sink)
	})
	return s
}

// goMetricsConfig is how go-metrics reports to the sink: named toolnode_…,
// without host names or its own runtime series, and without perPacket.
func goMetricsConfig() *gometrics.Config {
	cfg := gometrics.DefaultConfig("toolnode")
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	cfg.BlockedPrefixes = perPacket
	return cfg
}

// perPacket are the go-metrics series hashicorp/memberlist updates for
// every packet, message, probe or gossip round it handles. Through the
// Prometheus sink each update cost a key flattening and a lookup (a
// summary's quantile stream for the timings): ~5 % of a node's CPU while
// a hundred nodes formed a cluster, and about a tenth of an idle node's,
// for what the gossip members gauge already says. The sink never sees
// them; memberlist's rarer series (push/pulls, suspicions, deaths,
// health score, members) stay.
var perPacket = []string{
	"toolnode.memberlist.udp",
	"toolnode.memberlist.tcp",
	"toolnode.memberlist.msg.alive",
	"toolnode.memberlist.gossip",
	"toolnode.memberlist.probeNode",
	"toolnode.memberlist.queue",
	"toolnode.memberlist.size.remote",
}

func lastContact(stats map[string]string) float64 {
	switch v := stats["last_contact"]; v {
	case "0":
		return 0
	case "never", "":
		return -1
	default:
		d, err := time.ParseDuration(v)
		if err != nil {
			return -1
		}
		return d.Seconds()
	}
}

// raftGauges are the numbers of hashicorp/raft's Stats() exported as
// gauges.
var raftGauges = []struct{ key, name, help string }{
	{"term", "toolnode_raft_term", "Raft's current term."},
	{"commit_index", "toolnode_raft_commit_index", "The highest log index this node knows is committed."},
	{"applied_index", "toolnode_raft_applied_index", "The highest log index applied to this node's state."},
	{"last_log_index", "toolnode_raft_last_log_index", "The last index in this node's log."},
	{"num_peers", "toolnode_raft_other_voters", "Voters in the Raft configuration besides this node."},
}

var (
	raftStates = []string{"Follower", "Candidate", "Leader", "Shutdown"}
	memberKeys = []string{"alive", "suspect", "dead", "left"}
)

// stateCollector reports what is read from the node at scrape time: the
// Raft gauges, the Raft state and gossip members by state (one series per
// value, so a dashboard can sum or alert on either). Raft's Stats() is
// read once per scrape.
type stateCollector struct {
	st                  State
	gauges              []*prometheus.Desc // raftGauges, in order
	contact, state, mem *prometheus.Desc
}

func newStateCollector(st State, constLabels prometheus.Labels) *stateCollector {
	c := &stateCollector{
		st:      st,
		contact: prometheus.NewDesc("toolnode_raft_last_contact_seconds", "Time since this node last heard from the leader (0 on the leader, -1 never).", nil, constLabels),
		state:   prometheus.NewDesc("toolnode_raft_state", "1 for this node's Raft state.", []string{"state"}, constLabels),
		mem:     prometheus.NewDesc("toolnode_members", "Gossip members by state.", []string{"state"}, constLabels),
	}
	for _, g := range raftGauges {
		c.gauges = append(c.gauges, prometheus.NewDesc(g.name, g.help, nil, constLabels))
	}
	return c
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.gauges {
		ch <- d
	}
	ch <- c.contact
	ch <- c.state
	ch <- c.mem
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.st.RaftStats()
	for i, g := range raftGauges {
		v, _ := strconv.ParseFloat(stats[g.key], 64)
		ch <- prometheus.MustNewConstMetric(c.gauges[i], prometheus.GaugeValue, v)
	}
	ch <- prometheus.MustNewConstMetric(c.contact, prometheus.GaugeValue, lastContact(stats))
	for _, s := range raftStates {
		v := 0.0
		if s == stats["state"] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s)
	}
	m := c.st.MemberStates()
	for _, k := range memberKeys {
		ch <- prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, float64(m[k]), k)
	}
}

// Call records a tool run on this node for caller (the node the call was
// made on).
func (s *Set) Call(tool, caller string, d time.Duration, err error) {
	if s == nil {
		return
	}
	s.calls.WithLabelValues(tool, caller, result(err)).Inc()
	s.callSeconds.WithLabelValues(tool).Observe(d.Seconds())
}

// Routed records a call made here and run on node to.
func (s *Set) Routed(to string, err error) {
	if s == nil {
		return
	}
	s.routed.WithLabelValues(to, result(err)).Inc()
}

// Running adds delta to the calls running now.
func (s *Set) Running(delta int) {
	if s != nil {
		s.running.Add(float64(delta))
	}
}

// Waiting adds delta to the calls waiting for a slot.
func (s *Set) Waiting(delta int) {
	if s != nil {
		s.waiting.Add(float64(delta))
	}
}

// Op records one 9P request of type op and whether it failed.
func (s *Set) Op(op string, err error) {
	if s == nil {
		return
	}
	s.p9ops.WithLabelValues(op).Inc()
	if err != nil {
		s.p9errors.WithLabelValues(op).Inc()
	}
}

// Propagated records how long a publication took to reach this node.
func (s *Set) Propagated(d time.Duration) {
	if s != nil && d >= 0 {
		s.propagation.Observe(d.Seconds())
	}
}

// BlobFetched records one attempt to fetch an executable from node from,
// and its size when it was stored.
func (s *Set) BlobFetched(from string, size int64, err error) {
	if s == nil {
		return
	}
	s.blobFetches.WithLabelValues(from, result(err)).Inc()
	if err == nil {
		s.blobBytes.Add(float64(size))
	}
}

// BlobServed records one answer to another node's executable request.
func (s *Set) BlobServed(answer string) {
	if s != nil {
		s.blobServed.WithLabelValues(answer).Inc()
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// Handler serves /metrics, /debug/pprof, /healthz (the process serves)
// and /readyz (it has a leader and has caught up; 503 with the reason
// otherwise; with ?verbose, the gossip members by state too). When
// authorize is set, /metrics, /debug/pprof and /readyz?verbose are served
// only to requests it accepts (401 with its error otherwise); the probes
// stay open, as they say no more than ready or not.
func (s *Set) Handler(authorize func(*http.Request) error) http.Handler {
	mux := http.NewServeMux()
	metricsH := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})
	// refused answers 401 to a request authorize does not accept.
	refused := func(w http.ResponseWriter, r *http.Request) bool {
		if authorize == nil {
			return false
		}
		err := authorize(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolnode"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
		}
		return err != nil
	}
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if !refused(w, r) {
			metricsH.ServeHTTP(w, r)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		// ?verbose adds the gossip members by state, as Kubernetes'
		// probes add their checks: what a watcher of a forming cluster
		// needs, at a fraction of a /metrics scrape's CPU. It says more
		// than ready or not, so it needs what /metrics needs.
		_, verbose := r.URL.Query()["verbose"]
		if verbose && refused(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		body := "ready\n"
		err := s.st.Ready()
		if err != nil {
			body = "not ready: " + err.Error() + "\n"
		}
		if verbose {
			m := s.st.MemberStates()
			body += fmt.Sprintf("members alive=%d suspect=%d dead=%d left=%d\n", m["alive"], m["suspect"], m["dead"], m["left"])
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		w.Write([]byte(body))
	})
	// Go's profiles (net/http/pprof), behind the same credential as
	// /metrics: `go tool pprof -H "Authorization: Bearer TOKEN"` is not a
	// flag, so fetch a profile with curl and read the file.
	pprofH := map[string]http.HandlerFunc{
		"/debug/pprof/":        pprof.Index,
		"/debug/pprof/cmdline": pprof.Cmdline,
		"/debug/pprof/profile": pprof.Profile,
		"/debug/pprof/symbol":  pprof.Symbol,
		"/debug/pprof/trace":   pprof.Trace,
	}
	for path, h := range pprofH {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if !refused(w, r) {
				h(w, r)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"metrics": "/metrics", "healthz": "/healthz", "readyz": "/readyz", "pprof": "/debug/pprof/"})
	})
	return mux
}
