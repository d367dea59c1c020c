package bench

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkFollowerWrites measures writes through a follower against the
// same writes through the leader, on one three-node cluster per setting,
// and a three-member etcd's puts and deletes through a follower and
// through its leader, all in one run: 1 client, then 16, all on the one
// node. The writes: tool_load/tool_unload on the client's own agent
// (answered once the leader committed them; the follower's next agent
// read waits to have applied them), and agent/new in a session of the
// client's own (answered once the node written through has applied the
// agent: read-your-writes). The settings: the commit notice (the
// default) and the Barrier nudge it replaces (-raft-nudge-barrier).
func BenchmarkFollowerWrites(b *testing.B) {
	clients := []int{1, 16}
	for _, s := range []struct {
		name  string
		flags []string
	}{
		{"notice", nil},
		{"barrier", []string{"-raft-nudge-barrier"}},
	} {
		b.Run("toolnode,"+s.name, func(b *testing.B) {
			order, admin := benchSession(b, startClusterWith(b, 3, s.flags...))
			sessions := 0
			for _, k := range clients {
				for i, where := range []string{"leader", "follower"} {
					ws := make([]writer, k)
					for j := range ws {
						w, err := newCtlWriter(order[i].p9, "bench", fmt.Sprintf("%s%d-%d", where, k, j), 60*time.Second)
						if err != nil {
							b.Fatal(err)
						}
						defer w.close()
						ws[j] = w
					}
					b.Run(fmt.Sprintf("load,clients=%d,%s", k, where), func(b *testing.B) { runWrites(b, ws) })
				}
				for i, where := range []string{"leader", "follower"} {
					ws := make([]writer, k)
					for j := range ws {
						conn, err := dial9(order[i].p9)
						if err != nil {
							b.Fatal(err)
						}
						defer conn.close()
						ws[j] = &agentNewWriter{conn: conn}
					}
					b.Run(fmt.Sprintf("agent-new,clients=%d,%s", k, where), func(b *testing.B) {
						// A fresh session per writer and round keeps the
						// sessions small: each new agent copies its
						// session's agent map.
						for _, w := range ws {
							sessions++
							name := fmt.Sprintf("b%d", sessions)
							if _, err := admin.ask("session/new", "name="+name); err != nil {
								b.Fatal(err)
							}
							w.(*agentNewWriter).session = name
						}
						runWrites(b, ws)
					})
				}
			}
		})
	}
	b.Run("etcd", func(b *testing.B) {
		ec := startEtcd(b, 3)
		order := ec.leaderFirst(b)
		hc := etcdHTTP()
		defer hc.CloseIdleConnections()
		for _, k := range clients {
			for i, where := range []string{"leader", "follower"} {
				ws := make([]writer, k)
				for j := range ws {
					w := newEtcdWriter(hc, order[i], fmt.Sprintf("/bench/%s%d-%d/loaded/%s", where, k, j, benchTool))
					for range 2 { // warm the connection; leave the key absent
						if err := w.write(); err != nil {
							b.Fatal(err)
						}
					}
					ws[j] = w
				}
				b.Run(fmt.Sprintf("put,clients=%d,%s", k, where), func(b *testing.B) { runWrites(b, ws) })
			}
		}
	})
}

// agentNewWriter makes agents in its session through session/S/agent/new,
// each on a fid of its own, as 9p rdwr does.
type agentNewWriter struct {
	conn    *conn9
	session string
	seq     int
}

func (w *agentNewWriter) write() error {
	w.seq++
	_, err := w.conn.ask("session/"+w.session+"/agent/new", fmt.Sprintf("name=a%d", w.seq))
	return err
}

func (w *agentNewWriter) close() { w.conn.close() }
