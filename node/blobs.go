package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolnode/toolnode/blobstore"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
)

// Executables outside the log. The Raft log names a tool's executable by
// digest and size; the bytes live in each node's blob store
// (DATA/blobs/sha256/HEX). The node that publishes an executable stores
// it before it proposes the command, so it always has it; every other
// node, when it applies a command naming a digest it lacks, fetches the
// bytes in the background over the cluster port (protoBlob), from the
// publisher first and then from any other live node, streamed to a
// temporary file and checked against the digest before it becomes
// visible. A call that needs an executable not yet here waits for its
// fetch, bounded, and fails saying what it is waiting for. Blobs no tool
// refers to are removed after a grace period.

// protoBlob asks a node for an executable by digest.
const protoBlob byte = 'B'

// Answers to a blob request: the size and bytes follow blobHave.
const (
	blobHave    byte = 'Y'
	blobMissing byte = 'N'
	blobBusy    byte = 'W'
)

const (
	// blobServeMax bounds the executables a node sends at once; one
	// more request is answered busy, and its sender asks another node.
	blobServeMax = 8
	// blobIdle is how long a transfer may make no progress.
	blobIdle = 30 * time.Second
	// blobWaitMax bounds how long a call waits for its executable.
	blobWaitMax = 30 * time.Second
	// blobBackoffMax is the longest pause between fetch rounds.
	blobBackoffMax = 30 * time.Second
	// DefaultBlobGrace is how long a blob no tool refers to is kept.
	DefaultBlobGrace = 10 * time.Minute
)

// blobs is the node's side of the store: fetches under way and the
// collector's memory.
type blobs struct {
	store *blobstore.Store
	serve chan struct{} // slots of blobServeMax

	mu       sync.Mutex
	inflight map[string]*fetchJob // digest → its fetch
	unref    map[string]time.Time // digest → when first seen unreferenced
	closed   bool                 // the node is stopping: no new fetch
	// rescan tells the advertise loop to look at every tool again, not
	// only those published since its last look (a snapshot was restored).
	rescan atomic.Bool
	// fetches are the fetch goroutines. Not the node's WaitGroup: Raft
	// applies entries (which start fetches) until after that one is
	// waited for.
	fetches sync.WaitGroup
}

// stopBlobs lets no new fetch start and waits for those under way (they
// end with the node's context).
func (n *Node) stopBlobs() {
	n.blobs.mu.Lock()
	n.blobs.closed = true
	n.blobs.mu.Unlock()
	n.blobs.fetches.Wait()
}

// fetchJob is one digest being fetched; done closes when it is stored
// (err nil) or given up (no tool refers to it any more, or the node
// stops).
type fetchJob struct {
	done chan struct{}
	mu   sync.Mutex
	err  error // the last round's failure, for a waiting call
}

func (j *fetchJob) lastErr() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

func (j *fetchJob) setErr(err error) {
	j.mu.Lock()
	j.err = err
	j.mu.Unlock()
}

// openBlobs opens the store in the data directory.
func (n *Node) openBlobs() error {
	s, err := blobstore.Open(filepath.Join(n.cfg.DataDir, "blobs"))
	if err != nil {
		return err
	}
	n.blobs.store, n.blobs.serve = s, make(chan struct{}, blobServeMax)
	n.blobs.inflight, n.blobs.unref = map[string]*fetchJob{}, map[string]time.Time{}
	return nil
}

// maxExec is this node's -max-exec-size.
func (n *Node) maxExec() int64 { return n.cfg.MaxExecSize }

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// ensureBlob starts fetching t's executable unless it is here or being
// fetched, and returns the fetch (nil when it is here).
func (n *Node) ensureBlob(t *raftfsm.Tool) *fetchJob {
	if t == nil || t.ExecHash == "" || n.blobs.store.Has(t.ExecHash) {
		return nil
	}
	n.blobs.mu.Lock()
	defer n.blobs.mu.Unlock()
	if j, ok := n.blobs.inflight[t.ExecHash]; ok {
		return j
	}
	j := &fetchJob{done: make(chan struct{})}
	if n.blobs.closed {
		j.err = errors.New("the node is shutting down")
		close(j.done)
		return j
	}
	n.blobs.inflight[t.ExecHash] = j
	n.blobs.fetches.Add(1)
	go n.fetchLoop(t.ExecHash, t.ExecSize, t.Owner, j)
	return j
}

// ensureAllBlobs starts the fetches of every executable not here.
func (n *Node) ensureAllBlobs(since uint64) {
	for _, t := range n.fsm.Tools() {
		if t.Index > since {
			n.ensureBlob(t)
		}
	}
}

