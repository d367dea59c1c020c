package node

import (
	"fmt"
	"time"

	"github.com/toolnode/toolnode/blobstore"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/rollout"
)

// Publishing through 9P: files written into t/ and a/ on any node become
// Raft commands, owned by the node written through (last write wins). A
// node's directory watcher never withdraws them: it only withdraws what
// it published from its directory.

// MaxExecutable is the largest executable t/NAME takes (-max-exec-size).
func (n *Node) MaxExecutable() int64 { return n.maxExec() }

// ToolExecMode is the mode of a tool's published executable.
func (n *Node) ToolExecMode(name string) (uint32, bool) {
	t, ok := n.liveTool(name)
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
	if t, ok := n.liveTool(name); ok && t.Time > 0 {
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
	return n.publishToolMeta(caller{}, name, data)
}

func (n *Node) publishToolMeta(c caller, name string, data []byte) error {
	if err := registry.ValidName(name); err != nil {
		return err
	}
	_, notes, err := registry.ParseMeta(data)
	if err != nil {
		// A refused close changes nothing: an executable staged for it
		// is dropped, not published later with the live metadata.
		if _, st := n.sigs.get(c.who, name, true); st != nil {
			n.logger.Printf("t/%s: executable %s staged by %s dropped with the refused t/%s.meta", name, st.digest, publisherOrNode(c.who, n.cfg.Name), name)
		}
		return fmt.Errorf("invalid tool metadata in %s.meta: %w; nothing was published", name, err)
	}
	n.logNotes(name, notes)
	sig, staged := n.sigs.get(c.who, name, true)
	if staged != nil {
		// The executable closed before it, staged for this close: one
		// version of both, under the signature over both.
		_, err = n.applyFor(c, raftfsm.CmdPublishTools, raftfsm.PublishTools{
			Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Publisher: rollout.PublisherName(c.who),
			Tools: []raftfsm.ToolSpec{{Name: name, Meta: data, ExecHash: staged.digest, Size: staged.size, Mode: staged.mode, Sig: sig}},
		})
		n.refusedPublish(c, name, err)
		return err
	}
	_, err = n.applyFor(c, raftfsm.CmdPutToolMeta, raftfsm.PutToolMeta{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name, Meta: data,
		Publisher: rollout.PublisherName(c.who), Sig: sig,
	})
	n.refusedPublish(c, name, err)
	return err
}

// NewExecUpload makes the scratch file of an upload into t/NAME: a
// temporary file of the blob store.
func (n *Node) NewExecUpload() (p9.ExecUpload, error) { return n.blobs.Store().Temp() }

// PublishToolExec publishes a tool's executable: the upload is stored in
// the blob store under its digest (synced, verified, read-only), then
// the command naming the digest and size is proposed. It returns once
// the command is committed and applied here; the other nodes fetch the
// bytes from this one (or any that has them) in the background.
func (n *Node) PublishToolExec(name string, up p9.ExecUpload, size int64, mode uint32) error {
	return n.publishToolExec(caller{}, name, up, size, mode)
}

func (n *Node) publishToolExec(c caller, name string, up p9.ExecUpload, size int64, mode uint32) error {
	defer up.Close()
	if err := registry.ValidName(name); err != nil {
		return err
	}
	if size > n.maxExec() {
		return fmt.Errorf("file too long: %s is %d bytes: executables are limited to %d bytes (-max-exec-size)", name, size, n.maxExec())
	}
	if size <= 0 {
		return fmt.Errorf("invalid executable: %s is empty; an executable needs content (rm t/%s removes one)", name, name)
	}
	tmp, ok := up.(*blobstore.Temp)
	if !ok {
		return fmt.Errorf("tool %q: the upload is not a file of this node's blob store", name)
	}
	d, err := tmp.Commit(size, n.maxExec())
	if err != nil {
		return fmt.Errorf("tool %q: storing the executable: %w", name, err)
	}
	sig, _ := n.sigs.get(c.who, name, false)
	if sig == nil || !n.signsLiveMeta(name, d, sig) {
		// The executable and the next close of t/NAME.meta are one
		// version; without that close it is published with the live
		// metadata after stagedTTL (flushStaged).
		n.sigs.put(c.who, name, nil, &stagedExec{c: c, digest: d, size: size, mode: mode & 0o7777, at: time.Now()})
		n.logger.Printf("t/%s: executable %s staged for the next close of t/%s.meta by %s", name, d, name, publisherOrNode(c.who, n.cfg.Name))
		return nil
	}
	n.sigs.get(c.who, name, true)
	_, err = n.applyFor(c, raftfsm.CmdPutToolExec, raftfsm.PutToolExec{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name,
		ExecHash: d, Size: size, Mode: mode & 0o7777, Publisher: rollout.PublisherName(c.who), Sig: sig,
	})
	n.refusedPublish(c, name, err)
	return err
}

// ChmodToolExec publishes a tool's executable again with a new mode: the
// same digest, so no byte moves.
func (n *Node) ChmodToolExec(name string, mode uint32) error {
	return n.chmodToolExec(caller{}, name, mode)
}

func (n *Node) chmodToolExec(c caller, name string, mode uint32) error {
	if n.sigs.chmodStaged(c.who, name, mode&0o7777) {
		return nil
	}
	t, ok := n.fsm.Tool(name)
	if !ok || t.ExecHash == "" {
		return fmt.Errorf("file does not exist: tool %q has no published executable", name)
	}
	size, have := n.execSize(t)
	if !have {
		return fmt.Errorf("tool %q: its executable is not yet fetched here; try again", name)
	}
	// The mode is not in the manifest: the signature stays the tool's.
	_, err := n.applyFor(c, raftfsm.CmdPutToolExec, raftfsm.PutToolExec{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name,
		ExecHash: t.ExecHash, Size: size, Mode: mode & 0o7777, Publisher: rollout.PublisherName(c.who), Sig: t.Sig,
	})
	return err
}

// WithdrawTool removes a tool cluster-wide, whoever published it.
func (n *Node) WithdrawTool(name string) error { return n.withdrawTool(caller{}, name) }

func (n *Node) withdrawTool(c caller, name string) error {
	if t, ok := n.fsm.Tool(name); !ok || !t.Published() {
		return fmt.Errorf("file does not exist: no tool %q in the cluster", name)
	}
	_, err := n.applyFor(c, raftfsm.CmdWithdrawTools, raftfsm.WithdrawTools{
		Names: []string{name}, Publisher: rollout.PublisherName(c.who), Time: nowNano(),
	})
	return err
}

// RemoveToolExec removes a tool's executable, keeping its metadata.
func (n *Node) RemoveToolExec(name string) error { return n.removeToolExec(caller{}, name) }

func (n *Node) removeToolExec(c caller, name string) error {
	sig, _ := n.sigs.get(c.who, name, true)
	_, err := n.applyFor(c, raftfsm.CmdDropToolExec, raftfsm.DropToolExec{
		Name: name, Owner: n.cfg.Name, Publisher: rollout.PublisherName(c.who), Time: nowNano(), Sig: sig,
	})
	n.refusedPublish(c, name, err)
	return err
}

// PublishProfile validates and publishes an agent profile.
func (n *Node) PublishProfile(name string, data []byte) error {
	return n.publishProfile(caller{}, name, data)
}

func (n *Node) publishProfile(c caller, name string, data []byte) error {
	if err := registry.ValidName(name); err != nil {
		return err
	}
	p, err := registry.ParseProfile(data)
	if err != nil {
		return fmt.Errorf("invalid agent profile in %s.json: %w; nothing was published", name, err)
	}
	_, err = n.applyFor(c, raftfsm.CmdPublishProfiles, raftfsm.PublishProfiles{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(),
		Profiles: []raftfsm.ProfileSpec{{Name: name, Data: data, AutoLoad: p.AutoLoad}},
	})
	return err
}

// WithdrawProfile removes a profile cluster-wide.
func (n *Node) WithdrawProfile(name string) error { return n.withdrawProfile(caller{}, name) }

func (n *Node) withdrawProfile(c caller, name string) error {
	if _, ok := n.fsm.Profile(name); !ok {
		return fmt.Errorf("file does not exist: no agent profile %q in the cluster", name)
	}
	_, err := n.applyFor(c, raftfsm.CmdWithdrawProfiles, raftfsm.WithdrawProfiles{Names: []string{name}})
	return err
}
