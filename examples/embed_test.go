package examples

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// toolName is the tool name syntax of the design, §1.
var toolName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// metaFields are the .meta fields of the design, §1, and the JSON type each
// must have ("schema" for args, "variants" for variants).
var metaFields = map[string]string{
	"description":   "string",
	"prompt":        "string",
	"args":          "schema",
	"tier":          "string",
	"scope":         "string",
	"outputFormat":  "string",
	"cmd":           "string",
	"resetsCounter": "bool",
	"variants":      "variants",
}

// matchKeys are the variant conditions of the design, §1.
var matchKeys = []string{"binary", "file", "os", "arch", "env", "nenv"}

// tool is one example tool as read from FS.
type tool struct {
	name string
	meta map[string]any
	exe  bool // an executable NAME sits beside NAME.meta
}

// loadTools reads every tool in FS, failing the test on unreadable JSON.
func loadTools(t *testing.T) map[string]*tool {
	t.Helper()
	entries, err := FS.ReadDir("tools")
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*tool{}
	var exes []string
	for _, e := range entries {
		name, isMeta := strings.CutSuffix(e.Name(), ".meta")
		if !isMeta {
			exes = append(exes, e.Name())
			continue
		}
		data, err := FS.ReadFile("tools/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s: not a JSON object: %v", e.Name(), err)
		}
		tools[name] = &tool{name: name, meta: m}
	}
	for _, name := range exes {
		tl, ok := tools[name]
		if !ok {
			t.Errorf("tools/%s: an executable without %s.meta", name, name)
			continue
		}
		tl.exe = true
	}
	if len(tools) == 0 {
		t.Fatal("no tools embedded")
	}
	return tools
}

