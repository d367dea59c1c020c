package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/internal/netx"
	"github.com/toolnode/toolnode/metrics"
	"github.com/toolnode/toolnode/p9"
)

// startMetrics serves /metrics, /healthz, /readyz and /debug/pprof on
// -metrics ADDR. /metrics, /readyz?verbose and /debug/pprof need a token
// of role read or more (Authorization: Bearer) on every address, loopback
// included: metrics name tools, nodes and addresses, and a profile shows
// what the node runs. The probes are open: kubelets and health checks
// probe without one. Off loopback, as for 9P and MCP, the listener speaks
// HTTPS with the 9P certificate, so a bearer token never crosses a
// network in the clear; without it the node refuses to start unless
// -insecure (ports.go), and then serves plain HTTP, loudly.
func (n *Node) startMetrics() error {
	if n.cfg.MetricsAddr == "" {
		return nil
	}
	var tlsConf *tls.Config
	if !netx.LoopbackAddr(n.cfg.MetricsAddr) && n.cfg.P9TLSCert != "" && n.cfg.P9TLSKey != "" {
		var err error
		if tlsConf, err = p9.LoadTLS(n.cfg.P9TLSCert, n.cfg.P9TLSKey); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", n.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("-metrics: %w", err)
	}
	scheme := "http"
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
		scheme = "https"
	}
	n.metricsLn = ln
	srv := &http.Server{Handler: n.metrics.Handler(n.authorizeMetrics), ReadHeaderTimeout: 10 * time.Second}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.Printf("metrics: %v", err)
		}
	}()
	go func() {
		defer n.wg.Done()
		<-n.ctx.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	n.logger.Printf("serving metrics on %s://%s/metrics (and /healthz, /readyz, /debug/pprof; a read token for all but the probes)", scheme, ln.Addr())
	return nil
}

// MetricsAddr is the address -metrics listens on, "" when off.
func (n *Node) MetricsAddr() string {
	if n.metricsLn == nil {
		return ""
	}
	return n.metricsLn.Addr().String()
}

// The node is the metrics' State.

// RaftStats is hashicorp/raft's Stats().
func (n *Node) RaftStats() map[string]string {
	r := n.raftNode()
	if r == nil {
		return nil
	}
	return r.Stats()
}

// MemberStates counts gossip members by state.
func (n *Node) MemberStates() map[string]int {
	out := map[string]int{}
	if n.gossip == nil {
		return out
	}
	for _, m := range n.gossip.Members() {
		out[m.State]++
	}
	return out
}

// P9Conns is the number of 9P connections served now.
func (n *Node) P9Conns() int {
	if n.p9 == nil {
		return 0
	}
	return n.p9.Conns()
}

// Ready is nil when the node knows a leader and has applied every entry
// it knows is committed.
func (n *Node) Ready() error {
	if !n.rep.isServer.Load() {
		return n.clientReady()
	}
	r := n.raftNode()
	if r == nil {
		return errors.New("raft has not started")
	}
	if r.State() != raft.Leader {
		if addr, _ := r.LeaderWithID(); addr == "" {
			return errors.New("the cluster has no leader this node knows of")
		}
	}
	// Raft's applied index, not the FSM's: configuration changes and the
	// leader's no-op are applied without reaching the FSM.
	st := r.Stats()
	commit, _ := strconv.ParseUint(st["commit_index"], 10, 64)
	applied, _ := strconv.ParseUint(st["applied_index"], 10, 64)
	if applied < commit {
		return fmt.Errorf("catching up: applied index %d of %d committed", applied, commit)
	}
	return nil
}

var _ metrics.State = (*Node)(nil)

// maxPropagation bounds what counts as propagation: an older publication
// seen now is a replay (a restart, a snapshot), not a delay.
const maxPropagation = time.Minute

func (n *Node) observePublished(tool string) {
	if n.metrics == nil {
		return
	}
	t, ok := n.fsm.Tool(tool)
	if !ok || t.Time == 0 {
		return
	}
	if d := time.Since(time.Unix(0, t.Time)); d < maxPropagation {
		n.metrics.Propagated(d)
	}
}

// authorizeMetrics accepts a request that presents a token of role read
// or more.
func (n *Node) authorizeMetrics(r *http.Request) error {
	tok := netx.Bearer(r)
	if tok == "" {
		return fmt.Errorf("permission denied: %s needs a token (Authorization: Bearer TOKEN) of role read or more", r.URL.Path)
	}
	p, err := n.attach(tok, metricsRemote(r))
	if err != nil {
		return err
	}
	if p.Role < p9.RoleRead {
		return fmt.Errorf("permission denied: needs role %s", p9.RoleRead)
	}
	return nil
}

// metricsRemote is a request's peer address, for the log.
func metricsRemote(r *http.Request) net.Addr {
	if a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		return a
	}
	return &net.TCPAddr{}
}
