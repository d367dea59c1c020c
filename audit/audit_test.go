package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func readLines(t *testing.T, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

func rec(action, target string) Record {
	return Record{Time: time.Now(), Node: "n1", Who: "anon@127.0.0.1:1", Action: action, Target: target, Duration: 1500 * time.Microsecond}
}

func TestLog_Format(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600))
	l.Write(Record{Time: at, Node: "n1", Who: "alice", Action: "call", Target: "s/a/grep", Duration: 1500 * time.Microsecond})
	l.Write(Record{Time: at, Node: "n1", Who: "alice", Action: "call", Target: "s/a/fail", Err: errors.New("tool fail exited with status 1")})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := `{"time":"2026-01-02T02:04:05.000006Z","node":"n1","who":"alice","action":"call","target":"s/a/grep","result":"ok","duration_ms":1.5}
{"time":"2026-01-02T02:04:05.000006Z","node":"n1","who":"alice","action":"call","target":"s/a/fail","result":"tool fail exited with status 1","duration_ms":0}
`
	if string(b) != want {
		t.Fatalf("log:\n%s\nwant:\n%s", b, want)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
}

// Many writers: every record is one whole line, none lost.
func TestLog_Concurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 500
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				l.Write(rec("call", fmt.Sprintf("w%d/%d/%s", w, i, strings.Repeat("x", i%300))))
			}
		}()
	}
	// Flushes by time and by hand race with the writers.
	for i := 0; i < 10; i++ {
		l.Flush()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ln := range readLines(t, path) {
		seen[ln.Target] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct records, want %d", len(seen), writers*each)
	}
}

// Close writes what is buffered: a clean stop loses nothing.
func TestLog_CloseFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	l.Write(rec("session", "s1"))
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("written before the flush: %q (the buffer is not used)", b)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); len(got) != 1 || got[0].Target != "s1" {
		t.Fatalf("after close: %+v", got)
	}
	var logged []string
	l.logf = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	l.Write(rec("session", "late")) // after Close: logged, not written, no panic
	if len(logged) != 1 || len(readLines(t, path)) != 1 {
		t.Fatalf("a write after close: logged %q", logged)
	}
}

// A record reaches the file within FlushInterval without a Close.
func TestLog_TimedFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write(rec("load", "s1/a1"))
	deadline := time.Now().Add(5 * time.Second)
	for len(readLines(t, path)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the record was not flushed within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logrotate moves the file, then the node reopens: the moved file has
// the records before, a new file at the path the records after.
func TestLog_ReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	l.Write(rec("call", "before"))
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	l.Write(rec("call", "still-before")) // buffered: goes to the old file
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write(rec("call", "after"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	old, cur := readLines(t, path+".1"), readLines(t, path)
	if len(old) != 2 || old[0].Target != "before" || old[1].Target != "still-before" {
		t.Fatalf("rotated file: %+v", old)
	}
	if len(cur) != 1 || cur[0].Target != "after" {
		t.Fatalf("new file: %+v", cur)
	}
	// Control: without Reopen the records after the move follow the
	// moved file, and nothing is at the path.
	l, err = Open(path, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(path, path+".2")
	l.Write(rec("call", "lost-to-the-old-file"))
	l.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("without Reopen a file is at the path: %v", err)
	}
}

// A failing file is logged once, not returned and not fatal.
func TestLog_WriteErrorLogged(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	var mu sync.Mutex
	var logged []string
	l, err := Open("/dev/full", func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(f, a...))
	})
	if err != nil {
		t.Skipf("cannot open /dev/full: %v", err)
	}
	for i := 0; i < 3; i++ {
		l.Write(rec("call", strings.Repeat("x", 40000)))
		l.Flush()
	}
	if err := l.Close(); err == nil {
		t.Fatal("Close of a full device succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "no space") {
		t.Fatalf("logged %q, want one line about the failure", logged)
	}
}

func TestLog_Nil(t *testing.T) {
	var l *Log
	l.Write(rec("call", "x"))
	if l.Flush() != nil || l.Reopen() != nil || l.Close() != nil || l.Path() != "" {
		t.Fatal("a nil log is not a no-op")
	}
}

// BenchmarkLog_Write compares the buffered log with a write(2) per
// record, the obvious alternative, in the same run.
func BenchmarkLog_Write(b *testing.B) {
	r := rec("call", "sess/agent/grep")
	b.Run("buffered", func(b *testing.B) {
		l, err := Open(filepath.Join(b.TempDir(), "audit.log"), b.Logf)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Write(r)
			}
		})
	})
	b.Run("write-per-record", func(b *testing.B) {
		f, err := openFile(filepath.Join(b.TempDir(), "audit.log"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ln, _ := json.Marshal(line{Time: r.Time.UTC().Format(time.RFC3339Nano), Node: r.Node, Who: r.Who, Action: r.Action, Target: r.Target, Result: "ok"})
				f.Write(append(ln, '\n'))
			}
		})
	})
}
