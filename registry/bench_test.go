package registry

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// benchTools is the size of the catalog fixture.
const benchTools = 10000

var bench struct {
	once sync.Once
	dir  string
	err  error
}

// benchFixture returns a directory of benchTools generated .meta files
// (about one in five with variants over binary, env, file and os, one in
// twenty with an executable beside it), made once per test binary run.
func benchFixture(b *testing.B) string {
	bench.once.Do(func() {
		bench.dir, bench.err = os.MkdirTemp("", "registry-bench-")
		if bench.err != nil {
			return
		}
		for i := range benchTools {
			name := fmt.Sprintf("tool%05d", i)
			if err := os.WriteFile(filepath.Join(bench.dir, name+".meta"), benchMeta(i), 0o644); err != nil {
				bench.err = err
				return
			}
			if i%20 == 0 {
				if err := os.WriteFile(filepath.Join(bench.dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
					bench.err = err
					return
				}
			}
		}
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.dir
}

func removeBenchFixture() {
	if bench.dir != "" {
		_ = os.RemoveAll(bench.dir)
	}
}

// benchMeta generates the i-th tool: every schema is distinct (its
// property names carry i), so no cache can make the scan cheaper.
func benchMeta(i int) []byte {
	var props []string
	for p := range 1 + i%4 {
		typ := []string{"string", "integer", "boolean", "array"}[p]
		prop := fmt.Sprintf(`"p%d_%d": {"type": %q, "description": "parameter %d of tool %d"}`, p, i, typ, p, i)
		if typ == "array" {
			prop = fmt.Sprintf(`"p%d_%d": {"type": "array", "items": {"type": "string"}, "maxItems": %d}`, p, i, 10+i%7)
		}
		props = append(props, prop)
	}
	meta := fmt.Sprintf(`{
  "description": "generated tool number %d",
  "prompt": "Tool %d does one small thing. Call it with the arguments below; it prints its result as text.",
  "args": {"type": "object", "properties": {%s}, "required": ["p0_%d"], "additionalProperties": false},
  "tier": %q,
  "scope": %q,
  "cmd": "echo tool %d"`,
		i, i, strings.Join(props, ", "), i, []string{"hot", "warm", "cold"}[i%3], []string{"read", "write", ""}[i%3], i)
	if i%5 == 0 {
		meta += fmt.Sprintf(`,
  "variants": [
    {"match": {"binary": ["not-installed-%d", "/opt/none/bin/x%d"]}, "cmd": "x"},
    {"match": {"binary": "sh", "env": "HOME", "os": ["linux", "darwin"]}, "cmd": "sh -c 'echo %d'"},
    {"match": {"file": "/etc/os-release", "nenv": "TOOLNODE_BENCH_UNSET"}, "description": "fallback"}
  ]`, i%25, i%25, i)
	}
	return []byte(meta + "\n}\n")
}

// BenchmarkCatalogBuild is a catalog pass: ScanTools of the fixture, then
// the resolution of every tool against the real host.
func BenchmarkCatalogBuild(b *testing.B) {
	dir := benchFixture(b)
	host := LocalHost()
	b.ResetTimer()
	for b.Loop() {
		tools, problems, err := ScanTools(dir)
		if err != nil || len(problems) != 0 || len(tools) != benchTools {
			b.Fatalf("scan: %d tools, problems %v, err %v", len(tools), problems, err)
		}
		r := NewResolver(host)
		visible := 0
		for _, t := range tools {
			if _, _, ok := r.Resolve(t.Parsed); ok {
				visible++
			}
		}
		if visible != benchTools {
			b.Fatalf("%d tools visible", visible)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchTools, "ns/file")
}

// BenchmarkReadRaw is the floor: listing the fixture and reading the
// bytes of every .meta file, nothing else.
func BenchmarkReadRaw(b *testing.B) {
	dir := benchFixture(b)
	b.ResetTimer()
	for b.Loop() {
		entries, err := os.ReadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), MetaSuffix) {
				continue
			}
			if _, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchTools {
			b.Fatalf("read %d files", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchTools, "ns/file")
}

// BenchmarkParseMeta is the parse of one fixture document, variants and
// all, for reference.
func BenchmarkParseMeta(b *testing.B) {
	doc := benchMeta(5)
	for b.Loop() {
		if _, _, err := ParseMeta(doc); err != nil {
			b.Fatal(err)
		}
	}
}

var benchArgs = []byte(`{"path": "/etc/hosts", "n": 3}`)

// BenchmarkRunSandboxed is a whole call of a trivial tool through the
// Runner with the sandbox: argument validation, scratch directory, a
// Landlock-confined thread that forks the tool, and /bin/true.
func BenchmarkRunSandboxed(b *testing.B) {
	r := newTestRunner(b, nil)
	benchRun(b, r)
}

// BenchmarkRunYolo is the same call without the sandbox.
func BenchmarkRunYolo(b *testing.B) {
	r := newTestRunner(b, func(c *RunnerConfig) { c.Yolo = true })
	benchRun(b, r)
}

func benchRun(b *testing.B, r *Runner) {
	inv := Invocation{Tool: "true", Exec: "/bin/true", Meta: shTool(""), Args: benchArgs}
	ctx := context.Background()
	for b.Loop() {
		if _, err := r.Run(ctx, inv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecDirect is the floor: /bin/true run directly with os/exec,
// the arguments on its standard input.
func BenchmarkExecDirect(b *testing.B) {
	for b.Loop() {
		cmd := exec.Command("/bin/true")
		cmd.Stdin = strings.NewReader(string(benchArgs))
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
