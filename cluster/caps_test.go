package cluster

import (
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// bare is a Cluster without memberlist, for the table and wire logic.
func bare(name string) *Cluster {
	return newCluster(name, Meta{}, log.New(io.Discard, "", 0))
}

// alive records name as a live member of c.
func alive(c *Cluster, name string) {
	c.mu.Lock()
	c.members[name] = tracked{m: Member{Name: name, State: "alive"}}
	c.mu.Unlock()
}

// deliver hands every broadcast from queued to each of to, as gossip
// would; it returns how many messages went.
func deliver(from *Cluster, to ...*Cluster) int {
	n := 0
	for _, m := range from.bq.GetBroadcasts(3, 1400) {
		n++
		for _, c := range to {
			c.notifyMsg(m)
		}
	}
	return n
}

func we(tool string, version uint64, variant int, gone bool) wireEntry {
	return wireEntry{tool, entry{version: version, variant: variant, gone: gone}}
}

func msg(kind byte, node string, entries ...wireEntry) []byte {
	return appendGroup([]byte{kind}, node, entries)
}

func capsOf(t *testing.T, c *Cluster, node string) Caps {
	t.Helper()
	caps, _ := c.Capabilities(node)
	return caps
}

func TestCaps_MergeVersionsAndTombstones(t *testing.T) {
	c := bare("me")
	alive(c, "x")
	c.notifyMsg(msg(msgDelta, "x", we("grep", 10, -1, false), we("ffmpeg", 10, 2, false)))
	if got := capsOf(t, c, "x"); !maps.Equal(got, Caps{"grep": -1, "ffmpeg": 2}) {
		t.Fatalf("after the first delta: %v", got)
	}
	// Out of order: version 12 (ffmpeg removed) arrives before 11 (variant 1).
	c.notifyMsg(msg(msgDelta, "x", we("ffmpeg", 12, 0, true)))
	c.notifyMsg(msg(msgDelta, "x", we("ffmpeg", 11, 1, false), we("grep", 9, 0, true)))
	if got := capsOf(t, c, "x"); !maps.Equal(got, Caps{"grep": -1}) {
		t.Fatalf("after out-of-order deltas: %v", got)
	}
	if got := c.Capable("ffmpeg"); len(got) != 0 {
		t.Fatalf("Capable(ffmpeg) = %v, want none: the tombstone is newer", got)
	}
	// A newer entry brings it back.
	c.notifyMsg(msg(msgDelta, "x", we("ffmpeg", 13, 0, false)))
	if got := c.Capable("ffmpeg"); len(got) != 1 || got[0].Node != "x" || got[0].Variant != 0 {
		t.Fatalf("Capable(ffmpeg) = %v", got)
	}
	// Push/pull of an older table changes nothing.
	c.mergeRemoteState(msg(msgState, "x", we("ffmpeg", 12, 0, true), we("grep", 1, 5, false)))
	if got := capsOf(t, c, "x"); !maps.Equal(got, Caps{"grep": -1, "ffmpeg": 0}) {
		t.Fatalf("after an old push/pull: %v", got)
	}
	// Equal versions with different facts: every node picks the same.
	a, b := bare("a"), bare("b")
	e1, e2 := we("t", 5, 1, false), we("t", 5, 3, false)
	a.notifyMsg(msg(msgDelta, "x", e1))
	a.notifyMsg(msg(msgDelta, "x", e2))
	b.notifyMsg(msg(msgDelta, "x", e2))
	b.notifyMsg(msg(msgDelta, "x", e1))
	if ca, cb := capsOf(t, a, "x"), capsOf(t, b, "x"); !maps.Equal(ca, cb) {
		t.Fatalf("ties resolved differently: %v and %v", ca, cb)
	}
}

func TestCaps_SetCapabilitiesDiff(t *testing.T) {
	c := bare("me")
	c.SetCapabilities(Caps{"a": -1, "b": 0, "c": 1})
	if n := c.bq.NumQueued(); n != 1 {
		t.Fatalf("queued %d broadcasts, want 1", n)
	}
	c.bq.Reset()
	v0 := c.lastVersion
	c.SetCapabilities(Caps{"a": -1, "b": 0, "c": 1})
	if c.bq.NumQueued() != 0 || c.lastVersion != v0 {
		t.Fatal("an unchanged set was announced")
	}
	c.SetCapabilities(Caps{"a": -1, "b": 2, "d": 0}) // b changed, c gone, d new
	_, groups, err := decode(c.bq.GetBroadcasts(3, 1400)[0])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]entry{}
	for _, w := range groups[0].entries {
		got[w.tool] = w.e
		if w.e.version <= v0 {
			t.Fatalf("entry %s has version %d, not above %d", w.tool, w.e.version, v0)
		}
	}
	if len(got) != 3 || got["b"].variant != 2 || !got["c"].gone || got["d"].gone {
		t.Fatalf("delta = %+v", got)
	}
	if caps := capsOf(t, c, "me"); !maps.Equal(caps, Caps{"a": -1, "b": 2, "d": 0}) {
		t.Fatalf("own caps = %v", caps)
	}
}

