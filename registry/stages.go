package registry

import (
	"sync/atomic"
	"time"
)

// stage is one step of a call through the Runner, as the step-by-step
// profile of a call reports it (BenchmarkCallStages). A mark costs one
// atomic load when no profile is being taken, which is always outside
// benchmarks.
type stage int

// The steps of a call, in the order a sandboxed call passes them. Each
// mark ends its step: the time since the previous mark is the step's.
const (
	stValidate stage = iota // argument validation against the schema
	stCommand               // command resolution, sandbox readiness
	stCwd                   // the working directory checked
	stScratch               // the scratch directory (and its sandbox spec)
	stPipes                 // three pipes
	stCgroup                // the call's cgroups made (or taken ready)
	stThread                // a goroutine locked to a new OS thread running
	stCgJoin                // the thread in the v1 pids cgroup
	stRuleset               // the Landlock ruleset made and filled
	stRestrict              // no_new_privs, landlock_restrict_self, descriptors close-on-exec
	stFork                  // fork and exec of the tool (cmd.Start on the thread)
	stStarted               // the caller told the tool runs; spare pipe ends closed
	stExited                // the tool ran and exited (waited for, not yet reaped)
	stKill                  // its process group and cgroup killed, the leader reaped
	stDrain                 // stdout and stderr read to their end
	stReap                  // the group reaped, orphans swept
	stResult                // the result checked (status, output format)
	// After the answer, off the call's path:
	stRelease   // the call's thread let go
	stCgroupRm  // the call's cgroups taken back: drained and pooled, or removed
	stScratchRm // the scratch directory removed
	nStages
)

var stageNames = [nStages]string{
	"validate", "command", "cwd", "scratch", "pipes", "cgroup", "thread",
	"cgjoin", "ruleset", "restrict", "fork", "started", "exited", "kill",
	"drain", "reap", "result", "release", "cgroup_rm", "scratch_rm",
}

// stageHook, when set, is called at each mark with -1, and at the end
// of a step timed on its own (markSpan) with its duration; only
// benchmarks set it.
var stageHook atomic.Pointer[func(stage, time.Duration)]

// mark ends step s of a call's path.
func mark(s stage) {
	if h := stageHook.Load(); h != nil {
		(*h)(s, -1)
	}
}

// markSpan ends step s, begun at start, off the call's path.
func markSpan(s stage, start time.Time) {
	if h := stageHook.Load(); h != nil {
		(*h)(s, time.Since(start))
	}
}
