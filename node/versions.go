package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolnode/toolnode/blobs"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// A tool's versions (DESIGN §8): raftfsm keeps them; this file serves
// them as v/ (p9.Versions), proposes rollbacks, and, on the leader,
// makes its -keep-versions the cluster's.

var _ p9.Versions = (*Node)(nil)

// setKeepVersions proposes the leader's -keep-versions when the state
// holds another.
func (n *Node) setKeepVersions(ctx context.Context) {
	if ctx.Err() != nil || n.fsm.KeepVersions() == n.cfg.KeepVersions {
		return
	}
	if _, err := n.apply(raftfsm.CmdSetKeepVersions, raftfsm.SetKeepVersions{Keep: n.cfg.KeepVersions}); err != nil {
		n.warnf("versions: making -keep-versions %d the cluster's: %v", n.cfg.KeepVersions, err)
		return
	}
	n.logger.Printf("versions: the cluster keeps the newest %d versions of each tool, and its live one (-keep-versions)", n.cfg.KeepVersions)
}

// publisherName is a principal as a version records it: one field of a
// v/NAME/idx line.
func publisherName(who string) string {
	if who == "" {
		return ""
	}
	b := []byte(who)
	for i, c := range b {
		if c <= ' ' || c == 0x7f {
			b[i] = '_'
		}
	}
	if len(b) > 256 {
		b = b[:256]
	}
	if string(b) == "-" {
		return "_"
	}
	return string(b)
}

// VersionedTools lists the tools with kept versions (v/).
func (n *Node) VersionedTools() []string { return n.fsm.VersionedTools() }

// ToolVersions lists a tool's kept versions, newest first (v/NAME/idx).
func (n *Node) ToolVersions(name string) ([]p9.VersionEntry, bool) {
	h, ok := n.fsm.ToolVersions(name)
	if !ok {
		return nil, false
	}
	out := make([]p9.VersionEntry, len(h.Versions))
	for i, v := range h.Versions {
		e := p9.VersionEntry{
			Version: v.Version, State: v.State, Publisher: v.Publisher, Digest: v.ExecHash,
			Size: v.ExecSize, Signer: n.fsm.SignerOf(name, v), HasMeta: v.HasContent(),
		}
		if v.Time > 0 {
			e.Time = time.Unix(0, v.Time)
		}
		out[i] = e
	}
	return out, true
}

func (n *Node) version(name string, version uint64) (*raftfsm.Version, bool) {
	h, ok := n.fsm.ToolVersions(name)
	if !ok {
		return nil, false
	}
	return h.Get(version)
}

// VersionMeta is a kept version's metadata as published.
func (n *Node) VersionMeta(name string, version uint64) ([]byte, bool) {
	v, ok := n.version(name, version)
	if !ok || !v.HasContent() {
		return nil, false
	}
	return v.Meta, true
}

// VersionExecutable is a kept version's executable: fetched first when
// it is not here yet, like a tool's.
func (n *Node) VersionExecutable(name string, version uint64) (p9.Executable, bool) {
	v, ok := n.version(name, version)
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
	return n.rollback(caller{}, name, version)
}

func (n *Node) rollback(c caller, name string, version uint64) (uint64, error) {
	who := c.who
	r, err := n.applyFor(c, raftfsm.CmdRollback, raftfsm.Rollback{
		Name: name, Version: version, Publisher: publisherName(who), Owner: n.cfg.Name, Time: nowNano(),
	})
	if err != nil {
		n.logger.Printf("versions: refused the rollback of %s to version %d by %s: %v", name, version, orNode(who), err)
		if !strings.HasPrefix(err.Error(), "invalid") {
			err = fmt.Errorf("rollback of %s to version %d: %w", name, version, err)
		}
		return 0, err
	}
	live, err := strconv.ParseUint(r.Name, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("rollback of %s: the cluster answered %q, not a version", name, r.Name)
	}
	n.logger.Printf("versions: %s rolled %s back to version %d: live as version %d", orNode(who), name, version, live)
	return live, nil
}

func orNode(who string) string {
	if who == "" {
		return "this node"
	}
	return who
}

func (a auditBackend) Rollback(name string, version uint64) (uint64, error) {
	start := time.Now()
	live, err := a.Node.rollback(a.caller(), name, version)
	a.record(start, a.who, "rollback", name+"@"+strconv.FormatUint(version, 10), err)
	return live, err
}
