package raftfsm

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/toolnode/toolnode/acl"
)

// An agent made from a profile with a tools allow-list autoloads and
// loads only what the list allows; the control: an agent without a
// profile loads the same tool. The lists survive a snapshot, a token's
// included.
func TestToolsAllowList(t *testing.T) {
	h := newHarness(t, &recorder{})
	h.ok(CmdPublishTools, PublishTools{Owner: "n1", Tools: []ToolSpec{
		{Name: "echo", Meta: []byte(`{}`)}, {Name: "search_a", Meta: []byte(`{}`)}, {Name: "file_write", Meta: []byte(`{}`)},
	}})
	h.ok(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{{
		Name: "lim", Data: []byte(`{"autoLoad":["echo","file_write"],"tools":["echo","search_*"]}`),
		AutoLoad: []string{"echo", "file_write"}, Tools: []string{"echo", "search_*"},
	}}})
	h.fail(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{{Name: "bad", Data: []byte(`{}`), Tools: []string{"["}}}}, ErrInvalid)
	h.ok(CmdCreateSession, CreateSession{Name: "s", Time: 1})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "lim", Profile: "lim"})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "open"})
	a, err := h.fsm.Agent("s", "lim")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Loaded, []string{"echo"}) {
		t.Errorf("autoloaded %v, want [echo]", a.Loaded)
	}
	h.ok(CmdLoad, Load{Session: "s", Agent: "lim", Names: []string{"search_a"}})
	r := h.apply(CmdLoad, Load{Session: "s", Agent: "lim", Names: []string{"file_write"}})
	err, _ = r.(error)
	if !errors.Is(err, ErrDenied) || err.Error() != "permission denied: tool file_write is not allowed here" {
		t.Errorf("load of file_write: %v", r)
	}
	h.ok(CmdLoad, Load{Session: "s", Agent: "open", Names: []string{"file_write"}})

	// An agent made by a limited token keeps its list: with the profile's,
	// it autoloads and loads only what both allow.
	h.ok(CmdPublishProfiles, PublishProfiles{Owner: "n1", Profiles: []ProfileSpec{{Name: "wide", Data: []byte(`{}`), AutoLoad: []string{"echo", "search_a", "file_write"}}}})
	h.ok(CmdCreateAgent, CreateAgent{Session: "s", Name: "tok", Profile: "wide", Limit: []string{"search_*"}})
	if a, _ := h.fsm.Agent("s", "tok"); !slices.Equal(a.Loaded, []string{"search_a"}) {
		t.Errorf("the token-limited agent autoloaded %v, want [search_a]", a.Loaded)
	}
	h.fail(CmdLoad, Load{Session: "s", Agent: "tok", Names: []string{"echo"}}, ErrDenied)
	h.fail(CmdCreateAgent, CreateAgent{Session: "s", Name: "bad", Limit: []string{"a b"}}, ErrInvalid)

	_, hash, _ := acl.NewSecret()
	h.ok(CmdPutToken, PutToken{Name: "lt", Role: "call", Hash: hash, Tools: []string{"echo"}})
	h.fail(CmdPutToken, PutToken{Name: "lt2", Role: "call", Hash: strings.Repeat("c", 64), Tools: []string{"a b"}}, ErrInvalid)
	f2 := New(nil)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.fsm)))); err != nil {
		t.Fatal(err)
	}
	if tok, ok := f2.Token("lt"); !ok || !slices.Equal(tok.Tools, []string{"echo"}) {
		t.Errorf("restored token: %+v", tok)
	}
	if a, err := f2.Agent("s", "lim"); err != nil || !slices.Equal(a.Tools, []string{"echo", "search_*"}) {
		t.Errorf("restored agent: %+v %v", a, err)
	}
}
