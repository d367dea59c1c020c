// Command go9pstatic is the floor of the 9P benchmarks: go9p's own server
// with a static file, toolsrv.rev, and a file that answers as a call of
// the benchmarks' nop tool does, call, served over TCP on the address
// given, in a process of its own as a node is.
package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"github.com/knusbaum/go9p"
	"github.com/knusbaum/go9p/fs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go9pstatic ADDR")
		os.Exit(2)
	}
	// go9p logs every attach and disconnect.
	log.SetOutput(io.Discard)
	fsys, root := fs.NewFS("u", "g", 0o555)
	if err := root.AddChild(fs.NewStaticFile(fsys.NewStat("toolsrv.rev", "u", "g", 0o444), []byte("7\n"))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := root.AddChild(&callFile{BaseFile: *fs.NewBaseFile(fsys.NewStat("call", "u", "g", 0o666))}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("serving", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go go9p.ServeReadWriter(bufio.NewReader(c), c, fsys.Server())
	}
}

// callFile takes any write whole and reads "ok\n", then the end: the 9P
// messages of a call of nop with no work behind them, so that a client
// can time the protocol's share of a call.
type callFile struct{ fs.BaseFile }

func (f *callFile) Write(fid uint64, offset uint64, data []byte) (uint32, error) {
	return uint32(len(data)), nil
}

func (f *callFile) Read(fid uint64, offset uint64, count uint64) ([]byte, error) {
	const out = "ok\n"
	if offset >= uint64(len(out)) {
		return nil, nil
	}
	return []byte(out[offset:min(uint64(len(out)), offset+count)]), nil
}
