package node

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/raftfsm"
)

// The node a routed call runs on checks it against the list the call
// carries, the list of the token it names (as this node has it) and the
// agent's; the control: an unlimited token's call of the same tool on an
// unlimited agent passes.
func TestRoutedCallLimit(t *testing.T) {
	f := raftfsm.New(nil)
	for i, name := range []string{"lim", "open"} {
		_, hash, _ := acl.NewSecret()
		var tools []string
		if name == "lim" {
			tools = []string{"only_*"}
		}
		f.Apply(&raft.Log{Index: uint64(i + 1), Data: raftfsm.MustEncode(raftfsm.CmdPutToken, raftfsm.PutToken{Name: name, Role: "call", Hash: hash, Tools: tools, Time: 1})})
	}
	n := &Node{fsm: f}
	open := &raftfsm.Agent{Name: "a"}
	narrow := &raftfsm.Agent{Name: "b", Tools: []string{"only_b"}}
	for _, tc := range []struct {
		what    string
		req     callRequest
		a       *raftfsm.Agent
		refused bool
	}{
		{"the token's list, as this node has it", callRequest{Tool: "everywhere", Who: "lim"}, open, true},
		{"the list the call carries", callRequest{Tool: "everywhere", Who: "open", Tools: []string{"only_*"}}, open, true},
		{"the agent's list", callRequest{Tool: "everywhere", Who: "open"}, narrow, true},
		{"allowed by all three", callRequest{Tool: "only_b", Who: "lim", Tools: []string{"only_*"}}, narrow, false},
		{"control: nothing limits it", callRequest{Tool: "everywhere", Who: "open"}, open, false},
		{"control: anon, no list", callRequest{Tool: "everywhere", Who: "anon@127.0.0.1"}, open, false},
	} {
		err := n.checkRoutedLimit(tc.req, tc.a)
		if tc.refused != (err != nil) || err != nil && !strings.Contains(err.Error(), "permission denied: tool everywhere is not allowed here") {
			t.Errorf("%s: %v", tc.what, err)
		}
	}
}

func TestAllowedLines(t *testing.T) {
	all := "echo\tsay\tn1\nfile_write\twrite\tn1,n2\nonly_b\tb\tn2\n"
	if got := allowedLines(all, nil, []string{"only_*", "echo"}); got != "echo\tsay\tn1\nonly_b\tb\tn2\n" {
		t.Errorf("allowedLines = %q", got)
	}
	if got := allowedLines(all, nil); got != all {
		t.Errorf("control, no list: %q", got)
	}
}
