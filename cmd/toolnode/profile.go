package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

// startProfile writes a CPU profile of the node's first seconds when
// $TOOLNODE_CPUPROFILE names a file the node does not have yet:
// $TOOLNODE_CPUPROFILE_FOR long (default 30s), until the process gets
// SIGUSR1 (a benchmark sends it when it counts the node formed), or until
// stop is called, whichever comes first. It is for measuring a start (where a node's CPU
// goes while a cluster forms); it is off unless asked for, and an
// existing file is never overwritten.
func startProfile() (stop func(), err error) {
	path := os.Getenv("TOOLNODE_CPUPROFILE")
	if path == "" {
		return func() {}, nil
	}
	d := 30 * time.Second
	if s := os.Getenv("TOOLNODE_CPUPROFILE_FOR"); s != "" {
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return nil, fmt.Errorf("TOOLNODE_CPUPROFILE_FOR=%q: want a duration such as 30s", s)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("TOOLNODE_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("TOOLNODE_CPUPROFILE: %w", err)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		defer close(finished)
		select {
		case <-time.After(d):
		case <-done:
		case <-usr1:
		}
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "toolnode: CPU profile %s: %v\n", path, err)
			return
		}
		fmt.Fprintf(os.Stderr, "toolnode: CPU profile written to %s\n", path)
	}()
	var once bool
	return func() {
		if !once {
			once = true
			close(done)
			<-finished
		}
	}, nil
}
