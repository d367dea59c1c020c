//go:build linux

package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// nodeLayout is what a node protects by default: its data directory, the
// credentials in its user's home, and a key file in /etc (whose many
// entries make it the dearest place to protect).
func nodeLayout(b *testing.B) []string {
	home, _ := os.UserHomeDir()
	p := []string{filepath.Join(b.TempDir(), "data"), "/etc/ssl/private/node.key"}
	for _, s := range []string{".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh", ".netrc", ".git-credentials", ".pgpass"} {
		p = append(p, filepath.Join(home, s))
	}
	return p
}

// BenchmarkSandboxParts prices the sandbox of a call, side by side with
// running /bin/true directly: the whole call path unconfined
// (yolo), with every protection, and with every protection and the node's
// default protected paths. What each kernel-side protection costs alone is
// BenchmarkSandboxKernel's.
func BenchmarkSandboxParts(b *testing.B) {
	if _, err := Status(); err != nil {
		b.Skip(err)
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.Stdin = strings.NewReader(string(benchArgs))
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	layout := nodeLayout(b)
	for _, c := range []struct {
		name   string
		yolo   bool
		layout bool
	}{
		{name: "yolo", yolo: true},
		{name: "all"},
		{name: "all_node_layout", layout: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := newTestSandbox(b, func(cfg *testConfig) {
				cfg.Off = c.yolo
				if c.layout {
					cfg.Protected = layout
				}
			})
			benchRun(b, r)
			if r.view != nil {
				n, err := r.view.size()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(n), "rules")
			}
		})
	}
}

// BenchmarkReadRules is the price of the read rules alone: a ruleset made
// and filled from the cached descriptors, per call, as restrictThread
// does, for the scratch directory only and for the node's layout.
func BenchmarkReadRules(b *testing.B) {
	abi, err := Status()
	if err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name      string
		protected []string
	}{
		{"scratch_only", []string{b.TempDir()}},
		{"node_layout", nodeLayout(b)},
	} {
		b.Run(c.name, func(b *testing.B) {
			v := newFSView(c.protected)
			handled := handledFS(abi)
			n := 0
			for b.Loop() {
				fd, err := llsys.LandlockCreateRuleset(&llsys.RulesetAttr{HandledAccessFS: handled}, 0)
				if err != nil {
					b.Fatal(err)
				}
				rules, release, err := v.current()
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range rules {
					if err := addRule(fd, r.fd, r.access&handled); err != nil {
						b.Fatal(err)
					}
				}
				n = len(rules)
				release()
				syscall.Close(fd)
			}
			b.ReportMetric(float64(n), "rules")
		})
	}
	b.Run("rebuild_node_layout", func(b *testing.B) {
		protected := cleanProtected(nodeLayout(b))
		for b.Loop() {
			r, err := walkView("/", protected, roDirAccess, roFileAccess)
			if err != nil {
				b.Fatal(err)
			}
			r.close()
		}
	})
}

