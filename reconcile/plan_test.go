package reconcile

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
)

// addr is where the tests put a node's cluster port.
func addr(name string) string { return name + ":7000" }

// alive, dead, left and suspect are gossip members with a cluster address.
func alive(name string) cluster.Member { return member(name, "alive") }
func dead(name string) cluster.Member  { return member(name, "dead") }
func left(name string) cluster.Member  { return member(name, "left") }

func member(name, state string) cluster.Member {
	return cluster.Member{Name: name, State: state, Meta: cluster.Meta{Cluster: addr(name)}}
}

// asking is a member started with -server; leaving one about to leave.
func asking(m cluster.Member) cluster.Member  { m.Meta.Want = true; return m }
func leaving(m cluster.Member) cluster.Member { m.Meta.Leaving = true; return m }
func at(m cluster.Member, a string) cluster.Member {
	m.Meta.Cluster = a
	return m
}

func voter(name string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(name), Address: raft.ServerAddress(addr(name))}
}

func nonvoter(name string) raft.Server {
	s := voter(name)
	s.Suffrage = raft.Nonvoter
	return s
}

func movedTo(s raft.Server, a string) raft.Server { s.Address = raft.ServerAddress(a); return s }

// peers answers a plan from sets, and records what it was asked.
type peers struct {
	clientOnly map[string]bool // by address
	down       map[string]bool // by name: its port does not answer
	probed     []string        // names, in order
}

func (p *peers) ClientOnly(addr string) bool { return p.clientOnly[addr] }

func (p *peers) Reachable(name, addr string) bool {
	p.probed = append(p.probed, name)
	return !p.down[name]
}

