package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/hashicorp/raft"

	"github.com/toolnode/toolnode/blobs"
	"github.com/toolnode/toolnode/blobstore"
	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/raftfsm"
)

// startBlobMember is startMember with its log also kept in a buffer.
func startBlobMember(t *testing.T, name, root string, join ...string) (*Node, *syncBuf) {
	t.Helper()
	buf := &syncBuf{}
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       name, DataDir: filepath.Join(root, name),
		GossipAddr: "127.0.0.1:0", Join: join,
		P9Listener: listen(t), ClusterListener: listen(t),
		LogOutput: io.MultiWriter(testWriter{t}, buf),
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, buf
}

// put9 writes a file of t/ through 9P in 64 KiB writes, as cp does.
func put9(fsys *client.Fsys, path string, perm plan9.Perm, data []byte) error {
	fid, err := fsys.Create(path, plan9.OWRITE, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	for off := 0; off < len(data); off += 64 << 10 {
		end := min(off+64<<10, len(data))
		if _, err := fid.WriteAt(data[off:end], int64(off)); err != nil {
			fid.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return fid.Close()
}

// bigScript is a shell script that prints its word and exits, padded to
// size bytes after the exit.
func bigScript(word string, size int) []byte {
	b := []byte("#!/bin/sh\necho " + word + "\nexit 0\n")
	pad := bytes.Repeat([]byte("# padding padding padding padding\n"), size/34+1)
	return append(b, pad...)[:size]
}

// callTool makes a session and agent on n, loads tool and calls it.
func callTool(ctx context.Context, t *testing.T, n *Node, session, tool string) (string, error) {
	t.Helper()
	fsys := mount(t, n.P9Addr())
	if _, err := ask(fsys, "session/new", "name="+session); err != nil {
		return "", err
	}
	if _, err := ask(fsys, "session/"+session+"/agent/new", "name=a"); err != nil {
		return "", err
	}
	if _, err := ask(fsys, "session/"+session+"/agent/a/ctl", "tool_load "+tool); err != nil {
		return "", err
	}
	out, err := n.Call(ctx, session, "a", tool, nil)
	return string(out), err
}

// An executable published through a follower is named in the log by
// digest and size; every node fetches the bytes over the cluster port and
// runs them; a node joining later gets them too, and refuses a copy that
// does not match the digest (here the publisher's, corrupted on its disk)
// and takes one from another node.
func TestBlobs_FetchOverClusterPort(t *testing.T) {
	root := t.TempDir()
	n1, log1 := startBlobMember(t, "n1", root)
	n2, _ := startBlobMember(t, "n2", root, n1.gossip.LocalAddr())
	n3, log3 := startBlobMember(t, "n3", root, n1.gossip.LocalAddr())
	waitFor(t, "three voters", 10*time.Second, func() bool { return len(voters(n1)) == 3 })
	pub := n2
	if leaderOf(n1, n2, n3) == n2 {
		pub = n3
	}

	exe := bigScript("fetched", 3<<20)
	d := blobstore.Digest(exe)
	f := mountPublisher(t, pub, n1, n2, n3)
	if err := put9(f, "t/big.meta", 0o644, []byte(`{"description":"a big one"}`)); err != nil {
		t.Fatal(err)
	}
	if err := put9Exec(f, "big", exe); err != nil {
		t.Fatal(err)
	}
	// The publisher has it as soon as the write returns.
	if !pub.blobs.Store().Has(d) {
		t.Fatal("the publisher does not have the executable it published")
	}
	tl, _ := n1.fsm.Tool("big")
	if tl == nil || tl.ExecHash != d || tl.ExecSize != int64(len(exe)) || tl.Owner != pub.Name() {
		t.Fatalf("the log's record: %+v", tl)
	}
	// The log carries no executable bytes: its last entries are small.
	last := n1.raftNode().LastIndex()
	for i := last; i > 0 && i+10 > last; i-- {
		var l raft.Log
		if err := n1.logs.GetLog(i, &l); err == nil && len(l.Data) > 64<<10 {
			t.Fatalf("log entry %d is %d bytes", i, len(l.Data))
		}
	}
	for _, n := range []*Node{n1, n2, n3} {
		waitFor(t, "the executable on "+n.Name(), 20*time.Second, func() bool { return n.blobs.Store().Has(d) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range []*Node{n1, n2, n3} {
		out, err := callTool(ctx, t, n, "s"+n.Name(), "big")
		if err != nil || out != "fetched\n" {
			t.Fatalf("call on %s = %q, %v", n.Name(), out, err)
		}
	}
	// t/big reads back whole through another node.
	f1 := mount(t, n1.P9Addr())
	fid, err := f1.Open("t/big", plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(fid)
	fid.Close()
	if err != nil || !bytes.Equal(back, exe) {
		t.Fatalf("t/big read back %d bytes, %v", len(back), err)
	}

	// The publisher's copy is corrupted on its disk.
	p := pub.blobs.Store().Path(d)
	os.Chmod(p, 0o644)
	bad := bytes.Clone(exe)
	copy(bad[len(bad)-8:], "CORRUPT!")
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	// Control: the publisher serves the corrupted bytes under d; a fetch
	// that took whatever came (the protocol spoken here, unchecked)
	// would store them.
	if got := blobstore.Digest(fetchRaw(t, n1, string(pub.transport.LocalAddr()), d)); got == d {
		t.Fatalf("control: the publisher served bytes of digest %s, the uncorrupted executable's", got)
	}
	// A node that lacks it asks the publisher first, refuses its bytes,
	// and takes them from another node.
	x, xlog := n1, log1
	if pub == n1 {
		x, xlog = n3, log3
	}
	x.blobs.Store().Remove(d)
	tl, _ = x.fsm.Tool("big")
	before := len(xlog.String())
	fetch := x.blobs.Ensure(wantOf(tl))
	if f == nil {
		t.Fatal("no fetch started for a removed executable")
	}
	select {
	case <-fetch.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the fetch did not end")
	}
	if err := fetch.Err(); err != nil {
		t.Fatalf("fetch with the publisher's copy corrupted: %v", err)
	}
	if strings.Contains(xlog.String()[before:], "fetched executable "+d[:12]+" ("+strconv.Itoa(len(exe))+" bytes) from "+pub.Name()) {
		t.Fatalf("%s took the executable from its publisher, whose copy is corrupted", x.Name())
	}
	if b, _ := os.ReadFile(x.blobs.Store().Path(d)); !bytes.Equal(b, exe) {
		t.Fatalf("%s stored bytes that are not the executable", x.Name())
	}
	if !strings.Contains(xlog.String(), "refused executable "+d[:12]+" from "+pub.Name()) {
		t.Errorf("%s did not say it refused the publisher's copy:\n%s", x.Name(), xlog.String())
	}
	// A node joining now gets it too (never the corrupted copy).
	n4, _ := startBlobMember(t, "n4", root, n1.gossip.LocalAddr())
	waitFor(t, "the executable on n4", 20*time.Second, func() bool { return n4.blobs.Store().Has(d) })
	if b, _ := os.ReadFile(n4.blobs.Store().Path(d)); !bytes.Equal(b, exe) {
		t.Fatal("n4 stored bytes that are not the executable")
	}
	out, err := callTool(ctx, t, n4, "s4", "big")
	if err != nil || out != "fetched\n" {
		t.Fatalf("call on n4 = %q, %v", out, err)
	}
}

// A call whose executable cannot be fetched yet says so and names the
// node it waits for; once the bytes are back it runs.
func TestBlobs_CallWaitsThenSays(t *testing.T) {
	root := t.TempDir()
	n1, _ := startBlobMember(t, "n1", root)
	n2, _ := startBlobMember(t, "n2", root, n1.gossip.LocalAddr())
	waitFor(t, "two voters", 10*time.Second, func() bool { return len(voters(n1)) == 2 })
	exe := bigScript("waited", 4096)
	d := blobstore.Digest(exe)
	if err := put9(mount(t, n1.P9Addr()), "t/w.meta", 0o644, []byte(`{"description":"w"}`)); err != nil {
		t.Fatal(err)
	}
	if err := put9Exec(mount(t, n1.P9Addr()), "w", exe); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the executable on n2", 10*time.Second, func() bool { return n2.blobs.Store().Has(d) })
	// Gone from both stores: nobody can send it.
	n1.blobs.Store().Remove(d)
	n2.blobs.Store().Remove(d)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := callTool(ctx, t, n2, "s", "w")
	if err == nil || !strings.Contains(err.Error(), "not yet fetched from n1") {
		t.Fatalf("call without the executable anywhere: %v", err)
	}
	// Back on the publisher: the retrying fetch finds it.
	if _, _, err := n1.blobs.Store().Put(bytes.NewReader(exe), d, int64(len(exe)), 0); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	out, err := n2.Call(ctx2, "s", "a", "w", nil)
	if err != nil || string(out) != "waited\n" {
		t.Fatalf("call once the executable is back = %q, %v", out, err)
	}
}

// Blobs no tool or kept version refers to are removed after the grace
// period; those a tool or a kept version refers to stay.
func TestBlobs_Collect(t *testing.T) {
	root := t.TempDir()
	n1, _ := startBlobMember(t, "n1", root)
	f := mount(t, n1.P9Addr())
	keep, drop := bigScript("keep", 100), bigScript("drop", 100)
	for name, exe := range map[string][]byte{"keep": keep, "drop": drop} {
		if err := put9(f, "t/"+name+".meta", 0o644, []byte(`{"description":"x"}`)); err != nil {
			t.Fatal(err)
		}
		if err := put9Exec(f, name, exe); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Remove("t/drop.meta"); err != nil {
		t.Fatal(err)
	}
	// The withdrawn tool's earlier version still names it.
	now := time.Now()
	n1.blobs.Sweep(now)
	n1.blobs.Sweep(now.Add(n1.cfg.BlobGrace + time.Second))
	if !n1.blobs.Store().Has(blobstore.Digest(drop)) {
		t.Fatal("the executable of a kept version was removed")
	}
	// Publishing drop -keep-versions more times drops that version.
	for i := range n1.cfg.KeepVersions {
		if err := put9(f, "t/drop.meta", 0o644, []byte(fmt.Sprintf(`{"description":"x%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if n1.fsm.Referenced(blobstore.Digest(drop)) {
		t.Fatal("a dropped version's executable is still referenced")
	}
	now = time.Now()
	n1.blobs.Sweep(now)
	if !n1.blobs.Store().Has(blobstore.Digest(drop)) {
		t.Fatal("removed before the grace period")
	}
	n1.blobs.Sweep(now.Add(n1.cfg.BlobGrace + time.Second))
	if n1.blobs.Store().Has(blobstore.Digest(drop)) {
		t.Fatal("an unreferenced blob survived the grace period")
	}
	if !n1.blobs.Store().Has(blobstore.Digest(keep)) {
		t.Fatal("a referenced blob was removed")
	}
}

// An upload past -max-exec-size is refused as it streams, and the
// leader refuses a command naming a larger size than its own limit.
func TestBlobs_MaxExecSize(t *testing.T) {
	root := t.TempDir()
	cfg := Config{
		P9Anon:     trustedAnon,
		EncryptKey: testClusterKey,
		Name:       "n1", DataDir: filepath.Join(root, "n1"), GossipAddr: "127.0.0.1:0",
		P9Listener: listen(t), ClusterListener: listen(t), LogOutput: testWriter{t},
		MaxExecSize: 1 << 20,
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	f := mount(t, n.P9Addr())
	err = put9(f, "t/huge", 0o755, bigScript("huge", 2<<20))
	if err == nil || !strings.Contains(err.Error(), "file too long") {
		t.Fatalf("an upload over -max-exec-size: %v", err)
	}
	if _, ok := n.fsm.Tool("huge"); ok {
		t.Fatal("published all the same")
	}
	_, err = n.apply(raftfsm.CmdPutToolExec, raftfsm.PutToolExec{Owner: "n1", Origin: raftfsm.Origin9P, Name: "huge", ExecHash: blobstore.Digest([]byte("x")), Size: 2 << 20})
	if !errors.Is(err, raftfsm.ErrInvalid) || !strings.Contains(err.Error(), "-max-exec-size") {
		t.Fatalf("a command over the leader's limit: %v", err)
	}
}

// fetchRaw asks the node at addr for blob d over the cluster port, as
// fetchFrom does, and returns the bytes it sends, unchecked.
func fetchRaw(t *testing.T, n *Node, addr, d string) []byte {
	t.Helper()
	c, err := n.dialer.Dial(addr, clusterport.ProtoBlob, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, d+"\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	if answer, err := br.ReadByte(); err != nil || answer != blobs.Have {
		t.Fatalf("blob %s from %s: answer %#x, %v", d, addr, answer, err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, binary.BigEndian.Uint64(hdr[:]))
	if _, err := io.ReadFull(br, b); err != nil {
		t.Fatal(err)
	}
	return b
}
