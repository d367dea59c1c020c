package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestWriteVersion(t *testing.T) {
	t.Parallel()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{{
		name: "a release from a clean tree",
		bi: debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "false"},
		}},
		want: "toolnode v1.2.3\ncommit 0123456789abcdef0123456789abcdef01234567 2026-12-01T10:00:00Z\ngo go1.99.1 " + platform + "\n",
	}, {
		name: "a checkout with changes",
		bi: debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.modified", Value: "true"},
		}},
		want: "toolnode (devel)\ncommit 0123456789abcdef0123456789abcdef01234567 (modified)\ngo go1.99.1 " + platform + "\n",
	}, {
		name: "no VCS information",
		bi:   debug.BuildInfo{GoVersion: "go1.99.1"},
		want: "toolnode (devel)\ncommit unknown\ngo go1.99.1 " + platform + "\n",
	}} {
		var b strings.Builder
		writeVersion(&b, &c.bi)
		if b.String() != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, b.String(), c.want)
		}
	}
}
