package raftnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/cluster"
	"github.com/toolnode/toolnode/raftfsm"
)

// Where a Raft server is. Raft's configuration records each server's
// cluster address as it was when the server was added; a node restarted
// on another address (a container's new IP, a rescheduled pod) is then
// reached through gossip, which carries every member's current cluster
// address: the transport asks gossipAddrs before it dials a server, and
// falls back to the configuration's address for a server gossip does not
// know alive. A whole cluster restarted on new addresses thus elects a
// leader as soon as gossip has formed again, and the leader's reconcile
// then rewrites the configuration's addresses (package reconcile). An address
// given as a host name (-advertise NAME) is kept as a name, and resolved
// at each dial.
//
// Where no quorum of the configuration's voters will ever come back,
// the operator writes the surviving servers into DATA/raft/peers.json on
// each of them and starts them; they recover Raft with exactly those
// servers (RecoverPeers), as Consul's peers.json does.

// Addrs is the transport's raft.ServerAddressProvider: this node's
// own address for itself, the cluster address gossip reports for a live
// member, else the address in Raft's configuration (a member that left or
// died, gossip not started yet). It answers an error, which Raft logs as
// a warning at every dial, only for a server it knows nowhere.
type Addrs struct {
	// Self is this server's ID.
	Self raft.ServerID
	// Transport is Raft's transport, nil until it is made.
	Transport func() raft.Transport
	// Members are gossip's members, nil before gossip starts.
	Members func() []cluster.Member
	// Raft is the node's Raft, nil until it opens.
	Raft func() *raft.Raft
}

// ServerAddr is raft.ServerAddressProvider's.
func (a Addrs) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if id == a.Self {
		if t := a.Transport(); t != nil {
			return t.LocalAddr(), nil
		}
	}
	if members := a.Members(); members != nil {
		for _, m := range members {
			if m.Name == string(id) && m.State == "alive" && m.Meta.Cluster != "" {
				return raft.ServerAddress(m.Meta.Cluster), nil
			}
		}
	}
	if r := a.Raft(); r != nil {
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				if s.ID == id {
					return s.Address, nil
				}
			}
		}
	}
	return "", fmt.Errorf("neither gossip nor Raft's configuration knows server %s", id)
}

// PeersFile is the recovery file in the Raft directory (DATA/raft).
const PeersFile = "peers.json"

// peer is one server of PeersFile.
type peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	NonVoter bool   `json:"non_voter,omitempty"`
}

// RecoverPeers, when dir (DATA/raft) holds PeersFile, replaces Raft's
// configuration with the servers it lists (raft.RecoverCluster, over a
// scratch FSM: the node's own is restored from the snapshot it writes)
// and renames the file to peers.json.done, so the recovery runs once; it
// returns the servers it recovered with, none when there was no file. A
// file that is not a valid list of servers stops the start.
func RecoverPeers(dir string, rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, tr raft.Transport) ([]raft.Server, error) {
	path := filepath.Join(dir, PeersFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft recovery: %w", err)
	}
	conf, err := ParsePeers(b)
	if err != nil {
		return nil, fmt.Errorf("raft recovery: %s: %w", path, err)
	}
	if err := raft.RecoverCluster(rc, raftfsm.New(nil), logs, stable, snaps, tr, conf); err != nil {
		return nil, fmt.Errorf("raft recovery from %s: %w", path, err)
	}
	if err := os.Rename(path, path+".done"); err != nil {
		return nil, fmt.Errorf("raft recovery: %w", err)
	}
	return conf.Servers, nil
}

// ParsePeers reads a PeersFile: a JSON list of {"id", "address",
// "non_voter"}, with at least one voter and no name or address twice.
func ParsePeers(b []byte) (raft.Configuration, error) {
	var ps []peer
	if err := json.Unmarshal(b, &ps); err != nil {
		return raft.Configuration{}, fmt.Errorf("not a JSON list of servers: %v", err)
	}
	var conf raft.Configuration
	seen := map[string]bool{}
	voters := 0
	for _, p := range ps {
		if p.ID == "" || p.Address == "" {
			return conf, fmt.Errorf("a server needs an id and an address: %+v", p)
		}
		if seen[p.ID] || seen[p.Address] {
			return conf, fmt.Errorf("%s or %s is listed twice", p.ID, p.Address)
		}
		seen[p.ID], seen[p.Address] = true, true
		if !p.NonVoter {
			voters++
		}
		s := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Address)}
		if p.NonVoter {
			s.Suffrage = raft.Nonvoter
		}
		conf.Servers = append(conf.Servers, s)
	}
	if voters == 0 {
		return conf, errors.New("no voter: at least one server must vote")
	}
	return conf, nil
}
