package raftfsm

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkVersionsMemory is the memory the replicated state keeps per
// version: 1,000 tools published once each (the baseline, measured in
// the same run), then 9 more publishes of each, every one with 4 KiB of
// new metadata, so each tool keeps 10 versions (the default
// -keep-versions). The heap is read after a GC at both points;
// bytes/version is the growth over the 9,000 versions added, and
// bytes/tool the baseline's heap per tool with its one version.
func BenchmarkVersionsMemory(b *testing.B) {
	const tools, versions, metaSize = 1000, 10, 4096
	exe := ExecHash([]byte("#!/bin/sh\necho hi\n"))
	meta := func(tool, v int) []byte {
		head := fmt.Sprintf(`{"description":"tool %d version %d `, tool, v)
		return []byte(head + strings.Repeat("x", metaSize-len(head)-2) + `"}`)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perVersion, perTool float64
	for range b.N {
		b.StopTimer()
		empty := heap()
		f := New(nil)
		index := uint64(0)
		publish := func(v int) {
			for i := range tools {
				index++
				body := PublishTools{Owner: "n1", Time: int64(index), Tools: []ToolSpec{{Name: fmt.Sprintf("tool%04d", i), Meta: meta(i, v), ExecHash: exe, Size: 18}}}
				l := &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: MustEncode(CmdPublishTools, body)}
				if err, _ := f.Apply(l).(error); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		publish(1)
		b.StopTimer()
		one := heap()
		b.StartTimer()
		for v := 2; v <= versions; v++ {
			publish(v)
		}
		b.StopTimer()
		ten := heap()
		if h, ok := f.ToolVersions("tool0000"); !ok || len(h.Versions) != versions {
			b.Fatalf("tool0000 keeps %d versions, want %d", len(h.Versions), versions)
		}
		runtime.KeepAlive(f)
		perTool += float64(one-empty) / tools
		perVersion += (float64(ten) - float64(one)) / (tools * (versions - 1))
	}
	b.ReportMetric(perTool/float64(b.N), "bytes/tool")
	b.ReportMetric(perVersion/float64(b.N), "bytes/version")
	b.ReportMetric(metaSize, "meta-bytes")
}
