package node

import (
	"fmt"

	"github.com/toolnode/toolnode/internal/netx"
)

// Ports closed by default (DESIGN §7 "Ports"). Loopback listeners are
// trusted as the local user; any other address needs its credential:
//
//   - -gossip or -advertise off loopback: a gossip key (-encrypt), or
//     anyone who can reach the port joins the cluster;
//   - -cluster off loopback: mutual TLS (-tls-*) or the gossip key, which
//     both authenticate every cluster-port connection;
//   - -9p off loopback: 9P over TLS (-9p-tls-cert, -9p-tls-key);
//   - -metrics off loopback: HTTPS with the same certificate.
//
// Loopback is an IP in 127.0.0.0/8, ::1, or the name "localhost"; an
// empty host, 0.0.0.0 and :: bind every interface and are not loopback.
// -insecure (Config.Insecure) starts the node anyway; the node then logs
// each open port at every start.

// portProblem is one port that leaves loopback without its credential.
type portProblem struct {
	flag string // the flag that opened it
	addr string
	need string // the flags that would close it
}

func (p portProblem) String() string {
	return fmt.Sprintf("%s %s is not a loopback address, and %s is not given", p.flag, p.addr, p.need)
}

// checkPorts returns the ports that leave loopback without their
// credential, and an error naming the first of them unless c.Insecure.
func (c *Config) checkPorts() ([]portProblem, error) {
	var probs []portProblem
	hasKey := len(c.EncryptKey) > 0
	hasTLS := c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != ""
	if c.GossipTransport == nil && !hasKey && !netx.LoopbackAddr(c.GossipAddr) {
		probs = append(probs, portProblem{"-gossip", c.GossipAddr, "-encrypt KEY (toolnode keygen makes one)"})
	}
	if c.Advertise != "" && !hasKey && !netx.LoopbackHost(c.Advertise) {
		probs = append(probs, portProblem{"-advertise", c.Advertise, "-encrypt KEY (toolnode keygen makes one)"})
	}
	if c.RaftTransport == nil && !hasKey && !hasTLS {
		addr := c.ClusterAddr
		if c.ClusterListener != nil {
			addr = c.ClusterListener.Addr().String()
		}
		if !netx.LoopbackAddr(addr) {
			probs = append(probs, portProblem{"-cluster", addr, "-encrypt KEY or -tls-cert/-tls-key/-tls-ca"})
		}
	}
	p9 := c.P9Addr
	if c.P9Listener != nil {
		p9 = c.P9Listener.Addr().String()
	}
	if (c.P9TLSCert == "" || c.P9TLSKey == "") && !netx.LoopbackAddr(p9) {
		probs = append(probs, portProblem{"-9p", p9, "-9p-tls-cert/-9p-tls-key"})
	}
	if c.MetricsAddr != "" && (c.P9TLSCert == "" || c.P9TLSKey == "") && !netx.LoopbackAddr(c.MetricsAddr) {
		probs = append(probs, portProblem{"-metrics", c.MetricsAddr, "-9p-tls-cert/-9p-tls-key (the metrics are then served over HTTPS with them)"})
	}
	if len(probs) == 0 || c.Insecure {
		return probs, nil
	}
	return probs, fmt.Errorf("refusing to start: %s: anyone who can reach it could %s; give %s, bind it to loopback, or start with -insecure",
		probs[0], portPower(probs[0].flag), probs[0].need)
}

// portPower says what an open port gives away.
func portPower(flag string) string {
	switch flag {
	case "-9p":
		return "read and change everything over 9P"
	case "-cluster":
		return "write to the cluster's state and run tools on this node"
	case "-metrics":
		return "read the bearer tokens its scrapers send in the clear"
	default:
		return "join the cluster and receive its state and executables"
	}
}

// logPortSecurity says at start how the cluster port is secured and, under
// -insecure, loudly, which ports are open without their credential.
func (n *Node) logPortSecurity() {
	switch {
	case n.cfg.RaftTransport != nil:
	case n.tls != nil:
		n.logger.Printf("cluster port: %s", n.tls.Mode())
	default:
		n.logger.Printf("cluster port: plain TCP, no credential (loopback only, or -insecure)")
	}
	if !n.cfg.Insecure {
		return
	}
	probs, _ := n.cfg.checkPorts()
	if len(probs) == 0 {
		n.logger.Printf("WARNING: -insecure: given, but every port is on loopback or has its credential")
		return
	}
	for _, p := range probs {
		n.logger.Printf("WARNING: -insecure: %s: anyone who can reach it can %s", p, portPower(p.flag))
	}
}
