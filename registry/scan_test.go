package registry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFile writes a file under dir, creating parents.
func writeFile(t testing.TB, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScanTools(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "grep.meta", `{"description": "search", "readOnly": true}`, 0o644)
	writeFile(t, dir, "own.meta", `{"description": "has an executable"}`, 0o644)
	writeFile(t, dir, "own", "#!/bin/sh\necho own\n", 0o755)
	writeFile(t, dir, "plain.meta", `{}`, 0o644)
	writeFile(t, dir, "plain", "not executable", 0o644)
	writeFile(t, dir, "linked.meta", `{}`, 0o644)
	if err := os.Symlink(filepath.Join(dir, "own"), filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "subdir.meta", `{}`, 0o644)
	writeFile(t, dir, "subdir/x", "", 0o755)
	writeFile(t, dir, "broken.meta", `{"description": `, 0o644)
	writeFile(t, dir, "badtype.meta", `{"tier": "boiling"}`, 0o644)
	writeFile(t, dir, "bad name.meta", `{}`, 0o644)
	writeFile(t, dir, ".hidden.meta", `{}`, 0o644)
	writeFile(t, dir, ".#grep.meta", `junk`, 0o644)
	writeFile(t, dir, "isdir.meta/x", ``, 0o644)
	writeFile(t, dir, "notes.txt", `{}`, 0o644)
	writeFile(t, dir, "grep.meta~", `{}`, 0o644)
	writeFile(t, dir, "nested/deep.meta", `{}`, 0o644)

	tools, problems, err := ScanTools(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"grep", "linked", "own", "plain", "subdir"}; !slices.Equal(names, want) {
		t.Errorf("tools = %q, want %q", names, want)
	}
	g := tools["grep"]
	if g.Name != "grep" || g.Parsed.Description != "search" || string(g.Meta) != `{"description": "search", "readOnly": true}` {
		t.Errorf("grep = %+v", g)
	}
	if !slices.Equal(g.Notes, []string{"legacy field readOnly ignored"}) {
		t.Errorf("grep notes = %q", g.Notes)
	}
	if got, want := tools["own"].Exec, filepath.Join(dir, "own"); got != want {
		t.Errorf("own.Exec = %q, want %q", got, want)
	}
	if got, want := tools["linked"].Exec, filepath.Join(dir, "linked"); got != want {
		t.Errorf("linked.Exec = %q, want %q (a symlink to an executable)", got, want)
	}
	for _, n := range []string{"grep", "plain", "subdir"} {
		if tools[n].Exec != "" {
			t.Errorf("%s.Exec = %q, want none", n, tools[n].Exec)
		}
	}

	wantProblems := map[string]error{
		"bad name.meta": ErrInvalidName,
		"badtype.meta":  ErrInvalidMeta,
		"broken.meta":   ErrInvalidMeta,
		"isdir.meta":    nil,
	}
	if len(problems) != len(wantProblems) {
		t.Errorf("problems = %v, want %d", problems, len(wantProblems))
	}
	for _, p := range problems {
		base := filepath.Base(p.File)
		want, ok := wantProblems[base]
		if !ok {
			t.Errorf("unexpected problem %v", p)
			continue
		}
		if p.File != filepath.Join(dir, base) {
			t.Errorf("problem file %q is not the path of the file", p.File)
		}
		if want != nil && !errors.Is(p.Err, want) {
			t.Errorf("problem %v does not wrap %v", p, want)
		}
		if !strings.Contains(p.Error(), base) {
			t.Errorf("problem %q does not name the file", p.Error())
		}
	}
	if !slices.IsSortedFunc(problems, func(a, b Problem) int { return strings.Compare(a.File, b.File) }) {
		t.Error("problems are not sorted by file")
	}
}

