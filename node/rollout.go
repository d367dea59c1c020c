package node

import (
	"strconv"
	"strings"
	"time"

	"github.com/toolnode/toolnode/blobs"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/rollout"
)

// The wiring of package rollout: v/ (p9.Versions) and canaries
// (p9.Canaries), for the node itself and, audited, for each principal.

var (
	_ p9.Versions = (*Node)(nil)
	_ p9.Canaries = (*Node)(nil)
)

func (n *Node) newRollout() *rollout.Service {
	return rollout.New(rollout.Config{
		Node: n.cfg.Name,
		FSM:  n.fsm,
		Apply: func(c rollout.Caller, t raftfsm.CommandType, body any) (raftfsm.Result, error) {
			return n.applyFor(caller{who: c.Who, token: c.Token}, t, body)
		},
		Known:   n.knownNode,
		Leading: n.leading,
		Record:  n.record,
		Logf:    n.logger.Printf,
		Warnf:   n.warnf,
		Now:     nowNano,
	})
}

// knownNode reports whether name is a member of gossip or of the Raft
// configuration.
func (n *Node) knownNode(name string) bool {
	if roles, _ := n.roles(); roles != nil {
		if _, ok := roles[name]; ok {
			return true
		}
	}
	if n.gossip == nil {
		return false
	}
	for _, m := range n.gossip.Members() {
		if m.Name == name {
			return true
		}
	}
	return false
}

// liveTool is the record of tool name live on this node: its canary's
// when this node is one of the canary's nodes (DESIGN §8).
func (n *Node) liveTool(name string) (*raftfsm.Tool, bool) {
	return n.fsm.ToolFor(name, n.cfg.Name)
}

// liveTools lists every tool's record live on this node, sorted by name.
func (n *Node) liveTools() []*raftfsm.Tool {
	return n.fsm.ToolsFor(n.cfg.Name)
}

// VersionedTools lists the tools with kept versions (v/).
func (n *Node) VersionedTools() []string { return n.rollout.VersionedTools() }

// ToolVersions lists a tool's kept versions, newest first (v/NAME/idx).
func (n *Node) ToolVersions(name string) ([]p9.VersionEntry, bool) {
	return n.rollout.ToolVersions(name)
}

// VersionMeta is a kept version's metadata as published.
func (n *Node) VersionMeta(name string, version uint64) ([]byte, bool) {
	return n.rollout.VersionMeta(name, version)
}

// VersionExecutable is a kept version's executable: fetched first when
// it is not here yet, like a tool's.
func (n *Node) VersionExecutable(name string, version uint64) (p9.Executable, bool) {
	v, ok := n.rollout.Version(name, version)
	if !ok || v.ExecHash == "" {
		return p9.Executable{}, false
	}
	w := blobs.Want{Tool: name, Digest: v.ExecHash, Size: v.ExecSize, Owner: v.Owner}
	return p9.Executable{Size: v.ExecSize, Open: func() (p9.ExecReader, error) {
		if err := n.blobs.Wait(n.ctx, w); err != nil {
			return nil, err
		}
		return n.blobs.Store().Open(v.ExecHash)
	}}, true
}

// Rollback publishes a copy of a kept version as the tool's next one and
// returns the version live after it.
func (n *Node) Rollback(name string, version uint64) (uint64, error) {
	return n.rollout.Rollback(rollout.Caller{}, name, version)
}

// Canary marks tool name's next publish as a canary live on nodes only.
func (n *Node) Canary(name string, nodes []string, manual bool) error {
	return n.rollout.Canary(rollout.Caller{}, name, nodes, manual)
}

// Promote makes tool name's canary live everywhere and returns its version.
func (n *Node) Promote(name string) (uint64, error) { return n.rollout.Promote(rollout.Caller{}, name) }

// Abort drops tool name's canary: its nodes go back to the live version.
func (n *Node) Abort(name string) error { return n.rollout.Abort(rollout.Caller{}, name, "") }

func (a auditBackend) rolloutCaller() rollout.Caller {
	return rollout.Caller{Who: a.who, Token: a.secret}
}

func (a auditBackend) Rollback(name string, version uint64) (uint64, error) {
	start := time.Now()
	live, err := a.rollout.Rollback(a.rolloutCaller(), name, version)
	a.record(start, a.who, "rollback", name+"@"+strconv.FormatUint(version, 10), err)
	return live, err
}

func (a auditBackend) Canary(name string, nodes []string, manual bool) error {
	start := time.Now()
	err := a.rollout.Canary(a.rolloutCaller(), name, nodes, manual)
	a.record(start, a.who, "canary", name+"@"+strings.Join(nodes, ","), err)
	return err
}

func (a auditBackend) Promote(name string) (uint64, error) {
	start := time.Now()
	v, err := a.rollout.Promote(a.rolloutCaller(), name)
	a.record(start, a.who, "promote", name, err)
	return v, err
}

func (a auditBackend) Abort(name string) error {
	start := time.Now()
	err := a.rollout.Abort(a.rolloutCaller(), name, "")
	a.record(start, a.who, "abort", name, err)
	return err
}
