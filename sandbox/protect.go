package sandbox

import (
	"fmt"
	"os"
	"sync"
)

// DefaultMaxProcs is the default of Config.MaxProcs.
const DefaultMaxProcs = 128

// containment is how a Sandbox holds the processes of its calls, found once
// when its first call runs (detectContainment).
type containment struct {
	maxProcs  int
	v2        string // the sandbox's cgroup v2 directory; call cgroups go under it
	v2Pids    bool   // the pids controller is enabled for them
	v1        string // the sandbox's cgroup in the v1 pids hierarchy
	subreaper bool   // no cgroup: the node is a child subreaper instead
	missing   []string

	// Call cgroups that held a call and are empty again, ready for the
	// next one (see recycle).
	poolMu     sync.Mutex
	pool       []*callGroup // guarded by poolMu
	poolClosed bool         // guarded by poolMu
}

// Protections lists what protects the node and other calls from a tool
// run by s, one item a phrase, as the kernel provides it; a protection
// the host lacks is named as missing, never left out. The node's `node`
// file and its start log show it.
func (s *Sandbox) Protections() []string {
	var out []string
	if s.cfg.Off {
		return []string{"none (-yolo): no Landlock, no cgroup, no process limit; only the process group is killed"}
	}
	// Landlock: what tools may read, write and signal, and what the
	// kernel lacks (Info); then how their processes are contained.
	out = append(out, s.Info()...)
	out = append(out, s.containment().describe()...)
	out = append(out, fmt.Sprintf("uid %d", os.Getuid()))
	return out
}

// describe lists the process protections of c.
func (c *containment) describe() []string {
	if c == nil {
		return []string{"no cgroup or subreaper: only the process group is killed", "process limit missing"}
	}
	var out []string
	switch {
	case c.v2 != "":
		out = append(out, "cgroup v2 per call (cgroup.kill)")
	case c.v1 != "":
		out = append(out, "cgroup v1 pids per call (members killed)")
	case c.subreaper:
		out = append(out, "subreaper (orphans killed when a call ends)")
	default:
		out = append(out, "orphans not contained: no cgroup and no subreaper, only the process group is killed")
	}
	switch {
	case c.v2Pids:
		out = append(out, fmt.Sprintf("pids.max %d per call", c.maxProcs))
	case c.v1 != "":
		out = append(out, fmt.Sprintf("pids.max %d per call (cgroup v1)", c.maxProcs))
	default:
		out = append(out, "process limit missing: no pids controller for the node's cgroup")
	}
	for _, m := range c.missing {
		out = append(out, "("+m+")")
	}
	return out
}
