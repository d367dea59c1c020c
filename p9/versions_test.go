package p9

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// versionFake is tokenFake with v/: tool "echo" at three versions, the
// second withdrawn.
type versionFake struct {
	*tokenFake
	vmu       sync.Mutex
	versions  map[string][]VersionEntry // newest first
	metas     map[uint64][]byte
	exes      map[uint64][]byte
	rollbacks []string
}

var _ Versions = (*versionFake)(nil)

func newVersionFake() *versionFake {
	t0 := time.Date(2026, 12, 1, 19, 3, 0, 0, time.UTC)
	d := strings.Repeat("ab", 32)
	return &versionFake{
		tokenFake: newTokenFake(),
		versions: map[string][]VersionEntry{"echo": {
			{Version: 3, State: "live", Publisher: "alice", Time: t0.Add(2 * time.Minute), HasMeta: true},
			{Version: 2, State: "withdrawn", Publisher: "bob", Time: t0.Add(time.Minute)},
			{Version: 1, State: "old", Publisher: "node:n1", Time: t0, Digest: d, Size: 14, HasMeta: true, Signer: "ci"},
		}},
		metas: map[uint64][]byte{3: []byte(`{"description":"three"}`), 1: []byte(`{"description":"one"}`)},
		exes:  map[uint64][]byte{1: []byte("#!/bin/sh\ncat\n")},
	}
}

func (f *versionFake) VersionedTools() []string { return []string{"echo"} }

func (f *versionFake) ToolVersions(name string) ([]VersionEntry, bool) {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	es, ok := f.versions[name]
	return slices.Clone(es), ok
}

func (f *versionFake) VersionMeta(name string, v uint64) ([]byte, bool) {
	m, ok := f.metas[v]
	return m, ok && name == "echo"
}

func (f *versionFake) VersionExecutable(name string, v uint64) (Executable, bool) {
	b, ok := f.exes[v]
	if !ok || name != "echo" {
		return Executable{}, false
	}
	return Executable{Size: int64(len(b)), Open: func() (ExecReader, error) { return nopCloser{bytes.NewReader(b)}, nil }}, true
}

func (f *versionFake) Rollback(name string, v uint64) (uint64, error) {
	f.vmu.Lock()
	defer f.vmu.Unlock()
	es := f.versions[name]
	for _, e := range es {
		if e.Version == v && e.HasMeta {
			n := es[0].Version + 1
			es[0].State = "old"
			f.versions[name] = append([]VersionEntry{{Version: n, State: "live", Publisher: "p", HasMeta: true}}, es...)
			f.rollbacks = append(f.rollbacks, fmt.Sprint(name, " ", v))
			return n, nil
		}
	}
	return 0, fmt.Errorf("invalid rollback: tool %q keeps no version %d", name, v)
}

// v/ through the independent 9fans client: the listings, idx, a
// version's metadata and executable, and rollback in ctl.
func TestVersions_Tree(t *testing.T) {
	b := newVersionFake()
	_, addr := startServer(t, b, Options{Attach: b.attach})
	fs, err := mountAs(t, addr, "tok-p")
	if err != nil {
		t.Fatal(err)
	}
	names := func(path string) []string {
		t.Helper()
		ds, err := dirList(fs, path)
		if err != nil {
			t.Fatalf("ls %s: %v", path, err)
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.Name)
		}
		return out
	}
	if got := names("v"); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("ls v = %v", got)
	}
	if got, want := names("v/echo"), []string{"1", "1.meta", "3.meta", "ctl", "idx"}; !slices.Equal(got, want) {
		t.Fatalf("ls v/echo = %v, want %v", got, want)
	}
	idx := readFile(t, fs, "v/echo/idx")
	want := "3 live alice 2026-12-01T19:05:00Z - -\n" +
		"2 withdrawn bob 2026-12-01T19:04:00Z - -\n" +
		"1 old node:n1 2026-12-01T19:03:00Z " + strings.Repeat("ab", 32) + " ci\n"
	if idx != want {
		t.Fatalf("v/echo/idx =\n%s\nwant\n%s", idx, want)
	}
	if got := readFile(t, fs, "v/echo/1.meta"); got != "{\"description\":\"one\"}\n" {
		t.Fatalf("v/echo/1.meta = %q", got)
	}
	if got := readFile(t, fs, "v/echo/1"); got != "#!/bin/sh\ncat\n" {
		t.Fatalf("v/echo/1 = %q", got)
	}
	st, err := fs.Stat("v/echo/1.meta")
	if err != nil || st.Length != uint64(len("{\"description\":\"one\"}\n")) || st.Mtime != uint32(time.Date(2026, 12, 1, 19, 3, 0, 0, time.UTC).Unix()) {
		t.Fatalf("stat v/echo/1.meta = %+v, %v", st, err)
	}
	for _, missing := range []string{"v/nope", "v/echo/2.meta", "v/echo/2", "v/echo/3", "v/echo/9", "v/echo/01", "v/echo/x"} {
		if _, err := fs.Stat(missing); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("stat %s: %v, want not found", missing, err)
		}
	}
	if err := ctlWrite(fs, "v/echo/ctl", "rollback 1\n"); err != nil {
		t.Fatalf("rollback 1: %v", err)
	}
	if !strings.HasPrefix(readFile(t, fs, "v/echo/idx"), "4 live p ") {
		t.Fatalf("idx after the rollback:\n%s", readFile(t, fs, "v/echo/idx"))
	}
	for line, msg := range map[string]string{
		"rollback 9":   `invalid rollback: tool "echo" keeps no version 9`,
		"rollback two": `invalid version "two"`,
		"rollback":     `invalid command "rollback"`,
		"promote":      `this node takes no canaries`,
		"frob":         `invalid command "frob": v/NAME/ctl takes "rollback VERSION"`,
	} {
		wantErr(t, ctlWrite(fs, "v/echo/ctl", line), msg)
	}
	if len(b.rollbacks) != 1 {
		t.Fatalf("rollbacks = %v", b.rollbacks)
	}
	// Read-only files stay read-only.
	if _, err := fs.Open("v/echo/idx", plan9.OWRITE); err == nil {
		t.Fatal("v/echo/idx opened for writing")
	}
	if err := fs.Remove("v/echo/1.meta"); err == nil {
		t.Fatal("rm v/echo/1.meta succeeded")
	}
}

// ctl needs the publish role; reading v/ needs read. The control: with
// the publish role the same write rolls back.
func TestVersions_CtlNeedsPublish(t *testing.T) {
	b := newVersionFake()
	_, addr := startServer(t, b, Options{Attach: b.attach})
	for _, tok := range []string{"tok-r", "tok-c"} {
		fs, err := mountAs(t, addr, tok)
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, fs, "v/echo/idx"); !strings.HasPrefix(got, "3 live") {
			t.Fatalf("%s reads idx %q", tok, got)
		}
		wantErr(t, ctlWrite(fs, "v/echo/ctl", "rollback 1"), "permission denied: needs role publish")
	}
	if len(b.rollbacks) != 0 {
		t.Fatalf("a refused write rolled back: %v", b.rollbacks)
	}
	fs, err := mountAs(t, addr, "tok-p")
	if err != nil {
		t.Fatal(err)
	}
	if err := ctlWrite(fs, "v/echo/ctl", "rollback 1"); err != nil || len(b.rollbacks) != 1 {
		t.Fatalf("the publish role's rollback: %v, %v", err, b.rollbacks)
	}
}

// A Backend without Versions serves v/ empty.
func TestVersions_NoBackend(t *testing.T) {
	_, addr := startServer(t, newFake(), Options{})
	fs := mount(t, addr)
	ds, err := dirList(fs, "v")
	if err != nil || len(ds) != 0 {
		t.Fatalf("ls v = %v, %v", ds, err)
	}
	if _, err := fs.Stat("v/echo"); err == nil {
		t.Fatal("v/echo exists without Versions")
	}
}

// ctlWrite writes one command to a write-only file.
func ctlWrite(fs *client.Fsys, path, text string) error {
	fid, err := fs.Open(path, plan9.OWRITE)
	if err != nil {
		return err
	}
	defer fid.Close()
	_, err = fid.WriteAt([]byte(text), 0)
	return err
}

// canaryFake is a versionFake that takes canaries.
type canaryFake struct {
	*versionFake
	cmu  sync.Mutex
	cmds []string
}

func (f *canaryFake) Canary(name string, nodes []string, manual bool) error {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.cmds = append(f.cmds, fmt.Sprint("canary ", name, " ", strings.Join(nodes, "+"), " ", manual))
	return nil
}

func (f *canaryFake) Promote(name string) (uint64, error) {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.cmds = append(f.cmds, "promote "+name)
	return 4, nil
}

func (f *canaryFake) Abort(name string) error {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	f.cmds = append(f.cmds, "abort "+name)
	return nil
}

// ctl takes canary, promote and abort from a backend with Canaries, and
// refuses malformed lines naming the usage.
func TestVersions_CanaryCtl(t *testing.T) {
	b := &canaryFake{versionFake: newVersionFake()}
	_, addr := startServer(t, b, Options{Attach: b.attach})
	fs, err := mountAs(t, addr, "tok-p")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"canary n2,n3", "canary n2 manual", "promote", "abort"} {
		if err := ctlWrite(fs, "v/echo/ctl", line); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	want := []string{"canary echo n2+n3 false", "canary echo n2 true", "promote echo", "abort echo"}
	if !slices.Equal(b.cmds, want) {
		t.Fatalf("commands = %q, want %q", b.cmds, want)
	}
	for line, msg := range map[string]string{
		"canary":           `invalid command "canary"`,
		"canary n2 auto":   `invalid command "canary n2 auto"`,
		"canary n2,,n3":    `invalid canary: an empty node name`,
		"promote now":      `invalid command "promote now"`,
		"abort everything": `invalid command "abort everything"`,
	} {
		wantErr(t, ctlWrite(fs, "v/echo/ctl", line), msg)
	}
	if len(b.cmds) != len(want) {
		t.Fatalf("a refused line reached the backend: %q", b.cmds)
	}
}
