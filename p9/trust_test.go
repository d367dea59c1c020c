package p9

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// trustFake is tokenFake with trust/ and t/NAME.sig: it records what it
// was given.
type trustFake struct {
	*tokenFake
	mu   sync.Mutex
	keys []string // "NAME KEY SIGNED"
	sigs map[string]string
}

var (
	_ Trust    = (*trustFake)(nil)
	_ ToolSigs = (*trustFake)(nil)
)

func (f *trustFake) TrustIndex() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, k := range f.keys {
		b.WriteString(strings.Fields(k)[0] + " SHA256:x\n")
	}
	return b.String()
}

func (f *trustFake) AddTrustedKey(name, key string, sig []byte) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.keys) > 0 && sig == nil {
		return "", errors.New("permission denied: unsigned")
	}
	f.keys = append(f.keys, name+" "+key+" "+map[bool]string{true: "signed", false: "unsigned"}[sig != nil])
	return "SHA256:x", nil
}

func (f *trustFake) RemoveTrustedKey(name string, sig []byte) error {
	if sig == nil {
		return errors.New("permission denied: unsigned")
	}
	return nil
}

func (f *trustFake) AttachToolSig(name string, sig []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sigs == nil {
		f.sigs = map[string]string{}
	}
	f.sigs[name] = string(sig)
	return nil
}

const testSig = "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"

// trust/new and trust/ctl take the command and the armored signature in
// one write; they need admin; a malformed signature block is refused;
// t/NAME.sig, written with publish, is handed over whole.
func TestTrust_Files(t *testing.T) {
	b := &trustFake{tokenFake: newTokenFake()}
	_, addr := startServer(t, b, Options{Attach: b.attach})
	admin, err := mountAs(t, addr, "tok-a")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := mountAs(t, addr, "tok-p")
	if err != nil {
		t.Fatal(err)
	}
	ask := func(fs *client.Fsys, path, req string) (string, error) {
		fid, err := fs.Open(path, plan9.ORDWR)
		if err != nil {
			return "", err
		}
		defer fid.Close()
		if _, err := fid.Write([]byte(req)); err != nil {
			return "", err
		}
		buf := make([]byte, 512)
		n, _ := fid.ReadAt(buf, 0)
		return string(buf[:n]), nil
	}
	if got, err := ask(admin, "trust/new", "alice ssh-ed25519 AAAA alice@host\n"); err != nil || got != "alice SHA256:x\n" {
		t.Fatalf("trust/new: %q %v", got, err)
	}
	if _, err := ask(admin, "trust/new", "bob ssh-ed25519 BBBB\n"); err == nil || !strings.Contains(err.Error(), "unsigned") {
		t.Fatalf("an unsigned second key: %v", err)
	}
	if _, err := ask(admin, "trust/new", "bob ssh-ed25519 BBBB\n"+testSig); err != nil {
		t.Fatalf("a signed second key: %v", err)
	}
	if b.keys[1] != "bob ssh-ed25519 BBBB signed" {
		t.Fatalf("the backend got %q", b.keys[1])
	}
	if _, err := ask(admin, "trust/new", "carol ssh-ed25519 CCCC\nnot armored\n"); err == nil || !strings.HasPrefix(err.Error(), "invalid signature") {
		t.Fatalf("a malformed signature block: %v", err)
	}
	if _, err := ask(admin, "trust/new", "carol\n"); err == nil || !strings.HasPrefix(err.Error(), "invalid key") {
		t.Fatalf("a name without a key: %v", err)
	}
	if _, err := ask(pub, "trust/new", "mallory ssh-ed25519 MMMM\n"); err == nil || !strings.Contains(err.Error(), "permission denied: needs role admin") {
		t.Fatalf("a publisher writing trust/new: %v", err)
	}
	if got := readFile(t, pub, "trust/idx"); got != "alice SHA256:x\nbob SHA256:x\n" {
		t.Fatalf("trust/idx = %q", got)
	}
	tell := func(path, req string) error {
		fid, err := admin.Open(path, plan9.OWRITE)
		if err != nil {
			return err
		}
		defer fid.Close()
		_, err = fid.Write([]byte(req))
		return err
	}
	if err := tell("trust/ctl", "remove alice\n"); err == nil || !strings.Contains(err.Error(), "unsigned") {
		t.Fatalf("trust/ctl remove unsigned: %v", err)
	}
	if err := tell("trust/ctl", "remove alice\n"+testSig); err != nil {
		t.Fatalf("trust/ctl remove with a signature: %v", err)
	}
	if err := tell("trust/ctl", "drop alice\n"+testSig); err == nil || !strings.HasPrefix(err.Error(), "invalid command") {
		t.Fatalf("trust/ctl drop: %v", err)
	}

	// t/NAME.sig: created, written in two parts, attached whole.
	fid, err := pub.Create("t/greet.sig", plan9.OWRITE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	half := len(testSig) / 2
	if _, err := fid.WriteAt([]byte(testSig[:half]), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fid.WriteAt([]byte(testSig[half:]), int64(half)); err != nil {
		t.Fatal(err)
	}
	if err := fid.Close(); err != nil {
		t.Fatal(err)
	}
	if b.sigs["greet"] != testSig {
		t.Fatalf("the backend got %q", b.sigs["greet"])
	}
	ro, err := mountAs(t, addr, "tok-r")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Create("t/other.sig", plan9.OWRITE, 0o644); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a reader creating t/other.sig: %v", err)
	}
}
