package registry

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

// fakeHost is a linux/amd64 host with the binaries, files and variables
// given.
func fakeHost(binaries, files []string, env map[string]string) Host {
	set := func(xs []string) map[string]bool {
		m := make(map[string]bool)
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	bins, fs := set(binaries), set(files)
	return Host{
		GOOS:   "linux",
		GOARCH: "amd64",
		Getenv: func(k string) string { return env[k] },
		LookPath: func(p string) (string, error) {
			if bins[p] {
				return p, nil
			}
			return "", errors.New("not found")
		},
		Exists: func(p string) bool { return fs[p] },
	}
}

func mustParse(t testing.TB, doc string) *Meta {
	t.Helper()
	m, _, err := ParseMeta([]byte(doc))
	if err != nil {
		t.Fatalf("ParseMeta(%s): %v", doc, err)
	}
	return m
}

func TestResolve_Conditions(t *testing.T) {
	host := fakeHost([]string{"rg", "/opt/bin/fd"}, []string{"/etc/os-release", "/srv"}, map[string]string{"HOME": "/home/user", "EMPTY": ""})
	tests := []struct {
		name  string
		match string // the match object of the only variant
		holds bool
	}{
		{name: "os", match: `{"os": "linux"}`, holds: true},
		{name: "os other", match: `{"os": "darwin"}`},
		{name: "os array any", match: `{"os": ["darwin", "linux"]}`, holds: true},
		{name: "os array none", match: `{"os": ["darwin", "windows"]}`},
		{name: "arch", match: `{"arch": "amd64"}`, holds: true},
		{name: "arch other", match: `{"arch": "arm64"}`},
		{name: "arch array", match: `{"arch": ["arm64", "amd64"]}`, holds: true},
		{name: "binary in PATH", match: `{"binary": "rg"}`, holds: true},
		{name: "binary absolute", match: `{"binary": "/opt/bin/fd"}`, holds: true},
		{name: "binary missing", match: `{"binary": "ag"}`},
		{name: "binary array", match: `{"binary": ["ag", "rg"]}`, holds: true},
		{name: "file", match: `{"file": "/etc/os-release"}`, holds: true},
		{name: "file dir", match: `{"file": "/srv"}`, holds: true},
		{name: "file missing", match: `{"file": "/nope"}`},
		{name: "file array", match: `{"file": ["/nope", "/srv"]}`, holds: true},
		{name: "env set", match: `{"env": "HOME"}`, holds: true},
		{name: "env empty", match: `{"env": "EMPTY"}`},
		{name: "env unset", match: `{"env": "UNSET"}`},
		{name: "env array", match: `{"env": ["UNSET", "HOME"]}`, holds: true},
		{name: "nenv unset", match: `{"nenv": "UNSET"}`, holds: true},
		{name: "nenv empty", match: `{"nenv": "EMPTY"}`, holds: true},
		{name: "nenv set", match: `{"nenv": "HOME"}`},
		{name: "nenv array", match: `{"nenv": ["HOME", "UNSET"]}`, holds: true},
		{name: "keys AND all hold", match: `{"os": "linux", "binary": "rg", "env": "HOME", "nenv": "UNSET", "file": "/srv", "arch": "amd64"}`, holds: true},
		{name: "keys AND one fails", match: `{"os": "linux", "binary": "rg", "env": "UNSET"}`},
		{name: "empty match", match: `{}`, holds: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, `{"description": "top", "variants": [{"match": `+tt.match+`, "description": "variant"}]}`)
			for _, r := range []func(*Meta) (Meta, int, bool){
				func(m *Meta) (Meta, int, bool) { return m.Resolve(host) },
				NewResolver(host).Resolve,
			} {
				got, idx, ok := r(m)
				if ok != tt.holds {
					t.Fatalf("ok = %v, want %v", ok, tt.holds)
				}
				if !ok {
					continue
				}
				if idx != 0 || got.Description != "variant" || got.Variants != nil {
					t.Errorf("resolved to variant %d: %+v", idx, got)
				}
			}
		})
	}
}

func TestResolve_FirstMatchWins(t *testing.T) {
	m := mustParse(t, `{"cmd": "top", "variants": [
		{"match": {"os": "darwin"}, "cmd": "mac"},
		{"match": {"os": "linux"}, "cmd": "linux-1"},
		{"match": {"os": "linux"}, "cmd": "linux-2"},
		{"cmd": "fallback"}
	]}`)
	got, idx, ok := m.Resolve(fakeHost(nil, nil, nil))
	if !ok || idx != 1 || got.Cmd != "linux-1" {
		t.Errorf("Resolve = (%q, %d, %v), want (linux-1, 1, true)", got.Cmd, idx, ok)
	}
	h := fakeHost(nil, nil, nil)
	h.GOOS = "plan9"
	got, idx, ok = m.Resolve(h)
	if !ok || idx != 3 || got.Cmd != "fallback" {
		t.Errorf("on plan9: Resolve = (%q, %d, %v), want (fallback, 3, true)", got.Cmd, idx, ok)
	}
}

