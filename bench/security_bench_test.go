//go:build linux

package bench

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolnode/toolnode/tlsutil"
)

// ---- BenchmarkSecurityWrites: the price of the cluster port's credentials

// BenchmarkSecurityWrites runs BenchmarkClusterWrites' workload on three
// three-node clusters at once, side by side in one run: without
// credentials (plain TCP on loopback), with a gossip key (gossip
// encrypted, the cluster port TLS 1.3 with certificates derived from the
// key), and with mutual TLS from `toolnode tls` certificates plus the key.
// For each client count the three run one after the other, so drift in the
// machine's load falls on all three alike. Writes through a follower
// (two clients in three) cross the cluster port as forwarded writes, and
// every write is replicated over Raft's connections.
func BenchmarkSecurityWrites(b *testing.B) {
	bin := toolnodeBin(b)
	out, err := exec.Command(bin, "keygen").Output()
	if err != nil {
		b.Fatal(err)
	}
	key := strings.TrimSpace(string(out))
	pki := b.TempDir()
	caFile, caKey, err := tlsutil.CreateCA(pki, 1)
	if err != nil {
		b.Fatal(err)
	}

	type side struct {
		name string
		ws   []writer
	}
	var sides []side
	for _, creds := range []string{"off", "key", "mtls"} {
		c := newTCluster(b)
		switch creds {
		case "key":
			c.extra = []string{"-encrypt", key}
		case "mtls":
			c.extra = []string{"-encrypt", key}
			certs := map[string][2]string{} // a node restarted keeps its certificate
			c.per = func(n *tnode) []string {
				f, ok := certs[n.name]
				if !ok {
					cert, key, err := tlsutil.CreateCert(tlsutil.CertRequest{Node: n.name, Days: 1, CA: caFile, CAKey: caKey, OutDir: b.TempDir()})
					if err != nil {
						b.Fatal(err)
					}
					f = [2]string{cert, key}
					certs[n.name] = f
				}
				return []string{"-tls-cert", f[0], "-tls-key", f[1], "-tls-ca", caFile}
			}
		}
		startClusterOf(b, c, 3)
		leader := c.waitVoters(c.nodes[0], 3, 60*time.Second)
		if creds != "off" && !strings.Contains(c.nodes[0].p.log.String(), "cluster port: ") {
			b.Fatalf("%s: the node does not log how its cluster port is secured", creds)
		}
		order := c.leaderFirst(leader)
		admin, err := dial9(order[0].p9)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := admin.ask("session/new", "name=bench"); err != nil {
			b.Fatal(err)
		}
		admin.close()
		ws := make([]writer, slices.Max(concurrency))
		for i := range ws {
			w, err := newCtlWriter(order[i%len(order)].p9, "bench", fmt.Sprintf("a%d", i), 60*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer w.close()
			ws[i] = w
		}
		sides = append(sides, side{creds, ws})
	}
	for _, n := range concurrency {
		for _, s := range sides {
			b.Run(fmt.Sprintf("clients=%d/creds=%s", n, s.name), func(b *testing.B) { runWrites(b, s.ws[:n]) })
		}
	}
}
