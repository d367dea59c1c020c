package p9

import (
	"fmt"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// The benchmarks compare this server with go9p's stock server on the same
// path, read by the same client over loopback TCP. The go9p side is in
// bench_go9p_test.go, behind the go9pbench tag because go9p/fs needs two
// modules go.mod does not list by default:
//
//	go test -tags go9pbench -run '^$' -bench . -benchmem -count 5 ./p9/

const revPath = "session/s1/agent/a1/toolsrv.rev"

// mountOurs serves the fake backend and mounts it.
func mountOurs(b *testing.B) *client.Fsys {
	_, addr := startServer(b, newFake(), Options{Logf: func(string, ...any) {}})
	return mount(b, addr)
}

func benchReadOpenFid(b *testing.B, fsys *client.Fsys) {
	fid, err := fsys.Open(revPath, plan9.OREAD)
	if err != nil {
		b.Fatal(err)
	}
	defer fid.Close()
	buf := make([]byte, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if n, err := fid.ReadAt(buf, 0); err != nil || n != 2 || buf[0] != '7' {
			b.Fatalf("read %q, %v", buf[:n], err)
		}
	}
}

func benchWalkOpenReadClunk(b *testing.B, fsys *client.Fsys) {
	buf := make([]byte, 2)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fid, err := fsys.Open(revPath, plan9.OREAD)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := fid.ReadAt(buf, 0); err != nil || n != 2 || buf[0] != '7' {
			b.Fatalf("read %q, %v", buf[:n], err)
		}
		if err := fid.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadRevOpenFid(b *testing.B)       { benchReadOpenFid(b, mountOurs(b)) }
func BenchmarkWalkOpenReadClunkRev(b *testing.B) { benchWalkOpenReadClunk(b, mountOurs(b)) }

// manyTools is a fake backend with n tools, each with metadata and an
// executable.
func manyTools(n int) *fakeBackend {
	f := newFake()
	for i := range n {
		name := fmt.Sprintf("tool%05d", i)
		f.tools[name] = &fakeTool{
			desc: "tool number " + name, time: time.Now(),
			meta: []byte(`{"description":"tool number ` + name + `","cmd":"true"}`),
			exe:  []byte("#!/bin/sh\nexec true\n"),
		}
	}
	return f
}

// BenchmarkDirReadT10k reads t/ whole (walk, open, Dirreadall, clunk),
// every entry with its true length and publish time: 10,000 tools make
// 20,000 entries, and the fake's own five.
func BenchmarkDirReadT10k(b *testing.B) {
	_, addr := startServer(b, manyTools(10000), Options{Logf: func(string, ...any) {}})
	fsys := mount(b, addr)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fid, err := fsys.Open("t", plan9.OREAD)
		if err != nil {
			b.Fatal(err)
		}
		dirs, err := fid.Dirreadall()
		if err != nil || len(dirs) != 20005 {
			b.Fatalf("%d entries, %v", len(dirs), err)
		}
		fid.Close()
	}
}
