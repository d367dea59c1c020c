package reconcile

import (
	"iter"
	"sort"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
)

// Op is the kind of a configuration change.
type Op int

// The changes a plan makes, each one Raft configuration entry.
const (
	AddVoter    Op = iota // raft.Raft.AddVoter: add, promote or move a voter
	AddNonvoter           // raft.Raft.AddNonvoter: add or move a non-voter
	Remove                // raft.Raft.RemoveServer
	Demote                // raft.Raft.DemoteVoter
)

func (o Op) String() string {
	switch o {
	case AddVoter:
		return "AddVoter"
	case AddNonvoter:
		return "AddNonvoter"
	case Remove:
		return "RemoveServer"
	case Demote:
		return "DemoteVoter"
	}
	return "Op(?)"
}

// Change is one change to Raft's configuration.
type Change struct {
	Op      Op
	ID      raft.ServerID
	Address raft.ServerAddress // for AddVoter and AddNonvoter
	What    string             // what it does, as logged after "reconcile: "
}

// View is what a round decides from.
type View struct {
	Self     string             // the leader's name
	SelfAddr raft.ServerAddress // the leader's cluster address now
	Voters   int                // voters to keep (-voters)
	Servers  int                // servers to keep in all (-servers)
	Config   []raft.Server      // Raft's configuration, in its order
	Members  []cluster.Member   // gossip's members
}

// Peers answers what a plan asks about a cluster address before it gives
// the node there a place in Raft.
type Peers interface {
	// ClientOnly reports whether addr presented a client node's
	// certificate lately: such a node is never a server.
	ClientOnly(addr string) bool
	// Reachable reports whether the cluster port of node name at addr
	// answers: one the cluster cannot talk to (wrong CA, a firewall)
	// would count toward the quorum without ever voting.
	Reachable(name, addr string) bool
}

// Plan yields the changes that make Raft's configuration follow gossip,
// in the order they are to be made; each assumes the ones before it were
// made. The caller stops at the first that fails by ending the range.
// Plan asks p only about nodes that are to be added, moved or promoted,
// as it comes to them, and never about a node that stays a client.
func Plan(v View, p Peers) iter.Seq[Change] {
	return func(yield func(Change) bool) { plan(v, p, yield) }
}

func plan(v View, p Peers, yield func(Change) bool) {
	servers := map[string]raft.Server{}
	voters := 0
	for _, s := range v.Config {
		servers[string(s.ID)] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	members := map[string]cluster.Member{}
	for _, m := range v.Members {
		members[m.Name] = m
	}
	reachable := func(name, addr string) bool {
		return !p.ClientOnly(addr) && p.Reachable(name, addr)
	}
	healthy := func(name string) bool {
		m, ok := members[name]
		return ok && m.State == "alive" && !m.Meta.Leaving
	}
	// Servers in all: -servers, at least -voters. A dead server does not
	// count, so a client takes its place; nodes that ask to be servers
	// (-server) are always added.
	wantServers := max(v.Voters, v.Servers)
	live := 0
	for name := range servers {
		if name == v.Self || healthy(name) {
			live++
		}
	}
	// The leader's own entry first: a leader restarted on another cluster
	// address (a port the kernel picked) still has its old one in the
	// configuration. The other servers would ask it for votes there in
	// vain, and a member given that address since could not be added
	// ("found duplicate address in configuration").
	if self, ok := servers[v.Self]; ok && self.Address != v.SelfAddr {
		if !yield(Change{AddVoter, self.ID, v.SelfAddr, "moved this node to " + string(v.SelfAddr)}) {
			return
		}
	}
	for _, m := range candidates(members) {
		name := m.Name
		if m.State != "alive" || m.Meta.Cluster == "" || m.Meta.Leaving || name == v.Self {
			continue
		}
		s, known := servers[name]
		if !known && voters >= v.Voters && live >= wantServers && !m.Meta.Want {
			continue // a client: it follows the change stream
		}
		addr := raft.ServerAddress(m.Meta.Cluster)
		if (!known || s.Address != addr) && !reachable(name, m.Meta.Cluster) {
			continue
		}
		switch {
		case !known && voters < v.Voters:
			if !yield(Change{AddVoter, raft.ServerID(name), addr, "added " + name + " as a voter"}) {
				return
			}
			voters++
			live++
		case !known:
			if !yield(Change{AddNonvoter, raft.ServerID(name), addr, "added " + name + " as a non-voter"}) {
				return
			}
			live++
		case s.Address != addr && s.Suffrage == raft.Voter:
			if !yield(Change{AddVoter, s.ID, addr, "moved " + name + " to " + string(addr)}) {
				return
			}
		case s.Address != addr:
			if !yield(Change{AddNonvoter, s.ID, addr, "moved " + name + " to " + string(addr)}) {
				return
			}
		}
	}

	var spares []raft.Server // healthy non-voters, in configuration order
	for _, s := range v.Config {
		if s.Suffrage != raft.Voter && healthy(string(s.ID)) && reachable(string(s.ID), string(s.Address)) {
			spares = append(spares, s)
		}
	}
	for _, s := range v.Config {
		name := string(s.ID)
		m, seen := members[name]
		if name == v.Self || !seen {
			continue
		}
		switch {
		case p.ClientOnly(string(s.Address)):
			// Its node restarted with a client node's certificate: it
			// takes no part in Raft, so a place in the configuration
			// would only count toward the quorum.
			if !yield(Change{Remove, s.ID, "", "removed " + name + ": its certificate is a client node's (toolnode tls cert -client)"}) {
				return
			}
			if s.Suffrage == raft.Voter {
				voters--
			}
		case m.State == "left" || (m.State == "alive" && m.Meta.Leaving):
			if !yield(Change{Remove, s.ID, "", "removed " + name + ", which left"}) {
				return
			}
			if s.Suffrage == raft.Voter {
				voters--
			}
		case m.State == "dead" && s.Suffrage == raft.Voter && len(spares) > 0:
			sp := spares[0]
			spares = spares[1:]
			if !yield(Change{AddVoter, sp.ID, sp.Address, "promoted " + string(sp.ID) + " to replace the failed voter " + name}) {
				return
			}
			if !yield(Change{Demote, s.ID, "", "demoted the failed voter " + name}) {
				return
			}
		}
	}
	for ; voters < v.Voters && len(spares) > 0; voters++ {
		sp := spares[0]
		spares = spares[1:]
		if !yield(Change{AddVoter, sp.ID, sp.Address, "promoted " + string(sp.ID) + " to voter"}) {
			return
		}
	}
}

// candidates orders the members the leader may add to Raft: those that
// ask to be servers (-server) first, then by name, so the choice is the
// same whichever node leads.
func candidates(ms map[string]cluster.Member) []cluster.Member {
	out := make([]cluster.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Meta.Want != out[j].Meta.Want {
			return out[i].Meta.Want
		}
		return out[i].Name < out[j].Name
	})
	return out
}
