package raftfsm

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
)

// entrySep splits a fuzz input into log entries.
const entrySep = 0x1e

// FuzzApply applies arbitrary entries, after a fixed history, to two
// replicas. Nothing may panic (the apply functions are called without
// Apply's recover, so a bug is a crasher); an entry that fails leaves the
// state unchanged; an entry Validate accepts is never skipped as
// undecodable; both replicas end identical; the blob store stays
// consistent with the tools that refer to it.
//
// Under plain go test it runs the seed corpus; for a longer run:
//
//	go test ./raftfsm -run '^$' -fuzz FuzzApply -fuzztime 5m
func FuzzApply(f *testing.F) {
	for _, e := range validEntries() {
		f.Add(e)
	}
	var all [][]byte
	for _, name := range sortedKeys(validEntries()) {
		all = append(all, validEntries()[name])
	}
	f.Add(bytes.Join(all, []byte{entrySep}))
	f.Add([]byte{})
	f.Add([]byte{99, '{', '}'})
	f.Add([]byte{byte(CmdLoad), '{'})
	f.Add([]byte{byte(CmdPublishTools), 'n', 'u', 'l', 'l'})
	f.Add([]byte{byte(CmdCreateAgent), '{', '"', 's', 'e', 's', 's', 'i', 'o', 'n', '"', ':', '"', 'd', 'e', 'v', '"', '}'})

	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := New(nil), New(nil)
		a.SetLogf(func(string, ...any) {})
		b.SetLogf(func(string, ...any) {})
		history := fuzzHistory()
		index := uint64(0)
		for _, e := range history {
			index++
			l := &raft.Log{Index: index, Type: raft.LogCommand, Data: e}
			a.Apply(l)
			b.Apply(l)
		}
		for _, e := range bytes.Split(data, []byte{entrySep}) {
			index++
			l := &raft.Log{Index: index, Type: raft.LogCommand, Data: e}
			before := snapshotBytes(t, a)
			// Straight through the apply function: a panic is a crasher.
			if len(e) > 0 {
				if fn, ok := applyTable[CommandType(e[0])]; ok {
					var ev []Event
					fn(a.st.clone(), index, e[1:], &ev)
				}
			}
			r := a.Apply(l)
			b.Apply(l)
			if err, isErr := r.(error); isErr {
				after := snapshotBytes(t, a)
				after = bytes.Replace(after, appliedField(index), appliedField(index-1), 1)
				if !bytes.Equal(before, after) {
					t.Fatalf("a failed entry (%v) changed the state", err)
				}
				var sk *skipped
				if Validate(e) == nil && errors.As(err, &sk) {
					t.Fatalf("a valid entry was skipped: %v", err)
				}
			}
			checkBlobs(t, a)
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("replicas diverged")
		}
	})
}

// fuzzHistory is a small state for fuzzed entries to act on.
func fuzzHistory() [][]byte {
	v := validEntries()
	return [][]byte{v["publish-tools"], v["publish-profiles"], v["create-session"], v["create-agent"], v["load"], v["put-tool-meta-by"]}
}

func appliedField(i uint64) []byte {
	return []byte(`"applied":` + strconv.FormatUint(i, 10))
}

// checkBlobs: every tool's executable has a well-formed digest, and so
// has every kept version's; each history is newest first, within the
// bound but for its live version, with at most one live version, the one
// its published tool is at.
func checkBlobs(t *testing.T, f *FSM) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, tl := range f.st.Tools {
		if tl.ExecHash != "" && !isHexHash(tl.ExecHash) {
			t.Fatalf("tool %q has a bad digest %q", tl.Name, tl.ExecHash)
		}
	}
	for name, h := range f.st.Versions {
		lives, prev := 0, h.Last+1
		for i, v := range h.Versions {
			if v.ExecHash != "" && !isHexHash(v.ExecHash) {
				t.Fatalf("version %d of %q has a bad digest %q", v.Version, name, v.ExecHash)
			}
			if v.Version >= prev {
				t.Fatalf("the versions of %q are not newest first: %s", name, states(h))
			}
			prev = v.Version
			if v.State == StateLive {
				lives++
				if tl := f.st.Tools[name]; tl == nil || tl.Version != v.Version {
					t.Fatalf("%q: live version %d, tool %+v", name, v.Version, tl)
				}
			} else if i >= f.st.keep() {
				t.Fatalf("%q keeps %d versions, over the bound %d: %s", name, len(h.Versions), f.st.keep(), states(h))
			}
		}
		if lives > 1 {
			t.Fatalf("%q has %d live versions", name, lives)
		}
	}
}