func set(xs ...string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// show is a change as the table writes it: "Op ID" or "Op ID@ADDRESS".
func show(c Change) string {
	if c.Address == "" {
		return fmt.Sprintf("%v %s", c.Op, c.ID)
	}
	return fmt.Sprintf("%v %s@%s", c.Op, c.ID, c.Address)
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name       string
		voters     int
		servers    int
		selfAddr   string // default addr("n1")
		config     []raft.Server
		members    []cluster.Member
		clientOnly []string // addresses
		down       []string // names
		want       []string
		probed     []string // names probed, in order
	}{{
		name:    "lone leader: nothing to do",
		voters:  3,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1")},
	}, {
		name:    "voters up to -voters, then the rest stay clients, unprobed",
		voters:  3,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), alive("n5")},
		want:    []string{"AddVoter n2@n2:7000", "AddVoter n3@n3:7000"},
		probed:  []string{"n2", "n3"},
	}, {
		name:    "non-voters beyond -voters up to -servers",
		voters:  3,
		servers: 4,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), alive("n5")},
		want:    []string{"AddVoter n2@n2:7000", "AddVoter n3@n3:7000", "AddNonvoter n4@n4:7000"},
		probed:  []string{"n2", "n3", "n4"},
	}, {
		name:    "-servers below -voters counts as -voters",
		voters:  3,
		servers: 1,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1"), alive("n2"), alive("n3"), alive("n4")},
		want:    []string{"AddVoter n2@n2:7000", "AddVoter n3@n3:7000"},
		probed:  []string{"n2", "n3"},
	}, {
		name:    "nodes that ask (-server) are taken first, and beyond -servers",
		voters:  2,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1"), alive("n2"), asking(alive("n8")), asking(alive("n9"))},
		want:    []string{"AddVoter n8@n8:7000", "AddNonvoter n9@n9:7000"},
		probed:  []string{"n8", "n9"},
	}, {
		name:    "a node whose port does not answer is passed over for the next",
		voters:  2,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1"), alive("n2"), alive("n3")},
		down:    []string{"n2"},
		want:    []string{"AddVoter n3@n3:7000"},
		probed:  []string{"n2", "n3"},
	}, {
		name:       "a client node's certificate: never probed, never added",
		voters:     3,
		config:     []raft.Server{voter("n1")},
		members:    []cluster.Member{alive("n1"), alive("c1"), alive("n2")},
		clientOnly: []string{addr("c1")},
		want:       []string{"AddVoter n2@n2:7000"},
		probed:     []string{"n2"},
	}, {
		name:    "suspect, dead, left, leaving and address-less nodes are not added",
		voters:  5,
		config:  []raft.Server{voter("n1")},
		members: []cluster.Member{alive("n1"), member("n2", "suspect"), dead("n3"), left("n4"), leaving(alive("n5")), at(alive("n6"), "")},
	}, {
		name:     "the leader's own entry moves first",
		voters:   3,
		selfAddr: "n1:7001",
		config:   []raft.Server{voter("n1"), voter("n2")},
		members:  []cluster.Member{alive("n1"), alive("n2"), alive("n3")},
		want:     []string{"AddVoter n1@n1:7001", "AddVoter n3@n3:7000"},
		probed:   []string{"n3"},
	}, {
		name:    "a voter and a non-voter on new addresses are re-added there",
		voters:  2,
		config:  []raft.Server{voter("n1"), voter("n2"), nonvoter("n3")},
		members: []cluster.Member{alive("n1"), at(alive("n2"), "n2:7002"), at(alive("n3"), "n3:7003")},
		want:    []string{"AddVoter n2@n2:7002", "AddNonvoter n3@n3:7003"},
		probed:  []string{"n2", "n3", "n3"},
	}, {
		name:    "a moved server whose new address does not answer stays where it was",
		voters:  2,
		config:  []raft.Server{voter("n1"), voter("n2")},
		members: []cluster.Member{alive("n1"), at(alive("n2"), "n2:7002")},
		down:    []string{"n2"},
		probed:  []string{"n2"},
	}, {
		name:    "servers in place are not probed",
		voters:  3,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []cluster.Member{alive("n1"), alive("n2"), alive("n3"), alive("n4")},
	}, {
		name:    "a voter that left is removed and a non-voter promoted",
		voters:  3,
		servers: 4,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		members: []cluster.Member{alive("n1"), left("n2"), alive("n3"), alive("n4")},
		want:    []string{"RemoveServer n2", "AddVoter n4@n4:7000"},
		probed:  []string{"n4"},
	}, {
		name:    "a voter announcing its leave is removed",
		voters:  3,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []cluster.Member{alive("n1"), leaving(alive("n2")), alive("n3")},
		want:    []string{"RemoveServer n2"},
	}, {
		name:    "a dead voter is replaced: the spare promoted, then it demoted",
		voters:  3,
		servers: 4,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		members: []cluster.Member{alive("n1"), dead("n2"), alive("n3"), alive("n4")},
		want:    []string{"AddVoter n4@n4:7000", "DemoteVoter n2"},
		probed:  []string{"n4"},
	}, {
		name:    "a dead voter with no spare stays; a client takes the dead server's place as a non-voter",
		voters:  3,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []cluster.Member{alive("n1"), dead("n2"), alive("n3"), alive("n4")},
		want:    []string{"AddNonvoter n4@n4:7000"},
		probed:  []string{"n4"},
	}, {
		name:    "an unreachable non-voter is no spare",
		voters:  3,
		servers: 4,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		members: []cluster.Member{alive("n1"), dead("n2"), alive("n3"), alive("n4")},
		down:    []string{"n4"},
		probed:  []string{"n4"},
	}, {
		name:    "a dead or leaving non-voter is no spare",
		voters:  3,
		servers: 5,
		config:  []raft.Server{voter("n1"), voter("n2"), nonvoter("n3"), nonvoter("n4")},
		members: []cluster.Member{alive("n1"), alive("n2"), dead("n3"), leaving(alive("n4"))},
		want:    []string{"RemoveServer n4"},
	}, {
		name:    "non-voters are promoted while voters are wanted, in configuration order",
		voters:  3,
		servers: 4,
		config:  []raft.Server{voter("n1"), nonvoter("n5"), nonvoter("n4")},
		members: []cluster.Member{alive("n1"), alive("n4"), alive("n5")},
		want:    []string{"AddVoter n5@n5:7000", "AddVoter n4@n4:7000"},
		probed:  []string{"n5", "n4"},
	}, {
		name:       "a server that came back with a client node's certificate is removed",
		voters:     3,
		config:     []raft.Server{voter("n1"), voter("n2"), nonvoter("n3")},
		members:    []cluster.Member{alive("n1"), alive("n2"), alive("n3")},
		clientOnly: []string{addr("n2")},
		want:       []string{"RemoveServer n2", "AddVoter n3@n3:7000"},
		probed:     []string{"n3"},
	}, {
		name:    "a server gossip has forgotten is left alone",
		voters:  3,
		config:  []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []cluster.Member{alive("n1"), alive("n3")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			self := addr("n1")
			if tc.selfAddr != "" {
				self = tc.selfAddr
			}
			v := View{Self: "n1", SelfAddr: raft.ServerAddress(self), Voters: tc.voters, Servers: tc.servers, Config: tc.config, Members: tc.members}
			p := &peers{clientOnly: set(tc.clientOnly...), down: set(tc.down...)}
			var got []string
			for c := range Plan(v, p) {
				got = append(got, show(c))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("changes:\n got %q\nwant %q", got, tc.want)
			}
			if !slices.Equal(p.probed, tc.probed) {
				t.Errorf("probed %q, want %q", p.probed, tc.probed)
			}
		})
	}
}

