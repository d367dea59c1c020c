//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// HideEnviron blanks the environment the process was started with, as
// /proc/PID/environ shows it: the kernel lets a sandboxed tool read that
// file of its parent (Landlock's ptrace rule does not cover it), and it
// holds whatever the node was given, a gossip key in
// TOOLNODE_GOSSIP_KEY among it. The Go runtime copied the environment at
// start, so os.Getenv and os.Environ are unaffected. The command line
// (/proc/PID/cmdline) is left alone: the runtime did not copy it, and the
// flags still point into it.
func HideEnviron() error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// Fields after the command name, which may hold spaces: state is
	// field 3, env_start and env_end are 50 and 51 (proc(5)).
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 49 {
		return fmt.Errorf("/proc/self/stat has %d fields after the name, want env_start and env_end (Linux 3.5)", len(f))
	}
	start, err1 := strconv.ParseUint(f[47], 10, 64)
	end, err2 := strconv.ParseUint(f[48], 10, 64)
	if err1 != nil || err2 != nil || end < start || end-start > 1<<24 {
		return fmt.Errorf("/proc/self/stat: bad environment bounds %q %q", f[47], f[48])
	}
	if end == start {
		return nil
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	if _, err := mem.WriteAt(make([]byte, end-start), int64(start)); err != nil {
		return fmt.Errorf("blanking the environment: %w", err)
	}
	return nil
}
