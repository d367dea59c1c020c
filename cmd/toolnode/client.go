package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/node"
)

func defaultAddr() string {
	if a := os.Getenv("TOOLNODE_ADDR"); a != "" {
		return a
	}
	return node.DefaultP9Addr
}

// ninep is `toolnode 9p [-a ADDR | ADDR] ls|read|write|rdwr PATH`, in the
// manner of plan9port's 9p.
func ninep(args []string) error {
	fs := flag.NewFlagSet("9p", flag.ContinueOnError)
	addr := fs.String("a", defaultAddr(), "node 9P address")
	cred := credFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 3 {
		*addr, args = args[0], args[1:]
	}
	if len(args) != 2 {
		return errors.New("usage: toolnode 9p [ADDR] ls|read|write|rdwr PATH")
	}
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()
	path := strings.TrimPrefix(args[1], "/")
	switch args[0] {
	case "ls":
		return ls(fsys, path, os.Stdout)
	case "read":
		return read(fsys, path, os.Stdout)
	case "write":
		return write(fsys, path, os.Stdin)
	case "rdwr":
		return rdwr(fsys, path, os.Stdin, os.Stdout)
	}
	return fmt.Errorf("unknown 9p verb %q: ls, read, write or rdwr", args[0])
}

func ls(fsys *client.Fsys, path string, out io.Writer) error {
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		return err
	}
	defer fid.Close()
	st, err := fid.Stat()
	if err != nil {
		return err
	}
	if st.Mode&plan9.DMDIR == 0 {
		fmt.Fprintln(out, st.Name)
		return nil
	}
	dirs, err := fid.Dirreadall()
	if err != nil {
		return err
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = d.Name
		if d.Mode&plan9.DMDIR != 0 {
			names[i] += "/"
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(out, n)
	}
	return nil
}

func read(fsys *client.Fsys, path string, out io.Writer) error {
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		return err
	}
	defer fid.Close()
	_, err = io.Copy(out, fid)
	return err
}

func write(fsys *client.Fsys, path string, in io.Reader) error {
	fid, err := fsys.Open(path, plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		return err
	}
	defer fid.Close()
	buf := make([]byte, 8192)
	for {
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := fid.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// rdwr opens PATH for reading and writing, then for each line of input
// writes the line at offset 0 and prints what the file answers, as
// plan9port's `9p rdwr` does.
func rdwr(fsys *client.Fsys, path string, in io.Reader, out io.Writer) error {
	fid, err := fsys.Open(path, plan9.ORDWR)
	if err != nil {
		return err
	}
	defer fid.Close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20+4096)
	var firstErr error
	for sc.Scan() {
		answer, err := exchange(fid, sc.Bytes())
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out.Write(answer)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return firstErr
}

// exchange writes a request at offset 0 and reads the whole answer from
// offset 0 on the same fid.
func exchange(fid *client.Fid, req []byte) ([]byte, error) {
	for off := 0; off < len(req); {
		n, err := fid.WriteAt(req[off:], int64(off))
		if err != nil {
			return nil, err
		}
		off += n
	}
	var answer []byte
	buf := make([]byte, 8192)
	for {
		n, err := fid.ReadAt(buf, int64(len(answer)))
		answer = append(answer, buf[:n]...)
		if err == io.EOF || (err == nil && n == 0) {
			return answer, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// call is `toolnode call [-session S -agent A] NAME [JSON]`. Without a
// session it makes a throwaway session and agent, loads NAME, calls it and
// kills the session again.
func call(args []string) error {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	addr := fs.String("a", defaultAddr(), "node 9P address")
	cred := credFlags(fs)
	session := fs.String("session", "", "session to call as")
	agent := fs.String("agent", "", "agent to call as (with -session)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return errors.New("usage: toolnode call [-session S -agent A] NAME [JSON]")
	}
	if (*session == "") != (*agent == "") {
		return errors.New("-session and -agent go together")
	}
	name, argJSON := fs.Arg(0), "{}"
	if fs.NArg() == 2 {
		argJSON = fs.Arg(1)
	}
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()
	if *session == "" {
		var id [4]byte
		rand.Read(id[:])
		s := "call-" + hex.EncodeToString(id[:])
		if _, err := request(fsys, "session/new", "name="+s); err != nil {
			return err
		}
		defer func() {
			if err := tell(fsys, "session/"+s+"/ctl", "kill"); err != nil {
				fmt.Fprintf(os.Stderr, "toolnode call: removing session %s: %v\n", s, err)
			}
		}()
		if _, err := request(fsys, "session/"+s+"/agent/new", "name=cli"); err != nil {
			return err
		}
		if _, err := request(fsys, "session/"+s+"/agent/cli/tools", name); err != nil {
			return err
		}
		*session, *agent = s, "cli"
	}
	out, err := request(fsys, "session/"+*session+"/agent/"+*agent+"/call", name+" "+argJSON)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// tell writes one command to a write-only file.
func tell(fsys *client.Fsys, path, cmd string) error {
	fid, err := fsys.Open(path, plan9.OWRITE)
	if err != nil {
		return err
	}
	defer fid.Close()
	_, err = fid.WriteAt([]byte(cmd), 0)
	return err
}

// request writes one request to an answer file and returns the answer.
func request(fsys *client.Fsys, path, req string) ([]byte, error) {
	fid, err := fsys.Open(path, plan9.ORDWR)
	if err != nil {
		return nil, err
	}
	defer fid.Close()
	return exchange(fid, []byte(req))
}