func TestScanTools_Many(t *testing.T) {
	// Enough files for the parallel path.
	dir := t.TempDir()
	for i := range 300 {
		content := fmt.Sprintf(`{"description": "tool %d"}`, i)
		if i%50 == 0 {
			content = `{"description": 5}`
		}
		writeFile(t, dir, fmt.Sprintf("t%03d.meta", i), content, 0o644)
	}
	tools, problems, err := ScanTools(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 294 || len(problems) != 6 {
		t.Fatalf("got %d tools and %d problems, want 294 and 6", len(tools), len(problems))
	}
	if d := tools["t123"].Parsed.Description; d != "tool 123" {
		t.Errorf("t123 description = %q", d)
	}
}

func TestScanTools_MissingAndUnreadable(t *testing.T) {
	tools, problems, err := ScanTools(filepath.Join(t.TempDir(), "absent"))
	if err != nil || len(tools) != 0 || problems != nil || tools == nil {
		t.Errorf("missing dir: (%v, %v, %v), want an empty map and no error", tools, problems, err)
	}
	file := writeFile(t, t.TempDir(), "file", "", 0o644)
	if _, _, err := ScanTools(file); err == nil {
		t.Error("scanning a regular file: no error")
	}
}

func TestScanTools_TooLarge(t *testing.T) {
	dir := t.TempDir()
	big := `{"prompt": "` + strings.Repeat("x", MaxFileSize) + `"}`
	writeFile(t, dir, "big.meta", big, 0o644)
	tools, problems, err := ScanTools(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), "larger than") {
		t.Errorf("got tools %v problems %v", tools, problems)
	}
}

func TestParseProfile(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
		err  string
	}{
		{name: "autoLoad", doc: `{"autoLoad": ["grep", "ls"]}`, want: []string{"grep", "ls"}},
		{name: "duplicates dropped", doc: `{"autoLoad": ["grep", "ls", "grep"]}`, want: []string{"grep", "ls"}},
		{name: "other fields ignored", doc: `{"model": "x", "temperature": 0.5}`},
		{name: "null", doc: `{"autoLoad": null}`},
		{name: "empty", doc: `{"autoLoad": []}`},
		{name: "not JSON", doc: `{`, err: "not valid JSON"},
		{name: "not object", doc: `["grep"]`, err: "want a JSON object, got an array"},
		{name: "autoLoad string", doc: `{"autoLoad": "grep"}`, err: "autoLoad: want an array of tool names, got a string"},
		{name: "autoLoad number", doc: `{"autoLoad": ["grep", 3]}`, err: "autoLoad[1]: want a tool name (a string), got a number"},
		{name: "bad name", doc: `{"autoLoad": ["../etc"]}`, err: `autoLoad[0]: invalid name "../etc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProfile([]byte(tt.doc))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrInvalidProfile) {
					t.Fatalf("ParseProfile(%s) = %v, want ErrInvalidProfile containing %q", tt.doc, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.AutoLoad, tt.want) {
				t.Errorf("autoLoad = %q, want %q", p.AutoLoad, tt.want)
			}
		})
	}
	if _, err := ParseProfile([]byte(`{"autoLoad": ["a b"]}`)); !errors.Is(err, ErrInvalidName) {
		t.Errorf("a bad name in autoLoad: %v, want it to wrap ErrInvalidName too", err)
	}
}

func TestScanProfiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "coder.json", `{"autoLoad": ["grep"]}`, 0o644)
	writeFile(t, dir, "plain.json", `{}`, 0o644)
	writeFile(t, dir, "bad.json", `{"autoLoad": 1}`, 0o644)
	writeFile(t, dir, "tool.meta", `{}`, 0o644)
	profiles, problems, err := ScanProfiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles) != 2 || !slices.Equal(profiles["coder"].Parsed.AutoLoad, []string{"grep"}) || profiles["plain"].Name != "plain" {
		t.Errorf("profiles = %+v", profiles)
	}
	if string(profiles["coder"].Data) != `{"autoLoad": ["grep"]}` {
		t.Errorf("coder data = %q", profiles["coder"].Data)
	}
	if len(problems) != 1 || filepath.Base(problems[0].File) != "bad.json" || !errors.Is(problems[0].Err, ErrInvalidProfile) {
		t.Errorf("problems = %v", problems)
	}
}

// A tool named like an upstream server's (SERVER__TOOL) is a problem of
// the scan, not a publish the cluster refuses whole.
func TestScanToolsRefusesUpstreamNames(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"ok.meta": `{"description":"d"}`, "gh__search.meta": `{"description":"d"}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, probs, err := ScanTools(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found["ok"]; !ok || len(found) != 1 {
		t.Fatalf("found %v", found)
	}
	if len(probs) != 1 || !strings.Contains(probs[0].Err.Error(), "upstream MCP servers") {
		t.Fatalf("problems %v", probs)
	}
}
