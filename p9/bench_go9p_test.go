package p9

import (
	"bufio"
	"io"
	"log"
	"net"
	"testing"

	"9fans.net/go/plan9/client"
	"github.com/knusbaum/go9p"
	"github.com/knusbaum/go9p/fs"
	"github.com/knusbaum/go9p/proto"
)

// mountGo9p serves a go9p tree holding a static file at revPath through
// go9p.ServeReadWriter, as go9p.Serve does, and mounts it.
func mountGo9p(b *testing.B) *client.Fsys {
	// go9p logs every attach and disconnect through the log package, also
	// after the benchmark ends; nothing else in this binary uses it.
	log.SetOutput(io.Discard)
	fsys, root := fs.NewFS("u", "g", 0o555, fs.IgnorePermissions())
	dir := root
	for _, name := range []string{"session", "s1", "agent", "a1"} {
		d := fs.NewStaticDir(fsys.NewStat(name, "u", "g", proto.DMDIR|0o555))
		if err := dir.AddChild(d); err != nil {
			b.Fatal(err)
		}
		dir = d
	}
	if err := dir.AddChild(fs.NewStaticFile(fsys.NewStat("toolsrv.rev", "u", "g", 0o444), []byte("7\n"))); err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				go9p.ServeReadWriter(bufio.NewReader(nc), nc, fsys.Server())
			}()
		}
	}()
	return mount(b, l.Addr().String())
}

func BenchmarkReadStaticGo9pOpenFid(b *testing.B) { benchReadOpenFid(b, mountGo9p(b)) }
func BenchmarkWalkOpenReadClunkStaticGo9p(b *testing.B) {
	benchWalkOpenReadClunk(b, mountGo9p(b))
}