// An entry about this node that says what is not so (from an earlier run
// of it) is answered with a newer one.
func TestCaps_StaleNewsAboutSelfRefuted(t *testing.T) {
	me, other := bare("me"), bare("other")
	me.SetCapabilities(Caps{"kept": 1})
	me.bq.Reset()
	future := uint64(time.Now().Add(time.Hour).UnixNano())
	stale := msg(msgState, "me", we("kept", future, 1, false), we("removed", future, 0, false), we("old", future, 0, true))
	other.mergeRemoteState(stale)
	me.mergeRemoteState(stale)
	if caps := capsOf(t, me, "me"); !maps.Equal(caps, Caps{"kept": 1}) {
		t.Fatalf("own caps after stale news = %v", caps)
	}
	if n := deliver(me, other); n != 1 {
		t.Fatalf("refutation took %d messages, want 1", n)
	}
	if caps := capsOf(t, other, "me"); !maps.Equal(caps, Caps{"kept": 1}) {
		t.Fatalf("the other's view after the refutation = %v", caps)
	}
	// Afterwards this node's versions keep rising past what it saw.
	me.SetCapabilities(Caps{"kept": 2})
	deliver(me, other)
	if caps := capsOf(t, other, "me"); caps["kept"] != 2 {
		t.Fatalf("a change after the refutation was lost: %v", caps)
	}
}

// Gossip without a network: deltas relayed by a node they taught, and
// push/pull of whole tables.
func TestCaps_RelayAndPushPull(t *testing.T) {
	a, b, c := bare("a"), bare("b"), bare("c")
	for _, n := range []*Cluster{a, b, c} {
		alive(n, "a")
		alive(n, "b")
		alive(n, "c")
	}
	a.SetCapabilities(Caps{"x": 0})
	deliver(a, b) // only b hears a
	if deliver(b, c) == 0 {
		t.Fatal("b did not relay what a taught it")
	}
	if got := c.Capable("x"); len(got) != 1 || got[0].Node != "a" {
		t.Fatalf("c: Capable(x) = %v", got)
	}
	if deliver(c, a, b) == 0 {
		t.Fatal("c did not relay")
	}
	// Nothing new for anyone: the relaying stops once the queues drain.
	for range 8 {
		deliver(a, b, c)
		deliver(b, a, c)
		deliver(c, a, b)
	}
	if a.bq.NumQueued()+b.bq.NumQueued()+c.bq.NumQueued() != 0 {
		t.Fatal("broadcasts still queued")
	}
	d := bare("d")
	alive(d, "a")
	alive(d, "b")
	d.mergeRemoteState(b.localState())
	if got := d.Capable("x"); len(got) != 1 || got[0].Node != "a" {
		t.Fatalf("push/pull: Capable(x) = %v", got)
	}
}