// fetchLoop fetches digest d until it is stored, no tool refers to it any
// more, or the node stops, pausing longer after each failed round.
func (n *Node) fetchLoop(d string, size int64, owner string, j *fetchJob) {
	defer n.blobs.fetches.Done()
	defer func() {
		n.blobs.mu.Lock()
		delete(n.blobs.inflight, d)
		n.blobs.mu.Unlock()
		close(j.done)
	}()
	pause := 250 * time.Millisecond
	for round := 1; ; round++ {
		if n.blobs.store.Has(d) {
			j.setErr(nil)
			return
		}
		if !n.fsm.Referenced(d) {
			j.setErr(fmt.Errorf("no tool refers to executable %s any more", short(d)))
			return
		}
		from, err := n.fetchOnce(d, size, owner)
		if err == nil {
			n.logger.Printf("blobs: fetched executable %s (%d bytes) from %s", short(d), size, from)
			j.setErr(nil)
			return
		}
		j.setErr(err)
		n.warnf("blobs: fetching executable %s (round %d): %v; trying again in %s", short(d), round, err, pause)
		select {
		case <-n.ctx.Done():
			j.setErr(errors.New("the node is shutting down"))
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, blobBackoffMax)
	}
}

// blobSource is a node to ask for a blob.
type blobSource struct{ name, addr string }

// blobSources lists the live nodes to ask for a blob: its publisher
// first, then the others in random order.
func (n *Node) blobSources(owner string) []blobSource {
	var first, rest []blobSource
	for _, m := range n.gossip.Members() {
		if m.Name == n.cfg.Name || m.State != "alive" || m.Meta.Cluster == "" {
			continue
		}
		s := blobSource{m.Name, m.Meta.Cluster}
		if m.Name == owner {
			first = append(first, s)
		} else {
			rest = append(rest, s)
		}
	}
	rand.Shuffle(len(rest), func(i, k int) { rest[i], rest[k] = rest[k], rest[i] })
	return append(first, rest...)
}

// fetchOnce asks each source in turn and returns the one that gave the
// blob, or an error naming what every one answered.
func (n *Node) fetchOnce(d string, size int64, owner string) (string, error) {
	srcs := n.blobSources(owner)
	if len(srcs) == 0 {
		return "", fmt.Errorf("no live node to fetch it from (published by %s)", owner)
	}
	var why []string
	for _, s := range srcs {
		err := n.fetchFrom(s.addr, d, size)
		n.metrics.BlobFetched(s.name, size, err)
		if err == nil {
			return s.name, nil
		}
		if errors.Is(err, blobstore.ErrDigest) {
			n.warnf("blobs: refused executable %s from %s: %v; asking another node", short(d), s.name, err)
		}
		why = append(why, s.name+": "+err.Error())
		if n.ctx.Err() != nil {
			break
		}
	}
	return "", errors.New(strings.Join(why, "; "))
}

// fetchFrom asks the node at addr for blob d and stores what it sends
// if it is the blob: size bytes (when size > 0) whose SHA-256 is d.
func (n *Node) fetchFrom(addr, d string, size int64) error {
	c, err := n.dialCluster(addr, protoBlob, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(n.ctx, func() { c.Close() })
	defer stop()
	c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	if _, err := io.WriteString(c, d+"\n"); err != nil {
		return err
	}
	c.SetDeadline(time.Now().Add(blobIdle))
	br := bufio.NewReader(c)
	answer, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("no answer: %v", err)
	}
	switch answer {
	case blobMissing:
		return errors.New("not stored there")
	case blobBusy:
		return errors.New("busy sending others")
	case blobHave:
	default:
		return fmt.Errorf("answered %#x, not a blob", answer)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("no size: %v", err)
	}
	got := int64(binary.BigEndian.Uint64(hdr[:]))
	if size > 0 && got != size {
		return fmt.Errorf("%w: it has %d bytes, the log says %d", blobstore.ErrDigest, got, size)
	}
	if got > n.maxExec() {
		return fmt.Errorf("it has %d bytes, over this node's %d-byte -max-exec-size", got, n.maxExec())
	}
	_, _, err = n.blobs.store.Put(&idleReader{c: c, r: br}, d, got, n.maxExec())
	return err
}

// idleReader reads a connection with a deadline that moves with each
// read: a transfer may take long, but may not stall.
type idleReader struct {
	c net.Conn
	r io.Reader
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.c.SetReadDeadline(time.Now().Add(blobIdle))
	return r.r.Read(p)
}

// idleWriter is idleReader's other side.
type idleWriter struct{ c net.Conn }

func (w idleWriter) Write(p []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(blobIdle))
	return w.c.Write(p)
}

