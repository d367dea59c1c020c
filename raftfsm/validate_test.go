package raftfsm

import (
	"errors"
	"strings"
	"testing"
)

// Every command type the FSM applies has a validator, and the other way
// round: a new type cannot be added half-way.
func TestValidate_EveryTypeHasAValidator(t *testing.T) {
	for ct := range applyTable {
		if _, ok := validators[ct]; !ok {
			t.Errorf("%s has an apply function but no validator", ct)
		}
	}
	for ct := range validators {
		if _, ok := applyTable[ct]; !ok {
			t.Errorf("%s has a validator but no apply function", ct)
		}
	}
}

// validEntries is one valid entry of every command type, as the nodes
// propose them.
func validEntries() map[string][]byte {
	exe := []byte("#!/bin/sh\necho hi\n")
	meta := []byte(`{"description":"says hi"}`)
	return map[string][]byte{
		"publish-tools": MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Origin: OriginDir, Time: 1, Tools: []ToolSpec{
			{Name: "hi", Meta: meta, ExecHash: ExecHash(exe), Size: int64(len(exe)), Mode: 0o755},
			{Name: "hi2", Meta: meta, ExecHash: ExecHash(exe), Size: int64(len(exe))},
			{Name: "doc-only", Meta: meta},
		}}),
		"withdraw-tools":     MustEncode(CmdWithdrawTools, WithdrawTools{Owner: "n1", Origin: OriginDir, Names: []string{"hi"}}),
		"withdraw-any":       MustEncode(CmdWithdrawTools, WithdrawTools{Names: []string{"hi"}}),
		"publish-profiles":   MustEncode(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{{Name: "coder", Data: []byte(`{"autoLoad":["hi"]}`), AutoLoad: []string{"hi"}}}}),
		"withdraw-profiles":  MustEncode(CmdWithdrawProfiles, WithdrawProfiles{Names: []string{"coder"}}),
		"create-session":     MustEncode(CmdCreateSession, CreateSession{Name: "dev", Cwd: "/w", Profile: "coder", Time: 5}),
		"create-session-gen": MustEncode(CmdCreateSession, CreateSession{Time: 5}),
		"kill-session":       MustEncode(CmdKillSession, KillSession{Name: "dev"}),
		"create-agent":       MustEncode(CmdCreateAgent, CreateAgent{Session: "dev", Name: "a", Profile: "coder"}),
		"create-agent-gen":   MustEncode(CmdCreateAgent, CreateAgent{Session: "dev"}),
		"kill-agent":         MustEncode(CmdKillAgent, KillAgent{Session: "dev", Name: "a"}),
		"load":               MustEncode(CmdLoad, Load{Session: "dev", Agent: "a", Names: []string{"hi"}}),
		"unload":             MustEncode(CmdUnload, Unload{Session: "dev", Agent: "a", Names: []string{"hi"}}),
		"put-tool-meta":      MustEncode(CmdPutToolMeta, PutToolMeta{Owner: "n1", Origin: Origin9P, Time: 1, Name: "hi", Meta: meta}),
		"put-tool-exec":      MustEncode(CmdPutToolExec, PutToolExec{Owner: "n1", Origin: Origin9P, Time: 1, Name: "hi", ExecHash: ExecHash(exe), Size: int64(len(exe)), Mode: 0o755}),
		"drop-tool-exec":     MustEncode(CmdDropToolExec, DropToolExec{Name: "hi"}),
		"drop-tool-exec-by":  MustEncode(CmdDropToolExec, DropToolExec{Name: "hi2", Owner: "n2", Publisher: "alice", Time: 2}),
		"withdraw-by":        MustEncode(CmdWithdrawTools, WithdrawTools{Names: []string{"hi2"}, Publisher: "anon@127.0.0.1:9", Time: 3}),
		"put-tool-meta-by":   MustEncode(CmdPutToolMeta, PutToolMeta{Owner: "n2", Origin: Origin9P, Time: 4, Name: "hi", Meta: []byte(`{"description":"v2"}`), Publisher: "alice"}),
		"rollback":           MustEncode(CmdRollback, Rollback{Name: "hi", Version: 1, Publisher: "alice", Owner: "n2", Time: 5}),
		"set-keep-versions":  MustEncode(CmdSetKeepVersions, SetKeepVersions{Keep: 2}),
		"put-server":         MustEncode(CmdPutServer, PutServer{Owner: "n1", Origin: Origin9P, Time: 1, Name: "gh", Data: []byte(`{"command":"gh-mcp","env":{"GH_TOKEN":"${GH_TOKEN}"}}`)}),
		"publish-mcp-tools": MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Origin: OriginMCP, Time: 1, Tools: []ToolSpec{
			{Name: "gh__search", Meta: meta},
		}}),
		"drop-server": MustEncode(CmdDropServer, DropServer{Name: "gh"}),
	}
}