func TestCaps_TombstonesExpire(t *testing.T) {
	c := bare("me")
	c.notifyMsg(msg(msgDelta, "x", we("t", 1, 0, true), we("u", 1, 0, false)))
	c.notifyMsg(msg(msgDelta, "y", we("t", 1, 0, true)))
	c.mu.Lock()
	c.gcLocked(time.Now().Add(TombstoneTTL + time.Minute).UnixNano())
	_, tKept := c.caps["x"]["t"]
	_, uKept := c.caps["x"]["u"]
	_, yKept := c.caps["y"]
	c.mu.Unlock()
	if tKept || !uKept || yKept {
		t.Fatalf("after expiry: tombstone kept %v, entry kept %v, empty table kept %v", tKept, uKept, yKept)
	}
}

func TestCaps_Wire(t *testing.T) {
	var entries []wireEntry
	want := Caps{}
	for i := range 10000 {
		tool := fmt.Sprintf("tool-%05d", i)
		entries = append(entries, we(tool, uint64(time.Now().UnixNano()), i%7-1, i%13 == 0))
		if i%13 != 0 {
			want[tool] = i%7 - 1
		}
	}
	msgs, ok := splitDelta("node-1", entries, maxBroadcast)
	if !ok {
		t.Fatal("split failed")
	}
	c := bare("me")
	for _, m := range msgs {
		if len(m) > maxBroadcast {
			t.Fatalf("a message of %d bytes", len(m))
		}
		c.notifyMsg(m)
	}
	if got := capsOf(t, c, "node-1"); !maps.Equal(got, want) {
		t.Fatalf("decoded %d tools, want %d", len(got), len(want))
	}
	t.Logf("10,000 entries: %d messages", len(msgs))
	if _, ok := splitDelta("n", []wireEntry{we(string(make([]byte, 2000)), 1, 0, false)}, maxBroadcast); ok {
		t.Fatal("an entry larger than a message was split")
	}
	for _, bad := range [][]byte{nil, {0}, {9}, {msgDelta, 1}, {msgDelta, 0, 0}, {msgState, 1, 'n', 200, 1}, {msgDelta, 1, 'n', 1, 1, 't', 1, 0, 4}} {
		if _, _, err := decode(bad); err == nil {
			t.Fatalf("decode(%v) accepted", bad)
		}
	}
}

// A node that joins, or comes back from the dead, is sent this node's
// entries directly.
func TestCaps_JoinTriggersDirectSend(t *testing.T) {
	c := bare("me")
	ed := &eventDelegate{c: c}
	ed.send(NodeJoin, &memberlist.Node{Name: "x", Addr: net.IPv4(127, 0, 0, 1), Port: 7946})
	if _, targets := c.syncTargets(); len(targets) != 0 {
		t.Fatal("with nothing to tell, a join asked for a send")
	}
	c.SetCapabilities(Caps{"t": 0}) // small: gossiped, no direct send
	if _, targets := c.syncTargets(); len(targets) != 0 {
		t.Fatal("a small change asked for a direct send")
	}
	y := &memberlist.Node{Name: "y", Addr: net.IPv4(127, 0, 0, 2), Port: 7946}
	ed.send(NodeJoin, y)
	if _, targets := c.syncTargets(); len(targets) != 0 {
		t.Fatal("a first join asked for a send: its push/pull brings the table")
	}
	ed.send(NodeLeave, y) // y dies (a partition) ...
	ed.send(NodeJoin, y)  // ... and comes back: it may have missed deltas
	ed.send(NodeUpdate, &memberlist.Node{Name: "x", Addr: net.IPv4(127, 0, 0, 1), Port: 7946})
	m, targets := c.syncTargets()
	if len(targets) != 1 || targets[0].Name != "y" || targets[0].Address() != "127.0.0.2:7946" {
		t.Fatalf("targets = %v", targets)
	}
	if _, groups, err := decode(m); err != nil || len(groups) != 1 || groups[0].node != "me" || len(groups[0].entries) != 1 {
		t.Fatalf("sent %v (%v)", groups, err)
	}
	c.SetCapabilities(manyTools(1000, func(int) int { return 0 })) // large: sent to every live member
	if _, targets := c.syncTargets(); len(targets) != 2 {
		t.Fatalf("a large change is sent to %d members, want 2", len(targets))
	}
}

