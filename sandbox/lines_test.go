package sandbox

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// A tool's lines on fd 3 and on standard error reach the call's LineFunc
// while it runs (the first before the tool ends), one by one; a tool
// whose call has no LineFunc still has fd 3 open (the control: the same
// write does not fail).
func TestLines(t *testing.T) {
	s := newTestSandbox(t, nil)
	var mu sync.Mutex
	var got []string
	release := make(chan struct{})
	f := func(fd int, line string) {
		mu.Lock()
		got = append(got, string(rune('0'+fd))+":"+line)
		first := len(got) == 1
		mu.Unlock()
		if first {
			close(release)
		}
	}
	long := strings.Repeat("x", MaxLine+10)
	dir := t.TempDir()
	// The tool waits for a file the LineFunc's first line makes it
	// create: the line came while it ran.
	cmd := `echo "progress 1/2 half" >&3; while [ ! -e ` + dir + `/go ]; do sleep 0.01; done; ` +
		`echo oops >&2; echo "progress 2/2 done" >&3; echo ` + long + ` >&3; printf last >&3; echo out`
	go func() {
		<-release
		_ = os.WriteFile(dir+"/go", nil, 0o644)
	}()
	out, err := s.run(WithLines(context.Background(), f), tool{Cmd: cmd})
	if err != nil || string(out) != "out\n" {
		t.Fatalf("run: %q, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"3:progress 1/2 half", "2:oops", "3:progress 2/2 done", "3:" + long[:MaxLine], "3:last"}
	sorted := func(l []string) []string { l = slices.Clone(l); slices.Sort(l); return l }
	if !slices.Equal(sorted(got), sorted(want)) || got[0] != want[0] {
		t.Errorf("lines %q, want %q", got, want)
	}
	if out, err := s.run(context.Background(), tool{Cmd: `echo "progress 1/1" >&3 && echo ok`}); err != nil || string(out) != "ok\n" {
		t.Errorf("without a LineFunc: %q, %v", out, err)
	}
}
