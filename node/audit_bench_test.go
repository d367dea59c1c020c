package node

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAudit9P is a state change through 9P (a tool_load and a
// tool_unload on an agent's ctl, two Raft commands) with the audit log
// off and on, in the same run: the ratio is what recording costs.
func BenchmarkAudit9P(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			tools := benchTools(b)
			cfg := Config{
				P9Anon:     trustedAnon,
				EncryptKey: testClusterKey,
				Name:       "n1", DataDir: filepath.Join(dir, "data"), ToolsDir: tools,
				GossipAddr: "127.0.0.1:0", P9Listener: listen(b), ClusterListener: listen(b),
				Debounce: 20 * time.Millisecond, LogOutput: testWriter{b},
			}
			if on {
				cfg.AuditFile = filepath.Join(dir, "audit.log")
			}
			n, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			fsys := mount(b, n.P9Addr())
			waitFor(b, "tool nop published", 10*time.Second, func() bool {
				_, ok := n.fsm.Tool("nop")
				return ok
			})
			mustAsk(b, fsys, "session/new", "name=bench")
			mustAsk(b, fsys, "session/bench/agent/new", "name=a")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				mustAsk(b, fsys, "session/bench/agent/a/ctl", "tool_load nop")
				mustAsk(b, fsys, "session/bench/agent/a/ctl", "tool_unload nop")
			}
		})
	}
}