// sortedNames returns the keys of tools in order.
func sortedNames(tools map[string]*tool) []string {
	names := make([]string, 0, len(tools))
	for name := range tools {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// strings0 returns v as a list of strings when it is a string or an array of
// strings, and false otherwise.
func strings0(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// host answers the variant conditions; lookPath is swapped in tests that
// pretend a binary is missing.
type host struct {
	lookPath func(string) bool
}

func realHost() host {
	return host{lookPath: func(name string) bool {
		_, err := exec.LookPath(name)
		return err == nil
	}}
}

// holds reports whether every condition of match holds on h.
func (h host) holds(match map[string]any) bool {
	for key, v := range match {
		values, _ := strings0(v)
		any1 := false
		for _, val := range values {
			switch key {
			case "binary":
				any1 = h.lookPath(val)
			case "file":
				_, err := os.Stat(val)
				any1 = err == nil
			case "os":
				any1 = val == runtime.GOOS
			case "arch":
				any1 = val == runtime.GOARCH
			case "env":
				any1 = os.Getenv(val) != ""
			case "nenv":
				any1 = os.Getenv(val) == ""
			}
			if any1 {
				break
			}
		}
		if !any1 {
			return false
		}
	}
	return true
}

// resolve merges the first variant that holds on h over the top-level
// metadata, as §1 says; ok is false when the tool is hidden on h.
func (h host) resolve(meta map[string]any) (resolved map[string]any, ok bool) {
	resolved = map[string]any{}
	for k, v := range meta {
		if k != "variants" {
			resolved[k] = v
		}
	}
	variants, has := meta["variants"].([]any)
	if !has {
		return resolved, true
	}
	for _, v := range variants {
		variant := v.(map[string]any)
		if !h.holds(variant["match"].(map[string]any)) {
			continue
		}
		for k, val := range variant {
			if k == "match" || val == nil || val == "" {
				continue
			}
			resolved[k] = val
		}
		return resolved, true
	}
	return nil, false
}

// matchingCmds returns every distinct cmd a metadata-only tool can run on
// h: the resolved one, plus the cmd of each later variant that also holds
// (a fallback, such as json_query's python3 path where jq exists too).
func (h host) matchingCmds(meta map[string]any) map[string]string {
	cmds := map[string]string{}
	if cmd, ok := meta["cmd"].(string); ok && cmd != "" {
		cmds["cmd"] = cmd
	}
	variants, _ := meta["variants"].([]any)
	for _, v := range variants {
		variant := v.(map[string]any)
		match := variant["match"].(map[string]any)
		cmd, _ := variant["cmd"].(string)
		if cmd == "" || !h.holds(match) {
			continue
		}
		label := "variant"
		if bins, ok := strings0(match["binary"]); ok {
			label = strings.Join(bins, "|")
		}
		cmds[label] = cmd
	}
	return cmds
}

func TestMeta_Valid(t *testing.T) {
	tools := loadTools(t)
	for _, name := range sortedNames(tools) {
		tl := tools[name]
		t.Run(name, func(t *testing.T) {
			if !toolName.MatchString(name) {
				t.Errorf("bad tool name %q", name)
			}
			checkFields(t, tl.meta, false)
			if p, _ := tl.meta["prompt"].(string); !strings.HasPrefix(p, "## "+name+"\n") {
				t.Errorf("prompt should start with a %q heading", "## "+name)
			}
			if d, _ := tl.meta["description"].(string); d == "" {
				t.Error("empty description")
			}
			variants, _ := tl.meta["variants"].([]any)
			for i, v := range variants {
				variant, ok := v.(map[string]any)
				if !ok {
					t.Errorf("variants[%d]: not an object", i)
					continue
				}
				checkVariant(t, i, variant)
			}
			if !tl.exe {
				// Metadata-only: something must say what to run.
				top, _ := tl.meta["cmd"].(string)
				for i, v := range variants {
					vm, _ := v.(map[string]any)
					if cmd, _ := vm["cmd"].(string); cmd == "" && top == "" {
						t.Errorf("variants[%d]: no executable and no cmd", i)
					}
				}
				if len(variants) == 0 && top == "" {
					t.Error("no executable and no cmd")
				}
				return
			}
			data, err := FS.ReadFile("tools/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, []byte("#!/bin/sh\n")) || !bytes.Contains(data, []byte("\nset -eu\n")) {
				t.Error("executable should start with #!/bin/sh and set -eu")
			}
		})
	}
}

// checkFields checks the type and value of each field of a .meta object or
// of a variant (inVariant: "variants" is not allowed there).
func checkFields(t *testing.T, m map[string]any, inVariant bool) {
	t.Helper()
	for key, v := range m {
		kind, known := metaFields[key]
		switch {
		case inVariant && key == "match":
			continue
		case !known, inVariant && key == "variants":
			t.Errorf("unknown field %q", key)
			continue
		}
		switch kind {
		case "string":
			if _, ok := v.(string); !ok {
				t.Errorf("%s: want a string, have %T", key, v)
			}
		case "bool":
			if _, ok := v.(bool); !ok {
				t.Errorf("%s: want a bool, have %T", key, v)
			}
		case "schema":
			checkSchema(t, v)
		case "variants":
			if _, ok := v.([]any); !ok {
				t.Errorf("variants: want an array, have %T", v)
			}
		}
	}
	allowed := map[string][]string{
		"tier":         {"hot", "warm", "cold"},
		"scope":        {"read", "write"},
		"outputFormat": {"text", "json"},
	}
	for key, values := range allowed {
		v, present := m[key]
		if !present && inVariant {
			continue
		}
		if s, _ := v.(string); !slices.Contains(values, s) {
			t.Errorf("%s: %v is not one of %v", key, v, values)
		}
	}
}

// checkSchema checks that args is an object schema whose properties are
// described and whose required names are properties.
func checkSchema(t *testing.T, v any) {
	t.Helper()
	s, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("args: want a JSON Schema object, have %T", v)
	}
	if s["type"] != "object" {
		t.Errorf("args: type is %v, want \"object\"", s["type"])
	}
	props, ok := s["properties"].(map[string]any)
	if !ok {
		t.Fatalf("args: properties: want an object, have %T", s["properties"])
	}
	for name, p := range props {
		pm, ok := p.(map[string]any)
		if !ok {
			t.Errorf("args.properties.%s: not an object", name)
			continue
		}
		if d, _ := pm["description"].(string); d == "" {
			t.Errorf("args.properties.%s: no description", name)
		}
		if _, ok := strings0(pm["type"]); !ok {
			t.Errorf("args.properties.%s: no type", name)
		}
	}
	if r, present := s["required"]; present {
		req, ok := strings0(r)
		if _, isArray := r.([]any); !ok || !isArray {
			t.Errorf("args.required: want an array of strings, have %v", r)
		}
		for _, name := range req {
			if _, ok := props[name]; !ok {
				t.Errorf("args.required: %q is not a property", name)
			}
		}
	}
}

// checkVariant checks one entry of variants.
func checkVariant(t *testing.T, i int, v map[string]any) {
	t.Helper()
	match, ok := v["match"].(map[string]any)
	if !ok || len(match) == 0 {
		t.Errorf("variants[%d]: match must be a non-empty object", i)
		return
	}
	for key, val := range match {
		if !slices.Contains(matchKeys, key) {
			t.Errorf("variants[%d]: unknown match key %q", i, key)
		}
		if _, ok := strings0(val); !ok {
			t.Errorf("variants[%d]: match.%s: want a string or an array of strings", i, key)
		}
	}
	checkFields(t, v, true)
}

func TestAgents_Valid(t *testing.T) {
	tools := loadTools(t)
	entries, err := FS.ReadDir("agents")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			t.Errorf("agents/%s: profiles are NAME.json", e.Name())
			continue
		}
		seen[name] = true
		data, err := FS.ReadFile("agents/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Description string   `json:"description"`
			AutoLoad    []string `json:"autoLoad"`
		}
		if err := json.Unmarshal(data, &p); err != nil {
			t.Errorf("agents/%s: %v", e.Name(), err)
			continue
		}
		if p.Description == "" {
			t.Errorf("agents/%s: no description", e.Name())
		}
		if len(p.AutoLoad) == 0 {
			t.Errorf("agents/%s: autoLoad is empty", e.Name())
		}
		for _, tn := range p.AutoLoad {
			tl, ok := tools[tn]
			if !ok {
				t.Errorf("agents/%s: autoLoad names unknown tool %q", e.Name(), tn)
				continue
			}
			if name == "reader" && scopes(tl.meta) != "read" {
				t.Errorf("agents/reader.json: %s is not a read-only tool (scope %q)", tn, scopes(tl.meta))
			}
		}
	}
	for _, want := range []string{"coder", "reader"} {
		if !seen[want] {
			t.Errorf("agents/%s.json is missing", want)
		}
	}
}

