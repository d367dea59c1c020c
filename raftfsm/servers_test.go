package raftfsm

import (
	"bytes"
	"strings"
	"testing"
)

func TestServerPublishWithdraw(t *testing.T) {
	h := newHarness(t, nil)
	def := []byte(`{"command":"gh-mcp","env":{"GH_TOKEN":"${GH_TOKEN}"}}`)
	h.ok(CmdPutServer, PutServer{Owner: "n1", Origin: Origin9P, Time: 1, Name: "gh", Data: def})
	s, ok := h.fsm.Server("gh")
	if !ok || !bytes.Equal(s.Data, def) || s.Owner != "n1" {
		t.Fatalf("server gh = %+v, %v", s, ok)
	}
	h.ok(CmdPublishTools, PublishTools{Owner: "n2", Origin: OriginMCP, Time: 2, Tools: []ToolSpec{{Name: "gh__search", Meta: []byte(`{"description":"s"}`)}}})
	if _, ok := h.fsm.Tool("gh__search"); !ok {
		t.Fatal("gh__search not published")
	}
	// Snapshot and restore keep the definition, format 5.
	snap := snapshotBytes(t, h.fsm)
	if !bytes.Contains(snap, []byte(`"format":5`)) || !bytes.Contains(snap, []byte(`"servers"`)) {
		t.Fatalf("snapshot lacks format 5 or servers: %s", snap)
	}
	// A watcher withdraws only its own; a withdrawal by name takes the
	// server's tools with it.
	h.ok(CmdDropServer, DropServer{Owner: "n9", Origin: OriginDir, Name: "gh"})
	if _, ok := h.fsm.Server("gh"); !ok {
		t.Fatal("another node's watcher withdrew gh")
	}
	h.ok(CmdDropServer, DropServer{Name: "gh"})
	if _, ok := h.fsm.Server("gh"); ok {
		t.Fatal("gh still published")
	}
	if _, ok := h.fsm.Tool("gh__search"); ok {
		t.Fatal("gh__search outlived its server")
	}
	// A server's tool published after its withdrawal is refused.
	h.fail(CmdPublishTools, PublishTools{Owner: "n2", Origin: OriginMCP, Time: 3, Tools: []ToolSpec{{Name: "gh__search", Meta: []byte(`{"description":"s"}`)}}}, ErrNotFound)
	h.fail(CmdDropServer, DropServer{Name: "gh"}, ErrNotFound)
}

func TestServerValidate(t *testing.T) {
	for _, c := range []struct {
		name  string
		entry []byte
		want  string
	}{
		{"not JSON", MustEncode(CmdPutServer, PutServer{Owner: "n1", Name: "x", Data: []byte(`{nope`)}), "not a definition"},
		{"neither", MustEncode(CmdPutServer, PutServer{Owner: "n1", Name: "x", Data: []byte(`{"args":["a"]}`)}), "neither"},
		{"literal credential", MustEncode(CmdPutServer, PutServer{Owner: "n1", Name: "x", Data: []byte(`{"command":"c","env":{"API_TOKEN":"abc"}}`)}), "literal value for API_TOKEN"},
		{"bad name", MustEncode(CmdPutServer, PutServer{Owner: "n1", Name: "a__b", Data: []byte(`{"command":"c"}`)}), "server name"},
		{"ordinary tool with __", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "a__b", Meta: []byte(`{"description":"d"}`)}}}), "upstream MCP servers"},
		{"9P tool with __", MustEncode(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Name: "a__b", Meta: []byte(`{"description":"d"}`)}), "upstream MCP servers"},
		{"mcp tool without __", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Origin: OriginMCP, Tools: []ToolSpec{{Name: "ab", Meta: []byte(`{"description":"d"}`)}}}), "SERVER__TOOL"},
	} {
		err := Validate(c.entry)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}

func TestRestoreRefusesUnknownFormat(t *testing.T) {
	f := New(nil)
	err := f.Restore(nopCloser{strings.NewReader(`{"format":99,"tools":{}}`)})
	if err == nil || !strings.Contains(err.Error(), "format 99") || !strings.Contains(err.Error(), "1 to 5") {
		t.Fatalf("Restore of format 99 = %v", err)
	}
	if err := f.Restore(nopCloser{strings.NewReader(`{"format":4,"tools":{}}`)}); err != nil {
		t.Fatalf("Restore of format 4 = %v", err)
	}
	if len(f.Servers()) != 0 {
		t.Fatal("servers from nowhere")
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }
