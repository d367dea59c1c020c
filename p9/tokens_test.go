package p9

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// tokenFake is the fake Backend with tokens: secret "tok-NAME" is the
// token NAME.
type tokenFake struct {
	*fakeBackend
	tmu    sync.Mutex
	tokens map[string]Role
	tools  map[string][]string // a token's allow-list
}

func newTokenFake() *tokenFake {
	return &tokenFake{fakeBackend: newFake(), tokens: map[string]Role{
		"r": RoleRead, "c": RoleCall, "p": RolePublish, "a": RoleAdmin,
	}, tools: map[string][]string{}}
}

var _ TokenBackend = (*tokenFake)(nil)

func (f *tokenFake) NewToken(by Principal, name string, role Role, tools []string) (string, error) {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if _, ok := f.tokens[name]; ok {
		return "", fmt.Errorf("token %q already exists", name)
	}
	f.tokens[name] = role
	f.tools[name] = tools
	return "tok-" + name, nil
}

func (f *tokenFake) TokenIndex() string {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	var l []string
	for n, r := range f.tokens {
		l = append(l, n+" "+r.String())
	}
	sort.Strings(l)
	return strings.Join(l, "\n")
}

func (f *tokenFake) RevokeToken(by Principal, name string) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if _, ok := f.tokens[name]; !ok {
		return ErrNotFound
	}
	delete(f.tokens, name)
	return nil
}

// attach is the Options.Attach of the tests: no token is role none.
func (f *tokenFake) attach(aname string, _ net.Addr) (Principal, error) {
	if aname == "" {
		return Principal{Name: "anon", Role: RoleNone}, nil
	}
	name, _ := strings.CutPrefix(aname, "tok-")
	f.tmu.Lock()
	defer f.tmu.Unlock()
	r, ok := f.tokens[name]
	if !ok {
		return Principal{}, errors.New("permission denied: unknown or revoked token")
	}
	return Principal{Name: name, Role: r, Tools: f.tools[name]}, nil
}

func mountAs(t testing.TB, addr, aname string) (*client.Fsys, error) {
	t.Helper()
	c, err := client.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Attach(nil, "tester", aname)
}

func writeNew(fs *client.Fsys, path, text string) error {
	fid, err := fs.Create(path, plan9.OWRITE, 0o644)
	if err != nil {
		return err
	}
	if _, err := fid.Write([]byte(text)); err != nil {
		fid.Close()
		return err
	}
	return fid.Close()
}

// roleOps are operations of each class and the role each needs.
var roleOps = []struct {
	name string
	need Role
	do   func(fs *client.Fsys) error
}{
	{"ls /", RoleRead, func(fs *client.Fsys) error { _, err := dirList(fs, "/"); return err }},
	{"read t/idx", RoleRead, func(fs *client.Fsys) error { _, err := readErr(fs, "t/idx"); return err }},
	{"read t/echo.meta", RoleRead, func(fs *client.Fsys) error { _, err := readErr(fs, "t/echo.meta"); return err }},
	{"read a/coder.json", RoleRead, func(fs *client.Fsys) error { _, err := readErr(fs, "a/coder.json"); return err }},
	{"read node", RoleRead, func(fs *client.Fsys) error { _, err := readErr(fs, "node"); return err }},
	{"read cluster/members", RoleRead, func(fs *client.Fsys) error { _, err := readErr(fs, "cluster/members"); return err }},
	{"ask tools", RoleRead, func(fs *client.Fsys) error { _, err := rdwr(fs, "tools", "echo"); return err }},
	{"ask cluster/where", RoleRead, func(fs *client.Fsys) error { _, err := rdwr(fs, "cluster/where", "echo"); return err }},
	{"stat session/new", RoleCall, func(fs *client.Fsys) error { _, err := fs.Stat("session/new"); return err }},
	{"ls session", RoleCall, func(fs *client.Fsys) error { _, err := dirList(fs, "session"); return err }},
	{"ask session/new", RoleCall, func(fs *client.Fsys) error { _, err := rdwr(fs, "session/new", "name=x"); return err }},
	{"ask agent tools", RoleCall, func(fs *client.Fsys) error { _, err := rdwr(fs, "session/s1/agent/a1/tools", "echo"); return err }},
	{"call", RoleCall, func(fs *client.Fsys) error { _, err := rdwr(fs, "session/s1/agent/a1/call", "echo {}"); return err }},
	{"create t/new.meta", RolePublish, func(fs *client.Fsys) error { return writeNew(fs, "t/new.meta", `{"description":"new"}`) }},
	{"write t/echo.meta", RolePublish, func(fs *client.Fsys) error {
		fid, err := fs.Open("t/echo.meta", plan9.OWRITE|plan9.OTRUNC)
		if err != nil {
			return err
		}
		fid.Write([]byte(`{"description":"changed"}`))
		return fid.Close()
	}},
	{"truncate t/echo", RolePublish, func(fs *client.Fsys) error {
		d := plan9.Dir{}
		d.Null()
		d.Length = 0
		return fs.Wstat("t/echo", &d)
	}},
	{"rm a/coder.json", RolePublish, func(fs *client.Fsys) error { return fs.Remove("a/coder.json") }},
	{"walk token/idx", RoleAdmin, func(fs *client.Fsys) error { _, err := fs.Stat("token/idx"); return err }},
	{"read token/idx", RoleAdmin, func(fs *client.Fsys) error { _, err := readErr(fs, "token/idx"); return err }},
	{"ask token/new", RoleAdmin, func(fs *client.Fsys) error { _, err := rdwr(fs, "token/new", "name=n role=read"); return err }},
	{"ls token", RoleAdmin, func(fs *client.Fsys) error { _, err := dirList(fs, "token"); return err }},
}

func dirList(fs *client.Fsys, path string) ([]*plan9.Dir, error) {
	fid, err := fs.Open(path, plan9.OREAD)
	if err != nil {
		return nil, err
	}
	defer fid.Close()
	return fid.Dirreadall()
}

func readErr(fs *client.Fsys, path string) (string, error) {
	fid, err := fs.Open(path, plan9.OREAD)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	b, err := readAll(fid, 8192)
	return string(b), err
}

// Every role can do what DESIGN §7 gives it and is refused the rest with
// "permission denied: needs role ROLE".
func TestRoles(t *testing.T) {
	for _, role := range []Role{RoleRead, RoleCall, RolePublish, RoleAdmin} {
		t.Run(role.String(), func(t *testing.T) {
			b := newTokenFake()
			_, addr := startServer(t, b, Options{Attach: b.attach})
			fs, err := mountAs(t, addr, "tok-"+role.String()[:1])
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range roleOps {
				err := op.do(fs)
				if role >= op.need {
					if err != nil {
						t.Errorf("%s as %s: %v", op.name, role, err)
					}
					continue
				}
				want := "permission denied: needs role " + op.need.String()
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s as %s: error %v, want %q", op.name, role, err, want)
				}
			}
			if role < RolePublish {
				if _, ok := b.ToolMeta("new"); ok {
					t.Error("a refused create published")
				}
				if _, ok := b.Profile("coder"); !ok {
					t.Error("a refused remove withdrew")
				}
			}
		})
	}
}

// The control: without an Attach function (the protection off) an
// anonymous client may do everything, publish and tokens included.
func TestRoles_Control(t *testing.T) {
	b := newTokenFake()
	_, addr := startServer(t, b, Options{})
	fs := mount(t, addr)
	for _, op := range roleOps {
		if err := op.do(fs); err != nil {
			t.Errorf("%s without Attach: %v", op.name, err)
		}
	}
}

