package raftnode

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
)

func TestParsePeers(t *testing.T) {
	conf, err := ParsePeers([]byte(`[{"id":"n1","address":"10.0.0.1:9565"},{"id":"n2","address":"10.0.0.2:9565","non_voter":true}]`))
	if err != nil || len(conf.Servers) != 2 || conf.Servers[1].Suffrage != raft.Nonvoter || conf.Servers[0].Suffrage != raft.Voter {
		t.Fatalf("ParsePeers = %+v, %v", conf, err)
	}
	for in, want := range map[string]string{
		`{}`: "not a JSON list",
		`[{"id":"n1"}]`: "needs an id and an address",
		`[{"id":"n1","address":"a:1"},{"id":"n1","address":"b:1"}]`: "listed twice",
		`[{"id":"n1","address":"a:1","non_voter":true}]`:             "no voter",
	} {
		if _, err := ParsePeers([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePeers(%s) = %v, want %q", in, err, want)
		}
	}
}

// A server is dialled where gossip says it is alive now, else where
// Raft's configuration has it, and this node at its own address.
func TestAddrs_GossipFirst(t *testing.T) {
	_, local := raft.NewInmemTransport("10.0.0.9:9565")
	members := []cluster.Member{
		{Name: "n2", State: "alive", Meta: cluster.Meta{Cluster: "10.0.1.2:9565"}},
		{Name: "n3", State: "dead", Meta: cluster.Meta{Cluster: "10.0.1.3:9565"}},
	}
	a := Addrs{
		Self:      "n1",
		Transport: func() raft.Transport { return local },
		Members:   func() []cluster.Member { return members },
		Raft:      func() *raft.Raft { return nil },
	}
	if got, err := a.ServerAddr("n1"); err != nil || got != "10.0.0.9:9565" {
		t.Errorf("self: %q, %v", got, err)
	}
	if got, err := a.ServerAddr("n2"); err != nil || got != "10.0.1.2:9565" {
		t.Errorf("an alive member: %q, %v", got, err)
	}
	if got, err := a.ServerAddr("n3"); err == nil {
		t.Errorf("a dead member known nowhere else: %q, want an error", got)
	}
}
