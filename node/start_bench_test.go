package node

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// startBenchTools is how many tools the start benchmarks publish.
const startBenchTools = 10000

// startBenchMeta is tool i's .meta: one in five has variants (a binary
// that is not installed, one that is, a file), every args schema is
// distinct. bench/single_bench_test.go writes the same.
func startBenchMeta(i int) []byte {
	meta := fmt.Sprintf(`{
  "description": "generated tool number %d",
  "prompt": "Tool %d does one small thing.",
  "args": {"type": "object", "properties": {"p_%d": {"type": "string"}, "n_%d": {"type": "integer"}}, "required": ["p_%d"]},
  "tier": %q,
  "cmd": "echo tool %d"`, i, i, i, i, i, []string{"hot", "warm", "cold"}[i%3], i)
	if i%5 == 0 {
		meta += fmt.Sprintf(`,
  "variants": [
    {"match": {"binary": "not-installed-%d"}, "cmd": "x"},
    {"match": {"binary": "sh", "env": "HOME", "os": ["linux", "darwin"]}, "cmd": "sh -c 'echo %d'"},
    {"match": {"file": "/etc/os-release"}, "description": "fallback"}
  ]`, i%25, i)
	}
	return []byte(meta + "\n}\n")
}

func startBenchDir(b *testing.B) string {
	dir := filepath.Join(b.TempDir(), "tools")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range startBenchTools {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tool%05d.meta", i)), startBenchMeta(i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkNodeStart is New until the catalog holds every tool, in this
// process (real Raft on disk), on a fresh data directory and restarted on
// one that already holds the tools, each round beside its floor: reading
// and parsing the same files, one after the other, as bench/internal/
// metafloor does. The legs of a round run back to back, so they share the
// machine's load; the ratios reported are the medians of the rounds'. The
// black-box figure (a process, a 9P client) is bench's BenchmarkStart;
// this one is for profiles (-cpuprofile).
func BenchmarkNodeStart(b *testing.B) {
	tools := startBenchDir(b)
	start := func(data string) *Node {
		n, err := New(Config{
			P9Anon:     trustedAnon,
			EncryptKey: testClusterKey,
			Name:       "n1", DataDir: data, ToolsDir: tools,
			GossipAddr: "127.0.0.1:0", P9Listener: listen(b), ClusterListener: listen(b),
			LogOutput: io.Discard,
		})
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for n.catalog.Count() != startBenchTools {
			if time.Now().After(deadline) {
				b.Fatalf("the catalog has %d tools, not %d", n.catalog.Count(), startBenchTools)
			}
			time.Sleep(time.Millisecond)
		}
		return n
	}
	floor := func() {
		ents, err := os.ReadDir(tools)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join(tools, e.Name()))
			if err != nil {
				b.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	}
	timed := func(f func()) time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
	}
	restartData := filepath.Join(b.TempDir(), "data")
	start(restartData).Close()
	var floors, fresh, restart []time.Duration
	i := 0
	for b.Loop() {
		i++
		floors = append(floors, timed(floor))
		var n *Node
		fresh = append(fresh, timed(func() { n = start(filepath.Join(b.TempDir(), fmt.Sprint(i))) }))
		b.StopTimer()
		n.Close()
		b.StartTimer()
		restart = append(restart, timed(func() { n = start(restartData) }))
		b.StopTimer()
		n.Close()
		b.StartTimer()
	}
	reportStart(b, floors, fresh, restart)
}

// reportStart reports the medians of the legs (ms) and of the rounds'
// ratios to the floor.
func reportStart(b *testing.B, floors, fresh, restart []time.Duration) {
	ms := func(d []time.Duration) float64 {
		v := make([]float64, len(d))
		for i := range d {
			v[i] = float64(d[i]) / 1e6
		}
		return median(v)
	}
	ratio := func(d []time.Duration) float64 {
		v := make([]float64, len(d))
		for i := range d {
			v[i] = float64(d[i]) / float64(floors[i])
		}
		return median(v)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(floors), "floor-ms")
	b.ReportMetric(ms(fresh), "fresh-ms")
	b.ReportMetric(ms(restart), "restart-ms")
	b.ReportMetric(ratio(fresh), "fresh/floor")
	b.ReportMetric(ratio(restart), "restart/floor")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