func TestAttach_Refused(t *testing.T) {
	b := newTokenFake()
	var logged []string
	var mu sync.Mutex
	_, addr := startServer(t, b, Options{Attach: b.attach, Logf: func(f string, a ...any) {
		mu.Lock()
		logged = append(logged, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	for _, aname := range []string{"", "tok-nobody", "garbage"} {
		_, err := mountAs(t, addr, aname)
		wantErr(t, err, "permission denied")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) < 3 || !strings.Contains(strings.Join(logged, "\n"), "attach refused") {
		t.Errorf("refused attaches were not logged: %q", logged)
	}
}

func TestTokenFiles(t *testing.T) {
	b := newTokenFake()
	s, addr := startServer(t, b, Options{Attach: b.attach})
	fs, err := mountAs(t, addr, "tok-a")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rdwr(fs, "token/new", "name=ci role=publish"); got != "tok-ci\n" {
		t.Fatalf("token/new answered %q", got)
	}
	for _, bad := range []string{"name=x", "role=read", "name=x role=none", "name=x role=root", "name=x role=read extra=1", "name x"} {
		_, err := rdwr(fs, "token/new", bad)
		wantErr(t, err, "invalid")
	}
	if got := readFile(t, fs, "token/idx"); got != "a admin\nc call\nci publish\np publish\nr read\n" {
		t.Fatalf("token/idx = %q", got)
	}
	ci, err := mountAs(t, addr, "tok-ci")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeNew(ci, "t/byci.meta", `{}`); err != nil {
		t.Fatalf("publish with the new token: %v", err)
	}
	fid, err := fs.Open("token/ctl", plan9.OWRITE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.Write([]byte("revoke ci")); err != nil {
		t.Fatal(err)
	}
	_, err = fid.Write([]byte("revoke ci"))
	wantErr(t, err, "no token")
	_, err = fid.Write([]byte("drop ci"))
	wantErr(t, err, "invalid")
	fid.Close()
	_, err = mountAs(t, addr, "tok-ci")
	wantErr(t, err, "permission denied")

	// DropPrincipal ends the connections attached as the name, only those.
	if n := s.DropPrincipal("ci"); n != 1 {
		t.Fatalf("DropPrincipal dropped %d connections, want 1", n)
	}
	waitFor(t, "the revoked token's connection to end", func() bool {
		_, err := readErr(ci, "node")
		return err != nil
	})
	if _, err := readErr(fs, "node"); err != nil {
		t.Fatalf("the admin's connection ended too: %v", err)
	}
	// The server forgets the connection once it has released it, just
	// after the client sees it end.
	waitFor(t, "Principals to list only a", func() bool {
		return strings.Join(s.Principals(), ",") == "a"
	})
}

// One connection holds at most MaxFids fids; clunking makes room. The
// control: the same walks on a server with the default cap succeed.
func TestMaxFids(t *testing.T) {
	for _, max := range []int{8, 0} {
		_, addr := startServer(t, newFake(), Options{MaxFids: max})
		r := dialRaw(t, addr)
		r.handshake()
		var failed *plan9.Fcall
		for fid := uint32(1); fid < 20; fid++ {
			rep := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: fid})
			if rep.Type == plan9.Rerror {
				failed = rep
				break
			}
		}
		if max == 0 {
			if failed != nil {
				t.Fatalf("default cap: walk failed: %s", failed.Ename)
			}
			continue
		}
		if failed == nil || !strings.Contains(failed.Ename, "too many fids") {
			t.Fatalf("cap %d: want a too many fids error, got %v", max, failed)
		}
		r.rpc(&plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 3})
		if rep := r.rpc(&plan9.Fcall{Type: plan9.Twalk, Tag: 1, Fid: 0, Newfid: 3}); rep.Type != plan9.Rwalk {
			t.Fatalf("walk after a clunk: %v", rep)
		}
		if rep := r.rpc(&plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 100, Afid: plan9.NOFID, Uname: "u"}); rep.Type != plan9.Rerror || !strings.Contains(rep.Ename, "too many fids") {
			t.Fatalf("attach past the cap: %v", rep)
		}
	}
}

// One connection's unfinished uploads hold at most MaxConnUploadBytes;
// another connection can still upload (the node-wide limit is far off).
func TestMaxConnUploadBytes(t *testing.T) {
	b := newFake()
	_, addr := startServer(t, b, Options{MaxConnUploadBytes: 1000, MaxUploadBytes: 1 << 20})
	fs1, fs2 := mount(t, addr), mount(t, addr)
	f1, err := fs1.Create("t/big1", plan9.OWRITE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.Write(make([]byte, 900)); err != nil {
		t.Fatal(err)
	}
	f2, err := fs1.Create("t/big2", plan9.OWRITE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f2.Write(make([]byte, 200))
	wantErr(t, err, "this connection already holds 900 bytes")
	f2.Close()
	// The control: another connection is not held back by the first.
	g, err := fs2.Create("t/big3", plan9.OWRITE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Write(make([]byte, 900)); err != nil {
		t.Fatalf("a second connection's upload: %v", err)
	}
	g.Close()
	// Closing releases the connection's bytes.
	f1.Close()
	f3, err := fs1.Create("t/big4", plan9.OWRITE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f3.Write(make([]byte, 900)); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	f3.Close()
}

// A token limited by tools manages no tokens, whatever its role; the
// control: an admin token without the limit does.
func TestTokenLimitedManagesNoTokens(t *testing.T) {
	b := newTokenFake()
	_, addr := startServer(t, b, Options{Attach: b.attach})
	admin, err := mountAs(t, addr, "tok-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rdwr(admin, "token/new", "name=lim role=admin tools=echo,search_*"); err != nil {
		t.Fatal(err)
	}
	if got := b.tools["lim"]; strings.Join(got, ",") != "echo,search_*" {
		t.Fatalf("tools = %q", got)
	}
	if _, err := rdwr(admin, "token/new", "name=bad role=call tools=["); err == nil || !strings.HasPrefix(err.Error(), "invalid") {
		t.Errorf("a bad pattern: %v, want invalid", err)
	}
	lim, err := mountAs(t, addr, "tok-lim")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rdwr(lim, "token/new", "name=x role=read")
	if err == nil || !strings.Contains(err.Error(), "permission denied: a token limited by tools manages no tokens") {
		t.Errorf("token/new with a limited token: %v", err)
	}
	if _, err := readErr(lim, "token/idx"); err == nil {
		t.Error("token/idx read with a limited token")
	}
	if _, ok := b.tokens["x"]; ok {
		t.Error("a refused token/new made a token")
	}
	if _, err := rdwr(admin, "token/new", "name=y role=read"); err != nil {
		t.Errorf("control: %v", err)
	}
}
