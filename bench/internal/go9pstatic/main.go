// Command go9pstatic is the floor of the 9P benchmarks: go9p's own server
// with one static file, toolsrv.rev, served over TCP on the address given,
// in a process of its own as a node is.
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
