package p9

import (
	"context"
	"strings"
	"sync"
	"testing"

	"9fans.net/go/plan9"
)

// boundBackend records, per principal, the state-changing requests that
// reach it.
type boundBackend struct {
	Backend
	who string
	mu  *sync.Mutex
	got *[]string
}

func (b boundBackend) note(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*b.got = append(*b.got, b.who+" "+what)
}

func (b boundBackend) NewSession(spec string) (string, error) {
	b.note("session " + spec)
	return b.Backend.NewSession(spec)
}

func (b boundBackend) Call(ctx context.Context, s, a, tool string, args []byte) ([]byte, error) {
	b.note("call " + tool)
	return b.Backend.Call(ctx, s, a, tool, args)
}

func (b boundBackend) PublishProfile(name string, data []byte) error {
	b.note("profile " + name)
	return b.Backend.PublishProfile(name, data)
}

func (b boundBackend) WithdrawProfile(name string) error {
	b.note("rm profile " + name)
	return b.Backend.WithdrawProfile(name)
}

// Options.Bind's Backend serves the requests of the connection that
// attached: its principal is anon@ADDR, ADDR the client's address.
func TestServer_Bind(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var principals []Principal
	fake := newFake()
	_, addr := startServer(t, fake, Options{Bind: func(p Principal) Backend {
		mu.Lock()
		principals = append(principals, p)
		mu.Unlock()
		return boundBackend{Backend: fake, who: p.Name, mu: &mu, got: &got}
	}})
	fs := mount(t, addr)
	if _, err := rdwr(fs, "session/new", "name=x"); err != nil {
		t.Fatal(err)
	}
	if _, err := rdwr(fs, "session/s1/agent/a1/call", `echo {"a":1}`); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("a/p.json", plan9.OWRITE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte(`{}`))
	f.Close()
	if err := fs.Remove("a/p.json"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(principals) != 1 || !strings.HasPrefix(principals[0].Name, "anon@127.0.0.1:") || principals[0].Role != RoleAdmin {
		t.Fatalf("principals bound: %+v", principals)
	}
	who := principals[0].Name
	want := []string{who + " session name=x", who + " call echo", who + " profile p", who + " rm profile p"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("bound backend saw:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
