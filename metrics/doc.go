// Package metrics owns what a node tells Prometheus and its health
// probes (-metrics ADDR): the collectors, the registry they live in, the
// bridge that brings hashicorp/raft's go-metrics into that registry, and
// the HTTP handler serving /metrics, /healthz and /readyz.
//
// The node records events on a Set (calls, routed calls, 9P operations,
// publish propagation) and answers a State for what is read at scrape
// time (Raft's state and indexes, gossip members by state, readiness).
// The package imports no other toolnode package.
//
// Names: every metric is prefixed toolnode_; hashicorp/raft's own
// metrics appear as toolnode_raft_… through go-metrics' Prometheus sink,
// and memberlist's as toolnode_memberlist_… except its timer of every
// gossip round and probe and its per-packet counters (quietMetrics),
// which cost an idle node a tenth of its CPU. go-metrics is
// process-wide, so raft's metrics go to the registry of the first node a
// process starts (one node per process in production).
package metrics