// scopes returns the tool's scope when the top level and every variant
// agree on it, and "mixed" otherwise.
func scopes(meta map[string]any) string {
	scope, _ := meta["scope"].(string)
	variants, _ := meta["variants"].([]any)
	for _, v := range variants {
		if s, ok := v.(map[string]any)["scope"].(string); ok && s != "" && s != scope {
			return "mixed"
		}
	}
	return scope
}

func TestExtract(t *testing.T) {
	dst := t.TempDir()
	toolsDir, agentsDir, err := Extract(dst)
	if err != nil {
		t.Fatal(err)
	}
	if toolsDir != filepath.Join(dst, "tools") || agentsDir != filepath.Join(dst, "agents") {
		t.Fatalf("Extract returned %q, %q", toolsDir, agentsDir)
	}
	check := func() {
		t.Helper()
		err := fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			want, _ := FS.ReadFile(p)
			got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(p)))
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: extracted content differs", p)
			}
			fi, err := os.Stat(filepath.Join(dst, filepath.FromSlash(p)))
			if err != nil {
				return err
			}
			if got, want := fi.Mode().Perm(), fileMode(path.Base(p)); got != want {
				t.Errorf("%s: mode %v, want %v", p, got, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check()

	// A second extraction overwrites changed files, fixes modes, and leaves
	// foreign files and no temporaries behind.
	meta := filepath.Join(toolsDir, "echo.meta")
	if err := os.WriteFile(meta, []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(toolsDir, "file_read"), 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(toolsDir, "mine.meta")
	if err := os.WriteFile(foreign, []byte(`{"cmd":"true"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Extract(dst); err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("Extract removed a file it does not own: %v", err)
	}
	for _, dir := range []string{toolsDir, agentsDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("temporary file left behind: %s", e.Name())
			}
		}
	}
}

// runCase is one call of a tool in a test.
type runCase struct {
	name  string
	setup map[string]string // files to create in the working directory
	args  string            // the JSON on standard input
	// Success: want is the exact output, or wantPart a part of it, and
	// check (optional) looks at the output and the working directory.
	want, wantPart string
	check          func(t *testing.T, out string, dir string)
	// Failure: wantErr is a part of standard error.
	fail    bool
	wantErr string
}

// cases are the sample calls of each tool; every tool visible on the host
// must have some.
var cases = map[string][]runCase{
	"file_read": {
		{name: "whole", setup: map[string]string{"notes.txt": "one\ntwo\nthree\n"},
			args: `{"path":"notes.txt"}`, want: "one\ntwo\nthree\n"},
		{name: "range", setup: map[string]string{"notes.txt": "one\ntwo\nthree\n"},
			args: `{"path":"notes.txt","offset":2,"limit":1}`,
			want: "two\n[file_read: showed lines 2-2 of 3; more with \"offset\": 3]\n"},
		{name: "no final newline", setup: map[string]string{"notes.txt": "one\ntwo"},
			args: `{"path":"notes.txt","offset":2}`, want: "two"},
		{name: "missing", args: `{"path":"missing.txt"}`, fail: true, wantErr: "no such file"},
		{name: "past the end", setup: map[string]string{"notes.txt": "one\n"},
			args: `{"path":"notes.txt","offset":5}`, fail: true, wantErr: "past the end"},
		{name: "bad offset", setup: map[string]string{"notes.txt": "one\n"},
			args: `{"path":"notes.txt","offset":"2"}`, fail: true, wantErr: `"offset"`},
		{name: "no path", args: `{}`, fail: true, wantErr: `missing required argument "path"`},
		{name: "not JSON", args: `path=notes.txt`, fail: true, wantErr: "JSON object"},
		{name: "directory", setup: map[string]string{"d/x": ""}, args: `{"path":"d"}`, fail: true, wantErr: "directory"},
	},
	"file_glob": {
		{name: "by name", setup: globTree, args: `{"pattern":"*.go"}`, want: "a.go\nsrc/b.go\nsrc/sub/c.go\n"},
		{name: "recursive", setup: globTree, args: `{"pattern":"src/**/*.go"}`, want: "src/b.go\nsrc/sub/c.go\n"},
		{name: "one level", setup: globTree, args: `{"pattern":"src/*.go"}`, want: "src/b.go\n"},
		{name: "braces in dir", setup: globTree, args: `{"pattern":"*.{md,txt}","dir":"docs"}`, want: "docs/x.md\n"},
		{name: "none", setup: globTree, args: `{"pattern":"*.rs"}`, wantPart: "no files match"},
		{name: "no dir", args: `{"pattern":"*","dir":"nope"}`, fail: true, wantErr: "no such directory"},
		{name: "bad pattern type", args: `{"pattern":3}`, fail: true, wantErr: `"pattern" must be a string`},
	},
	"file_grep": {
		{name: "in dir", setup: grepTree, args: `{"pattern":"Hello","path":"src"}`, want: "src/b.go:2:func Hello() {}\n"},
		{name: "ignore case and include", setup: grepTree,
			args: `{"pattern":"hello","ignore_case":true,"include":"*.txt"}`, want: "notes.txt:1:Hello world\n"},
		{name: "regexp", setup: grepTree, args: `{"pattern":"^func +[A-Z]"}`, want: "src/b.go:2:func Hello() {}\n"},
		{name: "none", setup: grepTree, args: `{"pattern":"zzz"}`, wantPart: "no matches"},
		{name: "bad regexp", setup: grepTree, args: `{"pattern":"("}`, fail: true, wantErr: "grep failed"},
		{name: "bad flag", args: `{"pattern":"x","ignore_case":"yes"}`, fail: true, wantErr: "true or false"},
	},
	"file_write": {
		{name: "new file", args: `{"path":"out/new.txt","content":"line 1\nline 2\n\n"}`,
			want: "wrote 15 bytes to out/new.txt\n", check: fileIs("out/new.txt", "line 1\nline 2\n\n")},
		{name: "replace", setup: map[string]string{"old.txt": "old content\n"},
			args: `{"path":"old.txt","content":"new \u00e9\n"}`, check: fileIs("old.txt", "new é\n")},
		{name: "empty", args: `{"path":"empty","content":""}`, check: fileIs("empty", "")},
		{name: "escape", args: `{"path":"../escape.txt","content":"x"}`, fail: true, wantErr: `".." is not allowed`},
		{name: "absolute", args: `{"path":"/x.txt","content":"x"}`, fail: true, wantErr: "relative"},
		{name: "no content", args: `{"path":"x.txt"}`, fail: true, wantErr: `missing required argument "content"`},
	},
	"file_edit": {
		{name: "once", setup: map[string]string{"e.txt": "alpha\nbeta\nbeta\n"},
			args: `{"path":"e.txt","old_string":"alpha\n","new_string":"ALPHA\n"}`,
			want: "replaced 1 occurrence in e.txt\n", check: fileIs("e.txt", "ALPHA\nbeta\nbeta\n")},
		{name: "all", setup: map[string]string{"e.txt": "alpha\nbeta\nbeta\n"},
			args: `{"path":"e.txt","old_string":"beta\n","new_string":"","replace_all":true}`,
			want: "replaced 2 occurrences in e.txt\n", check: fileIs("e.txt", "alpha\n")},
		{name: "not unique", setup: map[string]string{"e.txt": "alpha\nbeta\nbeta\n"},
			args: `{"path":"e.txt","old_string":"beta","new_string":"B"}`, fail: true, wantErr: "occurs 2 times"},
		{name: "not found", setup: map[string]string{"e.txt": "alpha\n"},
			args: `{"path":"e.txt","old_string":"gamma","new_string":"G"}`, fail: true, wantErr: "not found"},
		{name: "no file", args: `{"path":"nope.txt","old_string":"a","new_string":"b"}`, fail: true, wantErr: "no such file"},
	},
	"json_query": {
		{name: "object", args: `{"json":{"a":{"b":[10,20]}},"filter":".a.b[1]"}`, want: "20\n"},
		{name: "text", args: `{"json":"{\"a\":[{\"n\":\"x\"},{\"n\":\"y\"}]}","filter":".a[].n"}`,
			check: jsonIs(`["x","y"]`)},
		{name: "key", args: `{"json":{"a b":{"c":true}},"filter":".[\"a b\"].c"}`, want: "true\n"},
		{name: "missing", args: `{"json":{"a":1},"filter":".b"}`, want: "null\n"},
		{name: "bad json", args: `{"json":"{not json","filter":"."}`, fail: true, wantErr: "not JSON text"},
		{name: "no json", args: `{"filter":"."}`, fail: true, wantErr: `missing required argument "json"`},
		{name: "bad index", args: `{"json":[1],"filter":".a"}`, fail: true, wantErr: "Cannot index array"},
	},
	"sys_info": {
		{name: "facts", args: `{}`, check: func(t *testing.T, out, _ string) {
			var facts struct {
				Node string `json:"node"`
				OS   string `json:"os"`
				CPUs int    `json:"cpus"`
			}
			if err := json.Unmarshal([]byte(out), &facts); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if facts.Node != "test-node" || facts.OS != runtime.GOOS || facts.CPUs < 1 {
				t.Errorf("facts %+v, want node test-node, os %s, cpus ≥ 1", facts, runtime.GOOS)
			}
		}},
	},
	"echo": {
		{name: "text", args: `{"text":"hello, world"}`, want: "hello, world\n"},
	},
	"now": {
		{name: "utc", args: `{}`, check: func(t *testing.T, out, _ string) {
			got, err := time.Parse(time.RFC3339, strings.TrimSuffix(out, "\n"))
			if err != nil || !strings.HasSuffix(out, "Z\n") {
				t.Fatalf("output %q is not an RFC 3339 UTC time: %v", out, err)
			}
			if d := time.Since(got); d < -time.Minute || d > time.Minute {
				t.Errorf("time %v is %v away from now", got, d)
			}
		}},
	},
}

var globTree = map[string]string{
	"a.go": "", "src/b.go": "", "src/sub/c.go": "", "docs/x.md": "", ".git/d.go": "", "README": "",
}

var grepTree = map[string]string{
	"src/b.go": "package b\nfunc Hello() {}\n", "notes.txt": "Hello world\n", ".git/config": "Hello\n",
}

// fileIs checks that the working directory holds name with content want.
func fileIs(name, want string) func(*testing.T, string, string) {
	return func(t *testing.T, _ string, dir string) {
		t.Helper()
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s holds %q, want %q", name, got, want)
		}
	}
}

// jsonIs checks that the output is the JSON value want.
func jsonIs(want string) func(*testing.T, string, string) {
	return func(t *testing.T, out, _ string) {
		t.Helper()
		var g, w any
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("output %q is not JSON: %v", out, err)
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			t.Fatal(err)
		}
		gs, _ := json.Marshal(g)
		ws, _ := json.Marshal(w)
		if !bytes.Equal(gs, ws) {
			t.Errorf("output %s, want %s", gs, ws)
		}
	}
}

// runner starts a tool: argv[0] is its executable, or /bin/sh -c CMD.
type runner struct {
	argv []string
	path string // PATH for the tool
}

// run calls the tool with args on stdin in a fresh working directory made
// from setup, with a scratch TMPDIR and the toolnode environment.
func (r runner) run(t *testing.T, c runCase) (stdout, stderr, dir string, code int) {
	t.Helper()
	dir = t.TempDir()
	scratch := t.TempDir()
	for name, content := range c.setup {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.argv[0], r.argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+r.path, "TMPDIR="+scratch,
		"TOOLNODE_NODE=test-node", "OLLIE_SESSION_ID=test-session", "OLLIE_AGENT=test-agent")
	cmd.Stdin = strings.NewReader(c.args)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("cannot run %v: %v", r.argv, err)
	}
	if left, _ := os.ReadDir(scratch); len(left) > 0 {
		t.Errorf("the tool left %d files in its scratch directory", len(left))
	}
	return out.String(), errb.String(), dir, code
}

// runCases runs every case of the tool through r.
func runCases(t *testing.T, r runner, name string, meta map[string]any) {
	for _, c := range cases[name] {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, dir, code := r.run(t, c)
			if c.fail {
				if code == 0 {
					t.Fatalf("exit 0 for bad input %s; stdout %q", c.args, out)
				}
				if strings.TrimSpace(errOut) == "" || !strings.Contains(errOut, c.wantErr) {
					t.Errorf("stderr %q, want a message with %q", errOut, c.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d for %s; stderr %q", code, c.args, errOut)
			}
			if c.want != "" && out != c.want {
				t.Errorf("output %q, want %q", out, c.want)
			}
			if !strings.Contains(out, c.wantPart) {
				t.Errorf("output %q, want it to contain %q", out, c.wantPart)
			}
			if meta["outputFormat"] == "json" && !json.Valid([]byte(out)) {
				t.Errorf("outputFormat json, but the output is not JSON: %q", out)
			}
			if c.check != nil {
				c.check(t, out, dir)
			}
		})
	}
}

// pathWithout builds a directory of links to every command of $PATH except
// the named ones, and returns it as a PATH, to run tools as on a host that
// lacks those commands.
func pathWithout(t *testing.T, missing ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if slices.Contains(missing, name) {
				continue
			}
			link := filepath.Join(bin, name)
			if _, err := os.Lstat(link); err == nil {
				continue // the first in $PATH wins
			}
			target := filepath.Join(dir, name)
			if name == "python3" {
				target = realPython(target)
			}
			_ = os.Symlink(target, link)
		}
	}
	return bin
}

// realPython returns the interpreter that the python3 at p runs, so that a
// wrapper script (a version manager's shim) is not paid for on every call.
func realPython(p string) string {
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(exe) {
		return exe
	}
	return p
}

func TestTools_Run(t *testing.T) {
	tools := loadTools(t)
	toolsDir, _, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := realHost()
	path := os.Getenv("PATH")
	for _, name := range sortedNames(tools) {
		tl := tools[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			meta, visible := h.resolve(tl.meta)
			if !visible {
				t.Skipf("hidden on this host: no variant matches")
			}
			if len(cases[name]) == 0 {
				t.Fatalf("no sample calls for %s in cases", name)
			}
			if tl.exe {
				runCases(t, runner{argv: []string{filepath.Join(toolsDir, name)}, path: path}, name, meta)
				return
			}
			cmds := h.matchingCmds(tl.meta)
			for _, label := range slices.Sorted(maps.Keys(cmds)) {
				t.Run(label, func(t *testing.T) {
					runCases(t, runner{argv: []string{"/bin/sh", "-c", cmds[label]}, path: path}, name, meta)
				})
			}
		})
	}
}

// TestTools_RunWithoutJq runs the tools that have an executable as on a
// host without jq: their argument parsing falls back to python3.
func TestTools_RunWithoutJq(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	tools := loadTools(t)
	toolsDir, _, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	noJq := pathWithout(t, "jq")
	h := host{lookPath: func(name string) bool {
		_, err := exec.LookPath(name)
		return name != "jq" && err == nil
	}}
	for _, name := range sortedNames(tools) {
		tl := tools[name]
		if !tl.exe {
			continue // TestTools_Run runs every variant's cmd already
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			meta, visible := h.resolve(tl.meta)
			if !visible {
				t.Skipf("hidden on a host without jq")
			}
			runCases(t, runner{argv: []string{filepath.Join(toolsDir, name)}, path: noJq}, name, meta)
		})
	}
}

// TestJSONQuery_Variants checks which json_query a host gets: jq's where
// jq is, the python3 path where only python3 is, none where neither is; and
// runs the python3 cmd directly.
func TestJSONQuery_Variants(t *testing.T) {
	meta := loadTools(t)["json_query"].meta
	tests := []struct {
		name     string
		have     []string
		visible  bool
		cmdStart string
	}{
		{name: "jq", have: []string{"jq", "python3"}, visible: true, cmdStart: "set -eu"},
		{name: "python3 only", have: []string{"python3"}, visible: true, cmdStart: "python3 -c "},
		{name: "neither", have: nil, visible: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host{lookPath: func(name string) bool { return slices.Contains(tt.have, name) }}
			resolved, visible := h.resolve(meta)
			if visible != tt.visible {
				t.Fatalf("visible = %v, want %v", visible, tt.visible)
			}
			if !visible {
				return
			}
			if cmd, _ := resolved["cmd"].(string); !strings.HasPrefix(cmd, tt.cmdStart) {
				t.Errorf("cmd starts %.20q, want %q", cmd, tt.cmdStart)
			}
		})
	}
	t.Run("python3 cmd", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("python3 is not installed")
		}
		h := host{lookPath: func(name string) bool { return name == "python3" }}
		resolved, _ := h.resolve(meta)
		cmd := resolved["cmd"].(string)
		r := runner{argv: []string{"/bin/sh", "-c", cmd}, path: pathWithout(t, "jq")}
		runCases(t, r, "json_query", resolved)
		// Full jq filters are refused clearly.
		out, errOut, _, code := r.run(t, runCase{args: `{"json":{"a":1},"filter":"keys"}`})
		if code == 0 || !strings.Contains(errOut, "only paths") {
			t.Errorf("filter keys: exit %d, stdout %q, stderr %q; want a clear refusal", code, out, errOut)
		}
	})
}

// TestTools_NoHelper checks that a tool run where neither jq nor python3
// exists (its variants hide it there) still fails clearly.
func TestTools_NoHelper(t *testing.T) {
	toolsDir, _, err := Extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := runner{argv: []string{filepath.Join(toolsDir, "file_read")}, path: pathWithout(t, "jq", "python3")}
	_, errOut, _, code := r.run(t, runCase{args: `{"path":"x"}`})
	if code == 0 || !strings.Contains(errOut, "needs jq or python3") {
		t.Errorf("exit %d, stderr %q; want a failure that names jq and python3", code, errOut)
	}
}