func TestValidate_Accepts(t *testing.T) {
	for name, e := range validEntries() {
		if err := Validate(e); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidate_Refuses(t *testing.T) {
	exe := []byte("#!/bin/sh\n")
	meta := []byte(`{"description":"d"}`)
	raw := func(ct CommandType, body string) []byte { return append([]byte{byte(ct)}, body...) }
	tests := []struct {
		name  string
		entry []byte
		want  string // in the error
	}{
		{"empty", nil, "empty command"},
		{"unknown type", raw(99, `{}`), "unknown command type 99"},
		{"type zero", raw(0, `{}`), "unknown command type 0"},
		{"not JSON", raw(CmdLoad, `{`), "undecodable"},
		{"not an object", raw(CmdLoad, `[]`), "not a JSON object"},
		{"null body", raw(CmdLoad, `null`), "not a JSON object"},
		{"unknown field", raw(CmdKillSession, `{"name":"s","evil":1}`), "unknown field"},
		{"trailing data", raw(CmdKillSession, `{"name":"s"}{}`), "after the JSON body"},
		{"wrong field type", raw(CmdKillSession, `{"name":5}`), "undecodable"},
		{"bad tool name", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "../x", Meta: meta}}}), "bad tool name"},
		{"no owner", MustEncode(CmdPublishTools, PublishTools{Tools: []ToolSpec{{Name: "x", Meta: meta}}}), "owner"},
		{"bad origin", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Origin: "web", Tools: []ToolSpec{{Name: "x", Meta: meta}}}), "origin"},
		{"negative time", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Time: -1}), "negative"},
		{"twice", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "x", Meta: meta}, {Name: "x", Meta: meta}}}), "twice"},
		{"no meta", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "x"}}}), "metadata"},
		{"bad meta", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "x", Meta: []byte(`[1]`)}}}), "metadata"},
		{"hash not hex", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "x", Meta: meta, ExecHash: strings.Repeat("Z", 64), Size: 1}}}), "hex"},
		{"size without hash", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "x", Meta: meta, Size: 5}}}), "no hash"},
		{"no size", MustEncode(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{{Name: "x", Meta: meta, ExecHash: ExecHash(exe)}}}), "no size"},
		{"over the limit", MustEncode(CmdPutToolExec, PutToolExec{Owner: "n1", Origin: Origin9P, Name: "x", ExecHash: ExecHash(exe), Size: DefaultMaxExecSize + 1}), "limit"},
		{"mode", MustEncode(CmdPutToolExec, PutToolExec{Owner: "n1", Origin: Origin9P, Name: "x", ExecHash: ExecHash(exe), Size: 3, Mode: 0o170755}), "mode"},
		{"no hash", MustEncode(CmdPutToolExec, PutToolExec{Owner: "n1", Origin: Origin9P, Name: "x"}), "no hash"},
		{"meta origin", MustEncode(CmdPutToolMeta, PutToolMeta{Owner: "n1", Name: "x", Meta: meta}), "origin"},
		{"bad profile", MustEncode(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{{Name: "p", Data: []byte(`{"autoLoad":3}`)}}}), "profile"},
		{"bad autoLoad", MustEncode(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{{Name: "p", Data: []byte(`{}`), AutoLoad: []string{"a b"}}}}), "autoLoad"},
		{"reserved session", MustEncode(CmdCreateSession, CreateSession{Name: "new"}), "reserved"},
		{"relative cwd", MustEncode(CmdCreateSession, CreateSession{Name: "s", Cwd: "w"}), "absolute"},
		{"NUL cwd", MustEncode(CmdCreateSession, CreateSession{Name: "s", Cwd: "/w\x00"}), "NUL"},
		{"agent in no session", MustEncode(CmdCreateAgent, CreateAgent{Name: "a"}), "session name"},
		{"reserved agent", MustEncode(CmdCreateAgent, CreateAgent{Session: "s", Name: "idx"}), "reserved"},
		{"kill agent no name", MustEncode(CmdKillAgent, KillAgent{Session: "s"}), "agent name"},
		{"load nothing", MustEncode(CmdLoad, Load{Session: "s", Agent: "a"}), "no tool names"},
		{"load bad name", MustEncode(CmdUnload, Unload{Session: "s", Agent: "a", Names: []string{""}}), "tool name"},
		{"drop bad name", MustEncode(CmdDropToolExec, DropToolExec{Name: "."}), "tool name"},
		{"withdraw bad owner", MustEncode(CmdWithdrawProfiles, WithdrawProfiles{Owner: "a/b", Names: []string{"p"}}), "owner"},
	}
	// The leader's own -max-exec-size bounds the size a command names.
	small := MustEncode(CmdPutToolExec, PutToolExec{Owner: "n1", Origin: Origin9P, Name: "x", ExecHash: ExecHash([]byte("x")), Size: 2000})
	if err := ValidateLimits(small, Limits{MaxExecSize: 1000}); err == nil || !strings.Contains(err.Error(), "-max-exec-size") {
		t.Errorf("an executable over the leader's limit: %v", err)
	}
	if err := ValidateLimits(small, Limits{MaxExecSize: 4000}); err != nil {
		t.Errorf("under the limit: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.entry)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one wrapping ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}