func TestResolve_OverridesOnlyNonEmpty(t *testing.T) {
	m := mustParse(t, `{
		"description": "top d", "prompt": "top p", "args": {"type": "object", "title": "top"},
		"tier": "warm", "scope": "write", "outputFormat": "json", "cmd": "top", "resetsCounter": true,
		"variants": [
			{"match": {"env": "ONE"}, "cmd": "one", "description": ""},
			{"match": {"env": "TWO"}, "prompt": "two p", "args": {"type": "object", "title": "two"}, "tier": "cold",
			 "scope": "read", "outputFormat": "text", "resetsCounter": false, "description": "two d"}
		]}`)
	top := *m
	top.Variants = nil

	one, idx, ok := m.Resolve(fakeHost(nil, nil, map[string]string{"ONE": "1"}))
	want := top
	want.Cmd = "one"
	if !ok || idx != 0 || !metaEqual(one, want) {
		t.Errorf("variant one: got %+v, want %+v", one, want)
	}

	two, idx, ok := m.Resolve(fakeHost(nil, nil, map[string]string{"TWO": "1"}))
	want = Meta{Description: "two d", Prompt: "two p", Args: []byte(`{"type":"object","title":"two"}`),
		Tier: "cold", Scope: "read", OutputFormat: "text", Cmd: "top", ResetsCounter: false}
	if !ok || idx != 1 || !metaEqual(two, want) {
		t.Errorf("variant two: got %+v, want %+v", two, want)
	}

	_, _, ok = m.Resolve(fakeHost(nil, nil, nil))
	if ok {
		t.Error("a tool with variants none of which matches must be hidden")
	}
	if m.Variants == nil || m.Cmd != "top" {
		t.Error("Resolve changed its receiver")
	}
}

func metaEqual(a, b Meta) bool {
	return a.Description == b.Description && a.Prompt == b.Prompt && string(a.Args) == string(b.Args) &&
		a.Tier == b.Tier && a.Scope == b.Scope && a.OutputFormat == b.OutputFormat && a.Cmd == b.Cmd &&
		a.ResetsCounter == b.ResetsCounter && a.Variants == nil && b.Variants == nil
}

func TestResolve_NoVariants(t *testing.T) {
	m := mustParse(t, `{"cmd": "x"}`)
	got, idx, ok := m.Resolve(Host{}) // a zero Host: nothing holds, but nothing is asked
	if !ok || idx != -1 || got.Cmd != "x" {
		t.Errorf("Resolve = (%+v, %d, %v), want the top level, -1, true", got, idx, ok)
	}
	// A zero Host never panics: nil functions never hold (nenv always does).
	m = mustParse(t, `{"variants": [{"match": {"binary": "sh"}}, {"match": {"file": "/"}}, {"match": {"env": "HOME"}}, {"match": {"nenv": "HOME"}, "cmd": "nenv"}]}`)
	got, idx, ok = m.Resolve(Host{})
	if !ok || idx != 3 || got.Cmd != "nenv" {
		t.Errorf("zero Host: Resolve = (%q, %d, %v), want (nenv, 3, true)", got.Cmd, idx, ok)
	}
}

func TestResolver_CachesLookups(t *testing.T) {
	var lookups, stats atomic.Int32
	h := fakeHost([]string{"rg"}, []string{"/srv"}, nil)
	look, exists := h.LookPath, h.Exists
	h.LookPath = func(p string) (string, error) { lookups.Add(1); return look(p) }
	h.Exists = func(p string) bool { stats.Add(1); return exists(p) }
	m := mustParse(t, `{"variants": [{"match": {"binary": "ag"}}, {"match": {"file": "/srv", "binary": "rg"}}]}`)
	r := NewResolver(h)
	for range 100 {
		if _, idx, ok := r.Resolve(m); !ok || idx != 1 {
			t.Fatalf("Resolve = %d, %v", idx, ok)
		}
	}
	if lookups.Load() != 2 || stats.Load() != 1 {
		t.Errorf("100 resolutions made %d binary and %d file look-ups, want 2 and 1", lookups.Load(), stats.Load())
	}
}

func TestLocalHost(t *testing.T) {
	h := LocalHost()
	if h.GOOS != runtime.GOOS || h.GOARCH != runtime.GOARCH {
		t.Errorf("LocalHost = %s/%s", h.GOOS, h.GOARCH)
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "exe")
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	tests := []struct {
		bin string
		ok  bool
	}{
		{exe, true},
		{"exe", true},        // in $PATH
		{plain, false},       // not executable
		{"plain", false},     // in $PATH but not executable
		{dir, false},         // a directory
		{"sub/exe", false},   // relative paths are neither
		{"missing", false},   // nowhere
		{dir + "/no", false}, // absent absolute
	}
	for _, tt := range tests {
		if _, err := h.LookPath(tt.bin); (err == nil) != tt.ok {
			t.Errorf("LookPath(%q) = %v, want ok=%v", tt.bin, err, tt.ok)
		}
	}
	if !h.Exists(dir) || !h.Exists(plain) || h.Exists(dir+"/no") {
		t.Error("Exists is wrong")
	}
	t.Setenv("TOOLNODE_TEST_VAR", "1")
	if h.Getenv("TOOLNODE_TEST_VAR") != "1" {
		t.Error("Getenv does not read the environment")
	}
}

func TestMeta_WithVariant(t *testing.T) {
	m, _, err := ParseMeta([]byte(`{"description":"top","cmd":"a","variants":[{"match":{"os":"plan9"},"cmd":"b"},{"match":{"env":"X"},"description":"second"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		i         int
		desc, cmd string
	}{{-1, "top", "a"}, {0, "top", "b"}, {1, "second", "a"}, {7, "top", "a"}}
	for _, tc := range tests {
		got := m.WithVariant(tc.i)
		if got.Description != tc.desc || got.Cmd != tc.cmd || got.Variants != nil {
			t.Errorf("WithVariant(%d) = %q %q %v", tc.i, got.Description, got.Cmd, got.Variants)
		}
	}
}
