package upstream

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]string{
		"stdio": `{"command": "npx", "args": ["-y", "some-mcp-server", "${HOME}/work"], "env": {"API_TOKEN": "${API_TOKEN}"},
			"match": {"env": "API_TOKEN"}, "network": true, "read": ["/srv/data"], "write": [], "tools": ["search_*", "get_item"]}`,
		"http":         `{"url": "https://host/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}`,
		"url-from-env": `{"url": "${MCP_URL}"}`,
		"plain-env":    `{"command": "srv", "env": {"DEBUG": "1", "LOG_LEVEL": "info"}}`,
	}
	for name, src := range good {
		if _, err := Parse(name, []byte(src)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]struct{ name, src, want string }{
		"not json":         {"s", `{"command": `, "not a definition"},
		"neither":          {"s", `{"args": ["x"]}`, `neither "command"`},
		"both":             {"s", `{"command": "x", "url": "https://h/"}`, "both"},
		"unknown field":    {"s", `{"command": "x", "comand": "y"}`, `unknown field "comand"`},
		"literal token":    {"s", `{"command": "x", "env": {"API_TOKEN": "sk-123"}}`, "literal value for API_TOKEN; write ${API_TOKEN}"},
		"literal password": {"s", `{"command": "x", "env": {"DB_PASSWORD": "hunter2"}}`, "literal value for DB_PASSWORD"},
		"literal header":   {"s", `{"url": "https://h/mcp", "headers": {"Authorization": "Bearer abc"}}`, "header Authorization"},
		"bad ref":          {"s", `{"command": "x", "args": ["${1BAD}"]}`, "is not ${NAME}"},
		"open ref":         {"s", `{"command": "x", "args": ["${HOME"]}`, "is not ${NAME}"},
		"relative read":    {"s", `{"command": "x", "read": ["data"]}`, "absolute paths"},
		"bad glob":         {"s", `{"command": "x", "tools": ["[a"]}`, "not a glob pattern"},
		"ftp url":          {"s", `{"url": "ftp://h/"}`, "not an http or https URL"},
		"headers on stdio": {"s", `{"command": "x", "headers": {"A": "b"}}`, `"headers" are for a "url"`},
		"env on url":       {"s", `{"url": "https://h/", "env": {"A": "b"}}`, `"args" and "env" are for a stdio server`},
		"bad match key":    {"s", `{"command": "x", "match": {"colour": "red"}}`, "colour"},
		"name with __":     {"a__b", `{"command": "x"}`, "without \"__\""},
		"name too long":    {strings.Repeat("a", 33), `{"command": "x"}`, "server name"},
		"name with dot":    {"a.b", `{"command": "x"}`, "server name"},
	}
	for what, c := range bad {
		_, err := Parse(c.name, []byte(c.src))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an invalid error saying %q", what, err, c.want)
		}
	}
}

func TestShows(t *testing.T) {
	d, err := Parse("s", []byte(`{"command": "x", "tools": ["search_*", "get_item"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{"search_issues": true, "get_item": true, "get_items": false, "delete_all": false} {
		if d.Shows(tool) != want {
			t.Errorf("Shows(%q) = %v", tool, !want)
		}
	}
	all, _ := Parse("s", []byte(`{"command": "x"}`))
	if !all.Shows("anything") {
		t.Error("a definition without tools does not show every tool")
	}
}

func TestExpand(t *testing.T) {
	d, err := Parse("s", []byte(`{"command": "${BIN}", "args": ["--dir", "${HOME}/work", "$HOME"], "env": {"API_TOKEN": "${API_TOKEN}"}, "read": ["${HOME}/data"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Vars(); !slices.Equal(got, []string{"API_TOKEN", "BIN", "HOME"}) {
		t.Fatalf("Vars = %v", got)
	}
	env := map[string]string{"BIN": "/usr/bin/srv", "HOME": "/home/u", "API_TOKEN": "sk-1"}
	x, missing := d.Expand(func(k string) string { return env[k] })
	if missing != nil {
		t.Fatalf("missing %v", missing)
	}
	if x.Command != "/usr/bin/srv" || !slices.Equal(x.Args, []string{"--dir", "/home/u/work", "$HOME"}) ||
		x.Env["API_TOKEN"] != "sk-1" || x.Read[0] != "/home/u/data" {
		t.Fatalf("expanded: %+v", x)
	}
	if d.Env["API_TOKEN"] != "${API_TOKEN}" {
		t.Fatal("Expand changed the definition")
	}
	delete(env, "API_TOKEN")
	env["HOME"] = ""
	if _, missing := d.Expand(func(k string) string { return env[k] }); !slices.Equal(missing, []string{"API_TOKEN", "HOME"}) {
		t.Fatalf("missing = %v, want the unset and the empty variable", missing)
	}
}

func TestToolName(t *testing.T) {
	if n, err := ToolName("github", "search_issues"); err != nil || n != "github__search_issues" {
		t.Fatalf("%q %v", n, err)
	}
	for _, tool := range []string{"has.dot", "has space", strings.Repeat("x", 60), ""} {
		if _, err := ToolName("github", tool); err == nil {
			t.Errorf("ToolName(github, %q) accepted", tool)
		}
	}
	if s, tl, ok := SplitToolName("github__search__deep"); !ok || s != "github" || tl != "search__deep" {
		t.Fatalf("SplitToolName: %q %q %v", s, tl, ok)
	}
}

func TestImport(t *testing.T) {
	config := `{"mcpServers": {
		"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
			"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret", "DEBUG": "1"}},
		"remote": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer sk-live"}},
		"off": {"command": "x", "disabled": true},
		"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "autoApprove": ["read_file"]}
	}}`
	got, err := Import([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range got {
		names = append(names, im.Name)
		if _, err := Parse(im.Name, im.JSON); err != nil {
			t.Errorf("%s: the imported definition does not parse: %v\n%s", im.Name, err, im.JSON)
		}
		if strings.Contains(string(im.JSON), "ghp_secret") || strings.Contains(string(im.JSON), "sk-live") {
			t.Errorf("%s: a secret was kept:\n%s", im.Name, im.JSON)
		}
	}
	if !slices.Equal(names, []string{"fs", "github", "remote"}) {
		t.Fatalf("servers %v, want the enabled ones sorted", names)
	}
	gh := got[1]
	if !slices.Equal(gh.Needs, []string{"GITHUB_PERSONAL_ACCESS_TOKEN"}) || !strings.Contains(string(gh.JSON), `"DEBUG": "1"`) {
		t.Errorf("github: needs %v\n%s", gh.Needs, gh.JSON)
	}
	if !strings.Contains(string(got[2].JSON), `"Bearer ${AUTHORIZATION}"`) || !slices.Equal(got[2].Needs, []string{"AUTHORIZATION"}) {
		t.Errorf("remote: %v\n%s", got[2].Needs, got[2].JSON)
	}
	if len(got[0].Notes) == 0 || !strings.Contains(got[0].Notes[0], "autoApprove") {
		t.Errorf("fs: notes %v", got[0].Notes)
	}
	for _, bad := range []string{`{}`, `not json`, `{"mcpServers": {"x": {"args": []}}}`, `{"mcpServers": {"a.b": {"command": "x"}}}`} {
		if _, err := Import([]byte(bad)); err == nil {
			t.Errorf("Import(%s) accepted", bad)
		}
	}
}
