//go:build linux

package registry

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// stageClock sums, over many calls, the time each step of a call took:
// the time from the previous mark (or the call's start) to its own.
type stageClock struct {
	mu   sync.Mutex
	last time.Time
	sum  [nStages]time.Duration
}

func (c *stageClock) start() {
	c.mu.Lock()
	c.last = time.Now()
	c.mu.Unlock()
}

func (c *stageClock) mark(s stage, d time.Duration) {
	now := time.Now()
	c.mu.Lock()
	if d >= 0 {
		c.sum[s] += d // off the call's path: timed on its own
	} else {
		c.sum[s] += now.Sub(c.last)
		c.last = now
	}
	c.mu.Unlock()
}

// BenchmarkCallStages is the step-by-step profile of one call: a trivial
// tool (/bin/true, the arguments on its standard input) through a Runner
// with every protection and the node's protected paths, beside the same
// exec done directly, in turn in every iteration so that both see the
// same load. It reports the time of each step of the Runner's call
// (µs/op, named after the stages of stages.go), the whole call, the direct
// exec, and what the Runner adds. Steps done after the answer is returned
// (cleanup, the next calls made ready) are not in the call's time, but
// are reported; the loop waits for them before the next direct exec, so
// that the direct leg is not charged with them.
func BenchmarkCallStages(b *testing.B) {
	if _, err := SandboxStatus(); err != nil {
		b.Skip(err)
	}
	for _, c := range []struct {
		name string
		yolo bool
	}{{"sandboxed", false}, {"yolo", true}} {
		b.Run(c.name, func(b *testing.B) {
			r := newTestRunner(b, func(cfg *RunnerConfig) {
				cfg.Yolo = c.yolo
				cfg.Protected = nodeLayout(b)
			})
			inv := Invocation{Tool: "true", Exec: "/bin/true", Meta: shTool(""), Args: benchArgs}
			ctx := context.Background()
			if _, err := r.Run(ctx, inv); err != nil { // the read rules walked once
				b.Fatal(err)
			}
			r.idle()
			clock := &stageClock{}
			hook := clock.mark
			stageHook.Store(&hook)
			defer stageHook.Store(nil)
			var direct, call time.Duration
			var added []time.Duration
			for b.Loop() {
				t0 := time.Now()
				cmd := exec.Command("/bin/true")
				cmd.Stdin = strings.NewReader(string(benchArgs))
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				clock.start()
				if _, err := r.Run(ctx, inv); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				direct += t1.Sub(t0)
				call += t2.Sub(t1)
				added = append(added, t2.Sub(t1)-t1.Sub(t0))
				r.idle()
			}
			stageHook.Store(nil)
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N) }
			clock.mu.Lock()
			for s := range nStages {
				b.ReportMetric(us(clock.sum[s]), stageNames[s]+"-µs")
			}
			clock.mu.Unlock()
			if taken, missed := r.prep.taken.Load(), r.prep.missed.Load(); taken+missed > 0 {
				b.ReportMetric(float64(taken)/float64(taken+missed), "prepared")
			}
			b.ReportMetric(us(direct), "direct-µs")
			b.ReportMetric(us(call), "call-µs")
			b.ReportMetric(us(call-direct), "added-µs")
			b.ReportMetric(float64(median(added).Nanoseconds())/1e3, "added-median-µs")
		})
	}
}