// The plan is the same whatever order gossip lists its members in.
func TestPlanMemberOrder(t *testing.T) {
	ms := []cluster.Member{alive("n1"), alive("n4"), asking(alive("n9")), alive("n2"), alive("n3")}
	v := View{Self: "n1", SelfAddr: raft.ServerAddress(addr("n1")), Voters: 3, Config: []raft.Server{voter("n1")}}
	var first []Change
	for i := range ms {
		v.Members = append(slices.Clone(ms[i:]), ms[:i]...)
		got := slices.Collect(Plan(v, &peers{}))
		if i == 0 {
			first = got
			continue
		}
		if !reflect.DeepEqual(got, first) {
			t.Fatalf("members %v: %v, want %v", v.Members, got, first)
		}
	}
	var got []string
	for _, c := range first {
		got = append(got, show(c))
	}
	if want := []string{"AddVoter n9@n9:7000", "AddVoter n2@n2:7000"}; !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q: the asking node first, then by name", got, want)
	}
}

// A round that stops at a failed change asks nothing more.
func TestPlanStops(t *testing.T) {
	v := View{Self: "n1", SelfAddr: raft.ServerAddress(addr("n1")), Voters: 5, Config: []raft.Server{voter("n1")},
		Members: []cluster.Member{alive("n1"), alive("n2"), alive("n3")}}
	p := &peers{}
	for c := range Plan(v, p) {
		if show(c) != "AddVoter n2@n2:7000" {
			t.Fatalf("first change %s", show(c))
		}
		break
	}
	if !slices.Equal(p.probed, []string{"n2"}) {
		t.Fatalf("probed %q after the first change failed, want only n2", p.probed)
	}
}

// What each change says is what the log shows after "reconcile: ".
func TestPlanWhat(t *testing.T) {
	v := View{Self: "n1", SelfAddr: "n1:7001", Voters: 3, Servers: 5,
		Config:  []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), voter("n5"), nonvoter("n6")},
		Members: []cluster.Member{alive("n1"), dead("n2"), left("n3"), alive("n4"), alive("n5"), alive("n6"), alive("n7"), asking(alive("n8"))}}
	var got []string
	for c := range Plan(v, &peers{clientOnly: set(addr("n5"))}) {
		got = append(got, c.What)
	}
	want := []string{
		"moved this node to n1:7001",
		"added n8 as a non-voter", // it asks; n7 stays a client
		"promoted n4 to replace the failed voter n2",
		"demoted the failed voter n2",
		"removed n3, which left",
		"removed n5: its certificate is a client node's (toolnode tls cert -client)",
		"promoted n6 to voter",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// A probe's failure asks for a retry unless the peer is a client node;
// why a node is kept out is logged once per reason, and its return once.
func TestProbesRetryAndLog(t *testing.T) {
	var logs []string
	logf := func(level string) func(string, ...any) {
		return func(f string, a ...any) { logs = append(logs, level+" "+fmt.Sprintf(f, a...)) }
	}
	errs := map[string]error{}
	l := New(Config{
		Probe: func(a string) error { return errs[a] },
		Logf:  logf("INFO"), Warnf: logf("WARN"),
	})
	round := func() *probes {
		p := &probes{l: l}
		p.Reachable("n2", addr("n2"))
		p.Reachable("c1", addr("c1"))
		return p
	}
	errs[addr("n2")] = errors.New("connection refused")
	errs[addr("c1")] = ClientPeer(errors.New(`c1:7000 ("c1"): its certificate is a client node's`))
	for i := range 2 {
		if p := round(); !p.retry {
			t.Fatalf("round %d: no retry with n2 down", i)
		}
	}
	errs[addr("n2")] = nil
	if p := round(); p.retry {
		t.Fatal("retry for a client node alone")
	}
	want := []string{
		"WARN reconcile: keeping n2 out of Raft: its cluster port does not answer: connection refused",
		`INFO reconcile: keeping c1 out of Raft: c1:7000 ("c1"): its certificate is a client node's; it stays a client`,
		"INFO reconcile: n2's cluster port answers now",
	}
	if !slices.Equal(logs, want) {
		t.Fatalf("logs:\n got %q\nwant %q", logs, want)
	}
	if !errors.Is(errs[addr("c1")], ErrClientPeer) {
		t.Fatal("ClientPeer's error is not ErrClientPeer")
	}
}
