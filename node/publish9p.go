package node

import (
	"fmt"
	"time"

	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
)

// Publishing through 9P: files written into t/ and a/ on any node become
// Raft commands, owned by the node written through (last write wins). A
// node's directory watcher never withdraws them: it only withdraws what
// it published from its directory.

// MaxExecutable is the largest executable t/NAME takes.
func (n *Node) MaxExecutable() int { return MaxExecutable }

// ToolExecMode is the mode of a tool's published executable.
func (n *Node) ToolExecMode(name string) (uint32, bool) {
	t, ok := n.fsm.Tool(name)
	if !ok || t.ExecHash == "" {
		return 0, false
	}
	if t.ExecMode == 0 {
		return 0o755, true
	}
	return t.ExecMode, true
}

// ToolTime is when a tool's current version was published.
func (n *Node) ToolTime(name string) time.Time {
	if t, ok := n.fsm.Tool(name); ok && t.Time > 0 {
		return time.Unix(0, t.Time)
	}
	return time.Time{}
}

// ProfileTime is when a profile's current version was published.
func (n *Node) ProfileTime(name string) time.Time {
	if p, ok := n.fsm.Profile(name); ok && p.Time > 0 {
		return time.Unix(0, p.Time)
	}
	return time.Time{}
}

// PublishToolMeta validates and publishes a tool's metadata.
func (n *Node) PublishToolMeta(name string, data []byte) error {
	if err := registry.ValidName(name); err != nil {
		return err
	}
	_, notes, err := registry.ParseMeta(data)
	if err != nil {
		return fmt.Errorf("invalid tool metadata in %s.meta: %w; nothing was published", name, err)
	}
	n.logNotes(name, notes)
	_, err = n.apply(raftfsm.CmdPutToolMeta, raftfsm.PutToolMeta{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name, Meta: data,
	})
	return err
}

// PublishToolExec publishes a tool's executable.
func (n *Node) PublishToolExec(name string, data []byte, mode uint32) error {
	if err := registry.ValidName(name); err != nil {
		return err
	}
	if len(data) > MaxExecutable {
		return fmt.Errorf("file too long: %s is %d bytes: executables are limited to %d bytes", name, len(data), MaxExecutable)
	}
	if len(data) == 0 {
		return fmt.Errorf("invalid executable: %s is empty; an executable needs content (rm t/%s removes one)", name, name)
	}
	_, err := n.apply(raftfsm.CmdPutToolExec, raftfsm.PutToolExec{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name,
		Exec: data, ExecHash: raftfsm.ExecHash(data), Mode: mode & 0o7777,
	})
	return err
}

// WithdrawTool removes a tool cluster-wide, whoever published it.
func (n *Node) WithdrawTool(name string) error {
	if t, ok := n.fsm.Tool(name); !ok || !t.Published() {
		return fmt.Errorf("file does not exist: no tool %q in the cluster", name)
	}
	_, err := n.apply(raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{Names: []string{name}})
	return err
}

// RemoveToolExec removes a tool's executable, keeping its metadata.
func (n *Node) RemoveToolExec(name string) error {
	_, err := n.apply(raftfsm.CmdDropToolExec, raftfsm.DropToolExec{Name: name})
	return err
}

// PublishProfile validates and publishes an agent profile.
func (n *Node) PublishProfile(name string, data []byte) error {
	if err := registry.ValidName(name); err != nil {
		return err
	}
	p, err := registry.ParseProfile(data)
	if err != nil {
		return fmt.Errorf("invalid agent profile in %s.json: %w; nothing was published", name, err)
	}
	_, err = n.apply(raftfsm.CmdPublishProfiles, raftfsm.PublishProfiles{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(),
		Profiles: []raftfsm.ProfileSpec{{Name: name, Data: data, AutoLoad: p.AutoLoad}},
	})
	return err
}

// WithdrawProfile removes a profile cluster-wide.
func (n *Node) WithdrawProfile(name string) error {
	if _, ok := n.fsm.Profile(name); !ok {
		return fmt.Errorf("file does not exist: no agent profile %q in the cluster", name)
	}
	_, err := n.apply(raftfsm.CmdWithdrawProfiles, raftfsm.WithdrawProfiles{Names: []string{name}})
	return err
}
