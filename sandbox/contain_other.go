//go:build !linux

package sandbox

import (
	"syscall"
	"time"
)

// detectContainment: only Linux has cgroups and subreapers; elsewhere a
// call's process group is all that is killed.
func detectContainment(maxProcs int) *containment {
	return &containment{maxProcs: maxProcs, missing: []string{"cgroups and subreapers are Linux only"}}
}

type callGroup struct{}

func (c *containment) newCall() (*callGroup, error) { return nil, nil }
func (g *callGroup) setAttr(*syscall.SysProcAttr)   {}
func (g *callGroup) join() error                    { return nil }
func (g *callGroup) kill()                          {}
func (g *callGroup) killExited()                    {}
func (g *callGroup) finish()                        {}
func (c *containment) recycle(*callGroup)           {}
func (c *containment) close() error                 { return nil }
func beginStart()                                   {}
func endStart(int)                                  {}
func leaderReaped(int)                              {}
func sweepOrphans(bool, time.Duration)              {}
