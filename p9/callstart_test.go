package p9

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// starter is the fake Backend with a CallStarter: "echo", "fail" and
// "block" pass their checks at once and run as fakeBackend.Call does;
// "gate" runs until release is closed; a tool it does not know, or
// arguments with "bad", fail the checks.
type starter struct {
	*fakeBackend
	release chan struct{}

	mu        sync.Mutex
	started   int   // runs begun
	ended     int   // runs returned
	cancelled error // the context error a cancelled run saw
}

func newStarter() *starter {
	return &starter{fakeBackend: newFake(), release: make(chan struct{})}
}

func (s *starter) StartCall(ctx context.Context, sess, agent, tool string, args []byte) (func(context.Context) ([]byte, error), error) {
	if strings.Contains(string(args), "bad") {
		return nil, fmt.Errorf("tool %q: invalid arguments: bad", tool)
	}
	switch tool {
	case "echo", "fail", "block", "gate":
	default:
		return nil, fmt.Errorf("no tool %q in the cluster", tool)
	}
	return func(ctx context.Context) ([]byte, error) {
		s.mu.Lock()
		s.started++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.ended++
			s.cancelled = ctx.Err()
			s.mu.Unlock()
		}()
		if tool != "gate" {
			return s.fakeBackend.Call(ctx, sess, agent, tool, args)
		}
		select {
		case <-s.release:
			return []byte("opened\n"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, nil
}

func (s *starter) counts() (started, ended int, cancelled error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.ended, s.cancelled
}

const starterCallPath = "session/s1/agent/a1/call"

// openCall opens the starter's call file for reading and writing.
func openCall(t *testing.T, fs *client.Fsys) *client.Fid {
	t.Helper()
	fid, err := fs.Open(starterCallPath, plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	return fid
}

// A write whose call fails its checks fails, and runs nothing; a call
// that runs and fails fails the read instead, and the next request on
// the fid starts afresh.
func TestCallStartErrorsOnWrite(t *testing.T) {
	s := newStarter()
	_, addr := startServer(t, s, Options{})
	fs := mount(t, addr)
	fid := openCall(t, fs)
	defer fid.Close()

	for _, req := range []string{`nosuch {}`, `echo {"x":"bad"}`, `echo [1]`, `echo {"x":`} {
		_, err := fid.WriteAt([]byte(req), 0)
		if req == `echo {"x":` {
			// Incomplete: accepted, and a read says what is missing.
			if err != nil {
				t.Fatalf("write %q: %v", req, err)
			}
			if _, err := fid.ReadAt(make([]byte, 64), 0); err == nil || !strings.Contains(err.Error(), "incomplete") {
				t.Fatalf("read after %q: %v, want incomplete", req, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("write %q succeeded, want its error", req)
		}
		if n, err := fid.ReadAt(make([]byte, 64), 0); n != 0 || (err != nil && !strings.Contains(err.Error(), "EOF")) {
			t.Fatalf("read after the failed %q: %d bytes, %v; want nothing", req, n, err)
		}
	}
	if started, _, _ := s.counts(); started != 0 {
		t.Fatalf("%d runs started by writes that failed their checks", started)
	}

	if _, err := fid.WriteAt([]byte("fail {}"), 0); err != nil {
		t.Fatalf("write of a call that fails when it runs: %v", err)
	}
	if _, err := fid.ReadAt(make([]byte, 64), 0); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("read of a failed call: %v, want its error", err)
	}
	if _, err := fid.WriteAt([]byte(`echo {"a":1}`), 0); err != nil {
		t.Fatal(err)
	}
	out, err := readAll(fid, 64)
	if err != nil || string(out) != `{"a":1}` {
		t.Fatalf("echo after a failed call: %q, %v", out, err)
	}
}

// The write answers before the tool ends; a read waits for the end and
// gets the whole output.
func TestCallReadWaitsForRun(t *testing.T) {
	s := newStarter()
	_, addr := startServer(t, s, Options{})
	fs := mount(t, addr)
	fid := openCall(t, fs)
	defer fid.Close()
	if _, err := fid.WriteAt([]byte("gate"), 0); err != nil {
		t.Fatalf("write: %v", err) // returns while the run waits for release
	}
	waitFor(t, "the run to start", func() bool { started, _, _ := s.counts(); return started == 1 })
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := readAll(fid, 64)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("the read returned %q, %v before the tool ended", r.out, r.err)
	case <-time.After(50 * time.Millisecond): // a read that did not wait would be back by now
	}
	close(s.release)
	select {
	case r := <-done:
		if r.err != nil || string(r.out) != "opened\n" {
			t.Fatalf("read: %q, %v", r.out, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read did not return after the tool ended")
	}
}

// A clunk waits for the run the write started, so a write then a clunk
// (`echo NAME ARGS > call` through a mount) runs the tool whole, and a
// failure no read has answered is the clunk's error. The end of the
// connection cancels a run.
func TestCallClunkWaitsForRun(t *testing.T) {
	s := newStarter()
	_, addr := startServer(t, s, Options{})
	fs := mount(t, addr)
	fid := openCall(t, fs)
	if _, err := fid.WriteAt([]byte("gate"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run to start", func() bool { started, _, _ := s.counts(); return started == 1 })
	clunked := make(chan error, 1)
	go func() { clunked <- fid.Close() }()
	select {
	case err := <-clunked:
		t.Fatalf("the clunk returned (%v) before the run ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(s.release)
	if err := <-clunked; err != nil {
		t.Fatalf("clunk after a run that succeeded: %v", err)
	}
	if _, ended, c := s.counts(); ended != 1 || c != nil {
		t.Fatalf("the run: ended %d, context %v; want it run to its end", ended, c)
	}

	// A failure nobody read is the clunk's; one a read answered is not.
	fid = openCall(t, fs)
	if _, err := fid.WriteAt([]byte("fail"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fid.Close(); err == nil {
		t.Fatal("the clunk of a failed run that nobody read succeeded")
	}
	fid = openCall(t, fs)
	fid.WriteAt([]byte("fail"), 0)
	if _, err := fid.ReadAt(make([]byte, 100), 0); err == nil {
		t.Fatal("the read of a failed run succeeded")
	}
	if err := fid.Close(); err != nil {
		t.Fatalf("the clunk after the failure was read: %v", err)
	}

	c, err := client.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fs2, err := c.Attach(nil, "tester", "")
	if err != nil {
		t.Fatal(err)
	}
	fid, err = fs2.Open(starterCallPath, plan9.ORDWR)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fid.WriteAt([]byte("block"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the blocked run to start", func() bool { started, _, _ := s.counts(); return started == 4 })
	c.Close()
	waitFor(t, "the run of a closed connection to end", func() bool { _, ended, _ := s.counts(); return ended == 4 })
	if _, _, c := s.counts(); !errors.Is(c, context.Canceled) {
		t.Fatalf("the run ended with context %v, want cancelled", c)
	}
}
