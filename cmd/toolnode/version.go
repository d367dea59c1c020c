package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
)

// version is `toolnode version`: what this binary was built from, as the
// Go toolchain recorded it.
func version(args []string) error {
	fs := newFlagSet("version", "version (prints the module version, VCS commit and Go version of this binary)")
	if err := parseAll(fs, args); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("this binary carries no build information")
	}
	writeVersion(os.Stdout, bi)
	return nil
}

// writeVersion prints three lines: the module's version ("(devel)" for a
// build from a checkout), the VCS commit with its time and "(modified)"
// when the tree had changes ("unknown" when the build recorded none), and
// the Go version with the platform.
func writeVersion(w io.Writer, bi *debug.BuildInfo) {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(w, "toolnode %s\n", v)
	commit := settings["vcs.revision"]
	if commit == "" {
		commit = "unknown"
	}
	if t := settings["vcs.time"]; t != "" {
		commit += " " + t
	}
	if settings["vcs.modified"] == "true" {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "commit %s\n", commit)
	fmt.Fprintf(w, "go %s %s/%s\n", bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}
