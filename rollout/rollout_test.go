package rollout

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolnode/toolnode/raftfsm"
)

func TestPublisherName(t *testing.T) {
	for in, want := range map[string]string{
		"":           "",
		"alice":      "alice",
		"anon@1.2.3": "anon@1.2.3",
		"a b\tc":     "a_b_c",
		"-":          "_",
	} {
		if got := PublisherName(in); got != want {
			t.Errorf("PublisherName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := PublisherName(strings.Repeat("x", 300)); len(got) != 256 {
		t.Errorf("a long name is kept at %d bytes, want 256", len(got))
	}
}

// A refused command is named in the error unless the refusal already
// says what was refused, and the caller reaches the write.
func TestService_RefusalsNameTheCommand(t *testing.T) {
	var got []Caller
	refuse := errors.New("the cluster has no leader")
	s := New(Config{
		Node: "n1", FSM: raftfsm.New(nil),
		Apply: func(c Caller, _ raftfsm.CommandType, _ any) (raftfsm.Result, error) {
			got = append(got, c)
			return raftfsm.Result{}, refuse
		},
		Logf: func(string, ...any) {},
	})
	alice := Caller{Who: "alice", Token: "tn_x"}
	if err := s.Canary(alice, "greet", []string{"n2"}, false); err == nil || err.Error() != "canary of greet: the cluster has no leader" {
		t.Errorf("canary: %v", err)
	}
	if _, err := s.Promote(alice, "greet"); err == nil || !strings.HasPrefix(err.Error(), "promote of greet: ") {
		t.Errorf("promote: %v", err)
	}
	if _, err := s.Rollback(alice, "greet", 3); err == nil || !strings.HasPrefix(err.Error(), "rollback of greet to version 3: ") {
		t.Errorf("rollback: %v", err)
	}
	refuse = errors.New("invalid promote: greet has no canary")
	if err := s.Abort(alice, "greet", ""); err == nil || err.Error() != refuse.Error() {
		t.Errorf("abort: %v", err)
	}
	for _, c := range got {
		if c != alice {
			t.Fatalf("a write was made for %+v, want alice's", c)
		}
	}
}