// BenchmarkDigestVerify is the check of an executable before each run:
// served from the cache (the file unchanged), and hashed (a 1 MiB file,
// first run or changed).
func BenchmarkDigestVerify(b *testing.B) {
	content := make([]byte, 1<<20)
	rand.Read(content)
	sum := sha256.Sum256(content)
	want := hex.EncodeToString(sum[:])
	p := filepath.Join(b.TempDir(), "tool")
	if err := os.WriteFile(p, content, 0o555); err != nil {
		b.Fatal(err)
	}
	b.Run("hashed_1MiB", func(b *testing.B) {
		for b.Loop() {
			var c DigestCache // empty every time
			if err := c.Verify(p, want); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c DigestCache
		c.m = map[fileID]string{}
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		// As if hashed over a second after the last change.
		id, _ := fileIDOfUnchecked(fi)
		c.m[id] = want
		for b.Loop() {
			if err := c.Verify(p, want); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSandboxOverhead interleaves, in every iteration, /bin/true run
// directly, the same call through a Sandbox that is Off (yolo), and
// through a Sandbox with every protection and the node's protected paths,
// so all three see the same load on a shared machine. It reports each, and
// what the whole call and the sandbox add. Beside the wall times it
// reports each leg's CPU time (LEG-cpu-ns: the process's and its reaped
// children's user and system time), which a loaded machine inflates far
// less: after a Sandbox's leg it waits for its work in the
// background (the next calls made ready, the cleanup after the answer),
// outside the leg's wall time but inside its CPU time, so each leg is
// charged with all it did. Beside the means (added-ns, sandbox-ns) it
// reports the medians of the iterations' differences (added-median-ns,
// sandbox-median-ns), which the stalls of a loaded machine move far less.
func BenchmarkSandboxOverhead(b *testing.B) {
	if _, err := Status(); err != nil {
		b.Skip(err)
	}
	r := newTestSandbox(b, func(cfg *testConfig) { cfg.Protected = nodeLayout(b) })
	yolo := newTestSandbox(b, func(cfg *testConfig) { cfg.Off = true })
	inv := tool{Exec: "/bin/true", Args: benchArgs}
	var direct, unsandboxed, sandboxed time.Duration
	var cpu [3]time.Duration
	var added, sandbox []time.Duration // per iteration, for the medians
	for b.Loop() {
		c0 := processCPU()
		t0 := time.Now()
		cmd := exec.Command("/bin/true")
		cmd.Stdin = strings.NewReader(string(benchArgs))
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		c1 := processCPU()
		if _, err := yolo.run(context.Background(), inv); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		// The yolo Sandbox's work after its answer (its scratch directory
		// removed, its thread let go) is waited for outside both legs'
		// wall times: inside the sandboxed leg's, it was charged ~0.8 ms
		// on a quiet machine that was the yolo Sandbox's (BENCHMARKS.md).
		yolo.idle()
		c2 := processCPU()
		t3 := time.Now()
		if _, err := r.run(context.Background(), inv); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		r.idle()
		c3 := processCPU()
		direct += t1.Sub(t0)
		unsandboxed += t2.Sub(t1)
		sandboxed += t4.Sub(t3)
		added = append(added, t4.Sub(t3)-t1.Sub(t0))
		sandbox = append(sandbox, t4.Sub(t3)-t2.Sub(t1))
		cpu[0] += c1 - c0
		cpu[1] += c2 - c1
		cpu[2] += c3 - c2
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(direct), "direct-ns")
	b.ReportMetric(per(unsandboxed), "yolo-ns")
	b.ReportMetric(per(sandboxed), "sandboxed-ns")
	b.ReportMetric(per(sandboxed-direct), "added-ns")
	b.ReportMetric(per(sandboxed-unsandboxed), "sandbox-ns")
	b.ReportMetric(float64(median(added).Nanoseconds()), "added-median-ns")
	b.ReportMetric(float64(median(sandbox).Nanoseconds()), "sandbox-median-ns")
	b.ReportMetric(per(cpu[0]), "direct-cpu-ns")
	b.ReportMetric(per(cpu[1]), "yolo-cpu-ns")
	b.ReportMetric(per(cpu[2]), "sandboxed-cpu-ns")
	b.ReportMetric(per(cpu[2]-cpu[0]), "added-cpu-ns")
	b.ReportMetric(per(cpu[2]-cpu[1]), "sandbox-cpu-ns")
	if taken, missed := r.prep.taken.Load(), r.prep.missed.Load(); taken+missed > 0 {
		b.ReportMetric(float64(taken)/float64(taken+missed), "prepared")
	}
}

// median is the middle of ds (ds is sorted); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// processCPU is the user and system time of this process and of its
// children it has reaped.
func processCPU() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	d := func(ru *syscall.Rusage) time.Duration {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d(&self) + d(&children)
}

// idle waits until the Sandbox's work in the background is done: the calls
// being made ready and the cleanup after the last answer.
func (r *testSandbox) idle() { r.prep.wg.Wait() }

// BenchmarkNetworkRule prices the network confinement of a call without
// "network": true, side by side with the call as it ran before it (the
// same tool with "network": true: no network layer), in rounds.
func BenchmarkNetworkRule(b *testing.B) {
	if abi, err := Status(); err != nil || handledNet(abi) == 0 {
		b.Skip("no Landlock network rules on this kernel")
	}
	r := newTestSandbox(b, nil)
	ctx := context.Background()
	run := func(b *testing.B, r *testSandbox, network bool) {
		inv := tool{Exec: "/bin/true", Network: network, Args: benchArgs}
		for b.Loop() {
			if _, err := r.run(ctx, inv); err != nil {
				b.Fatal(err)
			}
		}
	}
	for round := range 3 {
		b.Run("before/round="+strconv.Itoa(round), func(b *testing.B) { run(b, r, true) })
		b.Run("landlock_tcp+mptcp_filter/round="+strconv.Itoa(round), func(b *testing.B) { run(b, r, false) })
	}
}