// serveBlob answers one blob request: the digest, a newline; then the
// answer byte, and with blobHave the size (8 bytes, big-endian) and the
// bytes. The peer has passed the cluster port's authentication.
func (n *Node) serveBlob(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var req [65]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		n.logger.Printf("cluster port: %s: blob request: %v", c.RemoteAddr(), err)
		return
	}
	d := string(req[:64])
	if req[64] != '\n' || !blobstore.ValidDigest(d) {
		n.logger.Printf("cluster port: %s: a blob request that is not a digest; closing", c.RemoteAddr())
		return
	}
	w := idleWriter{c}
	select {
	case n.blobs.serve <- struct{}{}:
		defer func() { <-n.blobs.serve }()
	default:
		n.metrics.BlobServed("busy")
		w.Write([]byte{blobBusy})
		return
	}
	f, err := n.blobs.store.Open(d)
	if err != nil {
		n.metrics.BlobServed("missing")
		w.Write([]byte{blobMissing})
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		n.metrics.BlobServed("missing")
		w.Write([]byte{blobMissing})
		return
	}
	var hdr [9]byte
	hdr[0] = blobHave
	binary.BigEndian.PutUint64(hdr[1:], uint64(fi.Size()))
	if _, err := w.Write(hdr[:]); err != nil {
		return
	}
	if _, err := io.Copy(w, io.LimitReader(f, fi.Size())); err != nil {
		n.metrics.BlobServed("error")
		n.logger.Printf("cluster port: sending executable %s to %s: %v", short(d), c.RemoteAddr(), err)
		return
	}
	n.metrics.BlobServed("sent")
}

// waitBlob waits, within ctx and blobWaitMax, for t's executable to be
// here.
func (n *Node) waitBlob(ctx context.Context, t *raftfsm.Tool) error {
	j := n.ensureBlob(t)
	if j == nil {
		return nil
	}
	if len(n.blobSources(t.Owner)) == 0 {
		// Nobody to wait for (a lone node whose copy was removed).
		return notFetched(t, "no live node to fetch it from")
	}
	tm := time.NewTimer(blobWaitMax)
	defer tm.Stop()
	select {
	case <-j.done:
		if n.blobs.store.Has(t.ExecHash) {
			return nil
		}
	case <-tm.C:
	case <-ctx.Done():
	}
	why := "still fetching"
	if err := j.lastErr(); err != nil {
		why = err.Error()
	}
	return notFetched(t, why)
}

// notFetched is waitBlob's error for t's executable, not here for why.
func notFetched(t *raftfsm.Tool, why string) error {
	return fmt.Errorf("tool %q: executable %s not yet fetched from %s or another node: %s", t.Name, short(t.ExecHash), t.Owner, why)
}

// collectBlobs removes the blobs no tool has referred to for the grace
// period, and starts the fetch of any referenced one not here.
func (n *Node) collectBlobs() {
	defer n.wg.Done()
	every := min(n.cfg.BlobGrace/2, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.sweepBlobs(time.Now())
			n.ensureAllBlobs(0)
		}
	}
}

// sweepBlobs is one round of collectBlobs.
func (n *Node) sweepBlobs(now time.Time) {
	ents, err := n.blobs.store.List()
	if err != nil {
		n.warnf("blobs: listing the store: %v", err)
		return
	}
	refs := map[string]bool{}
	for _, t := range n.fsm.Tools() {
		if t.ExecHash != "" {
			refs[t.ExecHash] = true
		}
	}
	grace := n.cfg.BlobGrace
	n.blobs.mu.Lock()
	defer n.blobs.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range ents {
		seen[e.Digest] = true
		if refs[e.Digest] {
			delete(n.blobs.unref, e.Digest)
			continue
		}
		since, ok := n.blobs.unref[e.Digest]
		if !ok {
			n.blobs.unref[e.Digest] = now
			continue
		}
		if now.Sub(since) < grace || now.Sub(e.Stored) < grace {
			continue
		}
		if err := n.blobs.store.Remove(e.Digest); err != nil {
			n.warnf("blobs: removing executable %s, which no tool refers to: %v", short(e.Digest), err)
			continue
		}
		delete(n.blobs.unref, e.Digest)
		n.logger.Printf("blobs: removed executable %s (%d bytes): no tool has referred to it for %s", short(e.Digest), e.Size, grace)
	}
	for d := range n.blobs.unref {
		if !seen[d] {
			delete(n.blobs.unref, d)
		}
	}
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
	p := n.blobs.store.Path(t.ExecHash)
	err := n.digests.Verify(p, t.ExecHash)
	if err == nil {
		return p, nil
	}
	if errors.Is(err, registry.ErrExecDigest) {
		n.logger.Printf("tools: %s: %v; fetching it again", t.Name, err)
		if rerr := n.blobs.store.Remove(t.ExecHash); rerr != nil {
			n.logger.Printf("tools: %s: removing the changed executable: %v", t.Name, rerr)
		} else {
			n.ensureBlob(t)
		}
	}
	return "", fmt.Errorf("tool %q: %w", t.Name, err)
}
