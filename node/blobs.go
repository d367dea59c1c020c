package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/toolnode/toolnode/blobs"
	"github.com/toolnode/toolnode/blobstore"
	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/sandbox"
)

// DefaultBlobGrace is how long a blob no tool refers to is kept.
const DefaultBlobGrace = blobs.DefaultGrace

// openBlobs opens the store in the data directory and the service that
// fetches, serves and collects its executables.
func (n *Node) openBlobs() error {
	s, err := blobstore.Open(filepath.Join(n.cfg.DataDir, "blobs"))
	if err != nil {
		return err
	}
	n.blobs = blobs.New(n.ctx, blobs.Config{
		Store: s, State: blobState{n.fsm}, MaxExec: n.cfg.MaxExecSize, Grace: n.cfg.BlobGrace,
		Sources: n.blobSources,
		Dial: func(addr string, timeout time.Duration) (net.Conn, error) {
			return n.dialer.Dial(addr, clusterport.ProtoBlob, timeout)
		},
		Metrics: n.metrics, Logf: n.logger.Printf, Warnf: n.warnf,
	})
	return nil
}

// blobState answers the blob service from the FSM.
type blobState struct{ fsm *raftfsm.FSM }

func (s blobState) Referenced(d string) bool { return s.fsm.Referenced(d) }

func (s blobState) Wanted() []blobs.Want {
	var ws []blobs.Want
	for _, t := range s.fsm.Tools() {
		if t.ExecHash != "" {
			ws = append(ws, wantOf(t))
		}
	}
	// The executables of kept versions, for v/NAME/VERSION and rollback.
	for _, k := range s.fsm.KeptExecs() {
		ws = append(ws, blobs.Want{Tool: k.Tool, Digest: k.Digest, Size: k.Size, Owner: k.Owner})
	}
	return ws
}

func wantOf(t *raftfsm.Tool) blobs.Want {
	return blobs.Want{Tool: t.Name, Digest: t.ExecHash, Size: t.ExecSize, Owner: t.Owner}
}

// maxExec is this node's -max-exec-size.
func (n *Node) maxExec() int64 { return n.cfg.MaxExecSize }

// ensureAllBlobs starts the fetches of the executables of the tools
// published after index since that are not here.
func (n *Node) ensureAllBlobs(since uint64) {
	for _, t := range n.fsm.Tools() {
		if t.Index > since && t.ExecHash != "" {
			n.blobs.Ensure(wantOf(t))
		}
	}
}

// blobSources lists the live members to ask for a blob.
func (n *Node) blobSources() []blobs.Source {
	var srcs []blobs.Source
	for _, m := range n.gossip.Members() {
		if m.Name == n.cfg.Name || m.State != "alive" || m.Meta.Cluster == "" {
			continue
		}
		srcs = append(srcs, blobs.Source{Name: m.Name, Addr: m.Meta.Cluster})
	}
	return srcs
}

// collectBlobs runs the blob collector until the node stops.
func (n *Node) collectBlobs() {
	defer n.wg.Done()
	n.blobs.Collect(n.ctx)
}

// waitBlob waits, bounded, for t's executable to be here.
func (n *Node) waitBlob(ctx context.Context, t *raftfsm.Tool) error {
	if t == nil || t.ExecHash == "" {
		return nil
	}
	return n.blobs.Wait(ctx, wantOf(t))
}

// storedExecutable returns the path of t's executable in the store,
// fetched first when it is not here yet, and checked against its digest.
// A file that does not match (changed on disk after it was stored) fails
// the call, is logged and removed, and is fetched again for the next
// call.
func (n *Node) storedExecutable(ctx context.Context, t *raftfsm.Tool) (string, error) {
	if err := n.waitBlob(ctx, t); err != nil {
		return "", err
	}
	store := n.blobs.Store()
	p := store.Path(t.ExecHash)
	err := n.digests.Verify(p, t.ExecHash)
	if err == nil {
		return p, nil
	}
	if errors.Is(err, sandbox.ErrExecDigest) {
		n.logger.Printf("tools: %s: %v; fetching it again", t.Name, err)
		if rerr := store.Remove(t.ExecHash); rerr != nil {
			n.logger.Printf("tools: %s: removing the changed executable: %v", t.Name, rerr)
		} else {
			n.blobs.Ensure(wantOf(t))
		}
	}
	return "", fmt.Errorf("tool %q: %w", t.Name, err)
}