func FuzzNotifyMsg(f *testing.F) {
	f.Add(msg(msgDelta, "x", we("grep", 10, -1, false), we("ls", 3, 0, true)))
	f.Add(msg(msgState, "me", we("t", 1<<62, 4, false)))
	f.Add([]byte{msgState, 1, 'n', 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := bare("me")
		c.SetCapabilities(Caps{"t": 1})
		c.notifyMsg(b)
		c.mergeRemoteState(b)
		if caps := capsOf(t, c, "me"); !maps.Equal(caps, Caps{"t": 1}) {
			t.Fatalf("own caps changed to %v", caps)
		}
		if _, _, err := decode(c.localState()); err != nil {
			t.Fatalf("own state does not decode: %v", err)
		}
	})
}

// --- with memberlist, over loopback ---

// startMany starts n members named n0, n1, … all joined to n0, and waits
// until each sees all alive.
func startMany(t testing.TB, n int) []*Cluster {
	t.Helper()
	cs := make([]*Cluster, n)
	for i := range cs {
		cs[i] = start(t, fmt.Sprintf("n%d", i), nil)
		if i > 0 {
			if _, err := cs[i].Join([]string{cs[0].LocalAddr()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "all members alive everywhere", func() bool {
		for _, c := range cs {
			if aliveMembers(c) != n {
				return false
			}
		}
		return true
	})
	return cs
}

func aliveMembers(c *Cluster) int {
	n := 0
	for _, m := range c.Members() {
		if m.State == "alive" {
			n++
		}
	}
	return n
}

// propagate sets caps on from and waits, polling within a deadline, until
// every one of to reports exactly caps for it; it logs how long that took.
// How fast a change spreads is measured by BenchmarkCapsPropagation, not
// asserted here: gossip rounds are half a second, and a loaded machine moves a
// change by a round or two.
func propagate(t testing.TB, what string, caps Caps, from *Cluster, to []*Cluster) time.Duration {
	t.Helper()
	d := reach(t, what, caps, from, to)
	t.Logf("%s: reached %d nodes in %v", what, len(to), d.Round(time.Millisecond))
	return d
}

// reach is propagate without its log line.
func reach(t testing.TB, what string, caps Caps, from *Cluster, to []*Cluster) time.Duration {
	t.Helper()
	t0 := time.Now()
	from.SetCapabilities(caps)
	poll := 2 * time.Millisecond
	if len(caps) > 1000 {
		poll = 20 * time.Millisecond // copying 10,000 entries is not free
	}
	var lag string
	return pollUntil(t, t0, poll, func() bool {
		for _, c := range to {
			if got, _ := c.Capabilities(from.LocalName()); !maps.Equal(got, caps) {
				lag = fmt.Sprintf("%s: %s still sees %d tools of %s, want %d", what, c.LocalName(), len(got), from.LocalName(), len(caps))
				return false
			}
		}
		return true
	}, func() string { return lag })
}

// pollUntil checks cond every poll until it holds, for at most 10 s from
// t0 (then it fails with why()), and returns the time since t0.
func pollUntil(t testing.TB, t0 time.Time, poll time.Duration, cond func() bool, why func() string) time.Duration {
	t.Helper()
	for !cond() {
		if time.Since(t0) > 10*time.Second {
			t.Fatal(why())
		}
		time.Sleep(poll)
	}
	return time.Since(t0)
}

func manyTools(n int, variant func(int) int) Caps {
	caps := Caps{}
	for i := range n {
		caps[fmt.Sprintf("tool-%05d", i)] = variant(i)
	}
	return caps
}

func TestCaps_PropagationFiveNodes(t *testing.T) {
	t.Parallel()
	cs := startMany(t, 5)
	src, others := cs[2], append(append([]*Cluster{}, cs[:2]...), cs[3:]...)
	propagate(t, "two tools added", Caps{"grep": -1, "ffmpeg": 2}, src, others)
	propagate(t, "a variant changed", Caps{"grep": -1, "ffmpeg": 0}, src, others)
	propagate(t, "a tool removed", Caps{"grep": -1}, src, others)
	// The largest change still gossiped (maxBroadcastMsgs messages, one a
	// gossip packet: up to a round's wait and two rounds) ...
	propagate(t, "100 tools added (gossip)", manyTools(100, func(i int) int { return i%3 - 1 }), src, others)
	// ... and a larger one, sent directly.
	propagate(t, "1,000 tools added (direct)", manyTools(1000, func(i int) int { return i % 2 }), src, others)
	for _, c := range cs {
		c.SetCapabilities(Caps{"grep": -1})
	}
	waitFor(t, "grep on all five everywhere", func() bool {
		for _, c := range cs {
			if len(c.Capable("grep")) != 5 {
				return false
			}
		}
		return true
	})
	// A node leaving is dropped at once by those that hear of it.
	if err := cs[4].Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n4 gone from Capable", func() bool {
		for _, c := range cs[:4] {
			for _, cap := range c.Capable("grep") {
				if cap.Node == "n4" {
					return false
				}
			}
		}
		return true
	})
}

func TestCaps_JoinerLearnsByPushPull(t *testing.T) {
	t.Parallel()
	cs := startMany(t, 2)
	cs[0].SetCapabilities(Caps{"grep": -1})
	cs[1].SetCapabilities(Caps{"ffmpeg": 1, "grep": 0})
	waitFor(t, "n0 to know n1's tools", func() bool { return len(cs[0].Capable("grep")) == 2 })
	late := start(t, "late", nil)
	late.SetCapabilities(Caps{"jq": -1})
	t0 := time.Now()
	if _, err := late.Join([]string{cs[0].LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	// Join's push/pull with n0 has brought n0's whole table.
	for _, want := range []struct {
		node string
		caps Caps
	}{{"n0", Caps{"grep": -1}}, {"n1", Caps{"ffmpeg": 1, "grep": 0}}} {
		if got, _ := late.Capabilities(want.node); !maps.Equal(got, want.caps) {
			t.Fatalf("right after joining, late knows %s can run %v, want %v", want.node, got, want.caps)
		}
	}
	waitFor(t, "everyone to know of late's jq", func() bool {
		return len(cs[0].Capable("jq")) == 1 && len(cs[1].Capable("jq")) == 1
	})
	waitFor(t, "late to list n1 as capable", func() bool { return len(late.Capable("ffmpeg")) == 1 })
	t.Logf("a joining node learned the others' tools, and they its, in %v", time.Since(t0).Round(time.Millisecond))
}

func TestCaps_DeadNodeNeverChosen(t *testing.T) {
	t.Parallel()
	cs := startMany(t, 3)
	for _, c := range cs {
		c.SetCapabilities(Caps{"grep": -1})
	}
	waitFor(t, "grep on all three everywhere", func() bool {
		for _, c := range cs {
			if len(c.Capable("grep")) != 3 {
				return false
			}
		}
		return true
	})
	cs[2].Shutdown() // a crash
	t0 := time.Now()
	waitForWithin(t, "the survivors to call n2 dead", deadWithin, func() bool {
		dead := 0
		for _, c := range cs[:2] {
			deadHere := false
			for _, m := range c.Members() {
				deadHere = deadHere || m.Name == "n2" && m.State == "dead"
			}
			listed := false
			for _, cap := range c.Capable("grep") {
				listed = listed || cap.Node == "n2"
			}
			if deadHere && listed {
				t.Fatalf("%s calls n2 dead but lists it as capable", c.LocalName())
			}
			if deadHere {
				dead++
			}
		}
		return dead == 2
	})
	t.Logf("n2 dropped from Capable on both survivors %v after its crash", time.Since(t0).Round(time.Millisecond))
	for _, c := range cs[:2] {
		if got := c.Capable("grep"); len(got) != 2 || got[0].Node != "n0" || got[1].Node != "n1" {
			t.Fatalf("%s: Capable(grep) = %+v", c.LocalName(), got)
		}
	}
}

func TestCaps_TenThousandTools(t *testing.T) {
	t.Parallel()
	cs := startMany(t, 3)
	src, others := cs[0], cs[1:]
	big := manyTools(10000, func(i int) int { return i%4 - 1 })
	// A first set this large may take push/pull; it is sent directly, and
	// only the time is logged, as it depends on the machine's load.
	propagate(t, "10,000 tools added", big, src, others)
	one := maps.Clone(big)
	one["tool-04242"] = 7
	propagate(t, "one of 10,000 changed", one, src, others)

	late := start(t, "late", nil)
	t0 := time.Now()
	if _, err := late.Join([]string{cs[1].LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "late to know the 10,000 tools", func() bool {
		got, _ := late.Capabilities(src.LocalName())
		return maps.Equal(got, one)
	})
	t.Logf("a joining node learned 10,000 tools in %v", time.Since(t0).Round(time.Millisecond))

	// A joining node with 10,000 tools of its own.
	own := manyTools(10000, func(int) int { return -1 })
	late2 := start(t, "late2", nil)
	late2.SetCapabilities(own)
	t0 = time.Now()
	if _, err := late2.Join([]string{cs[2].LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "everyone to know late2's 10,000 tools", func() bool {
		for _, c := range append(cs, late) {
			if got, _ := c.Capabilities("late2"); len(got) != len(own) {
				return false
			}
		}
		return true
	})
	t.Logf("a node joining with 10,000 tools was known to all in %v", time.Since(t0).Round(time.Millisecond))

	propagate(t, "10,000 tools removed", Caps{}, src, append(others, late, late2))
}

// BenchmarkCapsPropagation measures how long a change of one node's
// capabilities takes to reach the four others of a five-node cluster on
// loopback, beside memberlist's own spread of a change of the node's
// metadata (UpdateNode, gossiped as an alive message) in the same
// iterations: each iteration makes a metadata change, then each
// capability change in turn. It reports each leg's milliseconds and its
// ratio to the metadata's. Gossip rounds are a second, so the legs are
// multiples of a round; run with -benchtime 10x or more.
//
//	go test -run '^$' -bench CapsPropagation -benchtime 10x ./cluster
func BenchmarkCapsPropagation(b *testing.B) {
	cs := startMany(b, 5)
	src, others := cs[2], append(append([]*Cluster{}, cs[:2]...), cs[3:]...)
	type leg struct {
		name string
		caps func(i int) Caps
		d    time.Duration
	}
	legs := []*leg{
		{name: "tools-2", caps: func(i int) Caps { return Caps{"grep": -1, "ffmpeg": i % 3} }},
		{name: "tools-100", caps: func(i int) Caps { return manyTools(100, func(k int) int { return (k+i)%3 - 1 }) }},
		{name: "tools-1000", caps: func(i int) Caps { return manyTools(1000, func(k int) int { return (k + i) % 2 }) }},
	}
	var meta time.Duration
	b.ResetTimer()
	for i := range b.N {
		// memberlist's own: the node's metadata, seen by every other.
		t0 := time.Now()
		want := Meta{Tools: 1000 + i}
		if err := src.SetMeta(want); err != nil {
			b.Fatal(err)
		}
		meta += pollUntil(b, t0, 2*time.Millisecond, func() bool {
			for _, c := range others {
				seen := false
				for _, m := range c.Members() {
					if m.Name == src.LocalName() && m.Meta.Tools == want.Tools {
						seen = true
					}
				}
				if !seen {
					return false
				}
			}
			return true
		}, func() string { return "the metadata change not everywhere within 10s" })
		for _, l := range legs {
			l.d += reach(b, l.name, l.caps(i), src, others)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(meta.Microseconds())/n/1000, "meta-ms")
	for _, l := range legs {
		b.ReportMetric(float64(l.d.Microseconds())/n/1000, l.name+"-ms")
		b.ReportMetric(float64(l.d)/float64(meta), l.name+"/meta")
	}
}
