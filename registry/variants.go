package registry

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Host is what variant conditions are checked against. LocalHost returns
// the real host; tests build their own. A nil function never holds
// (Getenv: every variable is unset).
type Host struct {
	GOOS, GOARCH string
	// Getenv returns the value of an environment variable ("" if unset).
	Getenv func(string) string
	// LookPath succeeds for an absolute path that is an executable
	// regular file, or a name found in $PATH.
	LookPath func(string) (string, error)
	// Exists reports whether a path exists (file or directory).
	Exists func(string) bool
}

// LocalHost returns the host this process runs on.
func LocalHost() Host {
	return Host{
		GOOS:     runtime.GOOS,
		GOARCH:   runtime.GOARCH,
		Getenv:   os.Getenv,
		LookPath: lookBinary,
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
	}
}

// lookBinary implements the binary condition on the real host.
func lookBinary(name string) (string, error) {
	if filepath.IsAbs(name) {
		if isExecutable(name) {
			return name, nil
		}
		return "", fmt.Errorf("%s is not an executable file", name)
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("%s: a binary is an absolute path or a bare name looked up in $PATH", name)
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return p, nil
}

// isExecutable reports whether path (symlinks followed) is a regular file
// with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Resolve merges the first variant whose conditions all hold on h over the
// top level and returns the result with Variants == nil.
//
// variant is -1 for a tool without variants, else the index of the variant
// that matched. ok is false when the tool has variants and none matches:
// the tool is hidden on this host. Each non-empty field of the variant
// replaces the top-level one (Args replaces the whole schema; a present
// resetsCounter replaces the flag). For resolving many tools at once, use
// a Resolver, which remembers binary and file look-ups.
func (m *Meta) Resolve(h Host) (resolved Meta, variant int, ok bool) {
	return newResolver(h, false).Resolve(m)
}

// WithVariant returns the metadata as it resolves where variant i matched
// (another host's variant, as that host reported it); -1 or an index out
// of range gives the top level alone.
func (m *Meta) WithVariant(i int) Meta {
	resolved := *m
	resolved.Variants = nil
	if i >= 0 && i < len(m.Variants) {
		m.Variants[i].mergeInto(&resolved)
	}
	return resolved
}

// Resolver resolves many Metas against one host, remembering the result of
// each binary and file look-up so that a catalog pass looks each path up
// once. Make a new Resolver for each pass: a binary installed after the
// first look-up is seen by the next pass. It is safe for concurrent use.
type Resolver struct {
	h     Host
	cache bool

	mu     sync.Mutex
	binary map[string]bool
	file   map[string]bool
}

// NewResolver returns a Resolver over h with empty look-up caches.
func NewResolver(h Host) *Resolver { return newResolver(h, true) }

func newResolver(h Host, cache bool) *Resolver {
	r := &Resolver{h: h, cache: cache}
	if cache {
		r.binary = make(map[string]bool)
		r.file = make(map[string]bool)
	}
	return r
}

// Resolve is Meta.Resolve with the Resolver's host and caches.
func (r *Resolver) Resolve(m *Meta) (resolved Meta, variant int, ok bool) {
	resolved = *m
	resolved.Variants = nil
	if len(m.Variants) == 0 {
		return resolved, -1, true
	}
	for i := range m.Variants {
		v := &m.Variants[i]
		if !r.holds(v.Match) {
			continue
		}
		v.mergeInto(&resolved)
		return resolved, i, true
	}
	return resolved, -1, false
}

// Match reports whether every condition of mt holds.
func (r *Resolver) Match(mt Match) bool { return r.holds(mt) }

func (r *Resolver) holds(mt Match) bool {
	for _, key := range matchKeys {
		vals, present := mt[key]
		if !present {
			continue
		}
		held := false
		for _, v := range vals {
			if r.condition(key, v) {
				held = true
				break
			}
		}
		if !held {
			return false
		}
	}
	return true
}

func (r *Resolver) condition(key, v string) bool {
	h := &r.h
	switch key {
	case MatchOS:
		return v == h.GOOS
	case MatchArch:
		return v == h.GOARCH
	case MatchEnv:
		return h.Getenv != nil && h.Getenv(v) != ""
	case MatchNenv:
		return h.Getenv == nil || h.Getenv(v) == ""
	case MatchFile:
		return r.cached(r.file, v, func(p string) bool {
			return h.Exists != nil && h.Exists(p)
		})
	case MatchBinary:
		return r.cached(r.binary, v, func(p string) bool {
			if h.LookPath == nil {
				return false
			}
			_, err := h.LookPath(p)
			return err == nil
		})
	}
	return false
}

// cached answers look(v), remembering the answer in memo when caching.
// The look-up itself runs unlocked, so two goroutines may both look a path
// up once; they agree on the answer.
func (r *Resolver) cached(memo map[string]bool, v string, look func(string) bool) bool {
	if !r.cache {
		return look(v)
	}
	r.mu.Lock()
	got, ok := memo[v]
	r.mu.Unlock()
	if ok {
		return got
	}
	got = look(v)
	r.mu.Lock()
	memo[v] = got
	r.mu.Unlock()
	return got
}

// mergeInto replaces the fields of m for which v has a non-empty value.
func (v *Variant) mergeInto(m *Meta) {
	set := func(dst *string, src string) {
		if src != "" {
			*dst = src
		}
	}
	set(&m.Description, v.Description)
	set(&m.Prompt, v.Prompt)
	set(&m.Tier, v.Tier)
	set(&m.Scope, v.Scope)
	set(&m.OutputFormat, v.OutputFormat)
	set(&m.Cmd, v.Cmd)
	if len(v.Args) > 0 {
		m.Args = v.Args
	}
	if v.ResetsCounter != nil {
		m.ResetsCounter = *v.ResetsCounter
	}
}
