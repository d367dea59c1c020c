package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// The executables' measurements start real node processes on loopback
// and move hundreds of MiB. CI runs TestE2E_Blobs_Large with a 32 MiB
// executable (seconds); the full measurements run only when asked:
//
//	TOOLNODE_BLOB_E2E=1 go test -run TestE2E_Blobs_Large -v -timeout 20m ./cmd/toolnode
//	TOOLNODE_BLOB_E2E=1 TOOLNODE_BASELINE_BIN=/path/to/old/toolnode \
//	    go test -run TestE2E_Blobs_PublishTime -v -timeout 30m ./cmd/toolnode
//
// (without -race: a race-enabled node is several times bigger and slower.)

func needBlobE2E(t *testing.T) {
	if os.Getenv("TOOLNODE_BLOB_E2E") == "" {
		t.Skip("set TOOLNODE_BLOB_E2E=1 to run (minutes; moves hundreds of MiB)")
	}
}

// rssKiB reads a process's VmRSS and VmHWM (KiB) from /proc.
func rssKiB(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}

// rssWatch samples the VmRSS of processes every 20 ms and keeps each
// one's largest growth over its value when the watch began. Only the
// sampling goroutine touches peak until end has waited for it.
type rssWatch struct {
	pids map[string]int
	base map[string]int64
	peak map[string]int64
	stop chan struct{}
	done chan struct{}
}

func watchRSS(nodes []*cnode) *rssWatch {
	w := &rssWatch{pids: map[string]int{}, base: map[string]int64{}, peak: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, n := range nodes {
		pid := n.p.cmd.Process.Pid
		w.pids[n.name] = pid
		w.base[n.name], _ = rssKiB(pid)
		w.peak[n.name] = w.base[n.name]
	}
	go func() {
		defer close(w.done)
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
			for name, pid := range w.pids {
				if r, _ := rssKiB(pid); r > w.peak[name] {
					w.peak[name] = r
				}
			}
		}
	}()
	return w
}

// end stops sampling and returns, per node, the growth of its RSS
// (largest sample, and VmHWM, over the RSS at the start) in MiB.
func (w *rssWatch) end() (sampled, hwm map[string]float64) {
	close(w.stop)
	<-w.done
	sampled, hwm = map[string]float64{}, map[string]float64{}
	for name, pid := range w.pids {
		_, h := rssKiB(pid)
		sampled[name] = float64(w.peak[name]-w.base[name]) / 1024
		hwm[name] = float64(h-w.base[name]) / 1024
	}
	return sampled, hwm
}

// blobScript is a shell script that prints word and exits, padded to size
// bytes after its exit.
func blobScript(word string, size int) []byte {
	b := []byte("#!/bin/sh\necho " + word + "\nexit 0\n")
	line := []byte("# padding padding padding padding padding padding padding padding\n")
	out := bytes.NewBuffer(make([]byte, 0, size+len(line)))
	out.Write(b)
	for out.Len() < size {
		out.Write(line)
	}
	return out.Bytes()[:size]
}

// put9Big writes a file of t/ through 9P in writes of the connection's
// message size.
func put9Big(n *cnode, path string, data []byte) error {
	c, err := dial9(n.e.p9, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.close()
	c.nc.SetDeadline(time.Now().Add(10 * time.Minute))
	fid, err := c.fsys.Create(path, plan9.OWRITE, 0o755)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	for off := 0; off < len(data); {
		k, err := fid.WriteAt(data[off:min(off+1<<20, len(data))], int64(off))
		if err != nil {
			fid.Close()
			return fmt.Errorf("write %s at %d: %w", path, off, err)
		}
		off += k
	}
	return fid.Close()
}

// put9Exec writes tool name's executable through n, then closes its live
// metadata again: one version, published at once (a lone executable
// waits 10 s for a .meta close, DESIGN §8).
func put9Exec(n *cnode, name string, exe []byte) error {
	if err := put9Big(n, "t/"+name, exe); err != nil {
		return err
	}
	meta, err := read9(n.e.p9, "t/"+name+".meta")
	if err != nil {
		return err
	}
	return put9Big(n, "t/"+name+".meta", []byte(meta))
}

// blobCluster starts three members from the binary at bin and waits
// until they form; it returns them and the leader.
func blobCluster(t *testing.T, bin string, extra ...string) ([]*cnode, *cnode) {
	t.Helper()
	saved := binPath
	binPath = bin
	defer func() { binPath = saved }()
	n1 := newCnode(t, "b1")
	n2 := newCnode(t, "b2").joining(n1)
	n3 := newCnode(t, "b3").joining(n1)
	nodes := []*cnode{n1, n2, n3}
	for _, n := range nodes {
		n.flags = append(n.flags, extra...)
	}
	n1.start(t)
	n2.launch(t)
	n3.launch(t)
	leader, _ := waitFormed(t, 60*time.Second, nodes...)
	for _, n := range nodes {
		mustAsk9(t, n, "session/new", "name=s"+n.name)
		mustAsk9(t, n, "session/s"+n.name+"/agent/new", "name=a")
	}
	return nodes, byName(nodes, leader)
}

// publishAndCall publishes tool name (metadata, then an executable of
// size bytes) through via, and returns how long after the executable's
// write began every node ran it.
func publishAndCall(t *testing.T, nodes []*cnode, via *cnode, name string, size int) (time.Duration, error) {
	t.Helper()
	exe := blobScript(name, size)
	if err := put9Big(via, "t/"+name+".meta", []byte(`{"description":"a large executable"}`)); err != nil {
		return 0, err
	}
	for _, n := range nodes {
		pollUntil(t, 30*time.Second, name+".meta on "+n.name, func() (bool, string) {
			_, err := ask9(n.e.p9, "session/s"+n.name+"/agent/a/ctl", "tool_load "+name, 10*time.Second)
			return err == nil, fmt.Sprint(err)
		})
	}
	start := time.Now()
	if err := put9Exec(via, name, exe); err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(5 * time.Minute)
			var last error
			for time.Now().Before(deadline) {
				out, err := ask9(n.e.p9, "session/s"+n.name+"/agent/a/call", name, 2*time.Minute)
				if err == nil && out == name+"\n" {
					return
				}
				last = fmt.Errorf("%q, %v", out, err)
				time.Sleep(20 * time.Millisecond)
			}
			errs <- fmt.Errorf("%s never ran %s: %v", n.name, name, last)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		return took, err
	}
	return took, nil
}

// A 200 MiB executable published through a node that is not the leader
// is callable on every node, and no node's RSS grows by more than 64 MiB
// meanwhile (issue 10).
func TestE2E_Blobs_Large(t *testing.T) {
	mib := 32 // in CI: enough that carrying it in the log would show
	if os.Getenv("TOOLNODE_BLOB_E2E") != "" {
		mib = 200
	}
	if v, err := strconv.Atoi(os.Getenv("TOOLNODE_BLOB_MIB")); err == nil && v > 0 {
		mib = v
	}
	nodes, leader := blobCluster(t, binPath)
	via := others(nodes, leader)[0]
	w := watchRSS(nodes)
	took, err := publishAndCall(t, nodes, via, "big", mib<<20)
	sampled, hwm := w.end()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d MiB published through %s (leader %s): callable on all 3 nodes %v after its write began", mib, via.name, leader.name, took.Round(time.Millisecond))
	names := []string{}
	for name := range sampled {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Logf("%s: RSS grew by %.1f MiB at most (sampled every 20 ms); VmHWM - RSS before = %.1f MiB", name, sampled[name], hwm[name])
		if sampled[name] > 64 || hwm[name] > 64 {
			t.Errorf("%s: RSS grew by %.1f MiB (VmHWM %.1f MiB over the start), over 64 MiB", name, sampled[name], hwm[name])
		}
	}
}

// Time from the start of an executable's write until every node runs it,
// for 1 and 16 MiB, through the leader and through a follower; with
// TOOLNODE_BASELINE_BIN, the same for that binary (an older toolnode) in
// the same run, alternating rounds.
func TestE2E_Blobs_PublishTime(t *testing.T) {
	needBlobE2E(t)
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("TOOLNODE_BLOB_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	type leg struct{ label, bin string }
	legs := []leg{{"new", binPath}}
	if b := os.Getenv("TOOLNODE_BASELINE_BIN"); b != "" {
		legs = append(legs, leg{"baseline", b})
	}
	type key struct {
		leg, via string
		size     int
	}
	results := map[key][]time.Duration{}
	rss := map[key]float64{}
	for _, l := range legs {
		nodes, leader := blobCluster(t, l.bin)
		follower := others(nodes, leader)[0]
		for r := 0; r < rounds; r++ {
			for _, size := range []int{1 << 20, 16 << 20} {
				for _, via := range []*cnode{leader, follower} {
					k := key{l.label, map[bool]string{true: "leader", false: "follower"}[via == leader], size}
					name := fmt.Sprintf("p%d_%s_%d", r, k.via, size>>20)
					w := watchRSS(nodes)
					took, err := publishAndCall(t, nodes, via, name, size)
					grown, _ := w.end()
					if err != nil {
						t.Logf("%s, %d MiB through the %s: %v", l.label, size>>20, k.via, err)
						continue
					}
					results[k] = append(results[k], took)
					for _, g := range grown {
						rss[k] = max(rss[k], g)
					}
				}
			}
		}
		for _, n := range nodes {
			r, _ := rssKiB(n.p.cmd.Process.Pid)
			t.Logf("%s: %s RSS at the end %.0f MiB", l.label, n.name, float64(r)/1024)
		}
	}
	var keys []key
	for k := range results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.size != b.size {
			return a.size < b.size
		}
		if a.via != b.via {
			return a.via < b.via
		}
		return a.leg < b.leg
	})
	for _, k := range keys {
		d := results[k]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("%2d MiB via %-8s %-8s median %v of %d (all %v); largest RSS growth of a node %.1f MiB", k.size>>20, k.via, k.leg, d[len(d)/2].Round(time.Millisecond), len(d), d, rss[k])
	}
}
