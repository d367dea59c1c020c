package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

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

// ninepUsage is the synopsis of `toolnode 9p`.
const ninepUsage = "usage: toolnode 9p [-a ADDR | ADDR] ls [-l]|stat|read|write|rdwr|create|rm PATH"

// ninep is `toolnode 9p [-a ADDR | ADDR] VERB PATH`, in the manner of
// plan9port's 9p. Every failure, a close that fails included, is returned
// as one error naming the verb and the path; main prints it once and
// exits 1.
func ninep(args []string) error {
	fs := newFlagSet("9p", strings.TrimPrefix(ninepUsage, "usage: toolnode "))
	addr := fs.String("a", defaultAddr(), "node 9P address")
	cred := credFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) > 0 && !ninepVerbs[args[0]] {
		*addr, args = args[0], args[1:]
	}
	if len(args) == 0 {
		return errors.New(ninepUsage)
	}
	verb, args := args[0], args[1:]
	if !ninepVerbs[verb] {
		return fmt.Errorf("unknown verb %q: ls [-l], stat, read, write, rdwr, create or rm", verb)
	}
	long := false
	if verb == "ls" && len(args) > 0 && args[0] == "-l" {
		long, args = true, args[1:]
	}
	if len(args) != 1 {
		return errors.New(ninepUsage)
	}
	path := strings.Trim(args[0], "/")
	fsys, err := cred.mount(*addr)
	if err != nil {
		return err
	}
	defer fsys.Close()
	switch verb {
	case "ls":
		err = ls(fsys, path, long, os.Stdout)
	case "stat":
		err = stat(fsys, path, os.Stdout)
	case "read":
		err = read(fsys, path, os.Stdout)
	case "write":
		err = write(fsys, path, os.Stdin)
	case "rdwr":
		err = rdwr(fsys, path, os.Stdin, os.Stdout)
	case "create":
		err = create(fsys, path)
	case "rm":
		err = fsys.Remove(path)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, "/"+path, err)
	}
	return nil
}

var ninepVerbs = map[string]bool{
	"ls": true, "stat": true, "read": true, "write": true, "rdwr": true, "create": true, "rm": true,
}

// closeFid clunks fid and keeps the first error: a clunk that publishes
// (a file of t/ or a/) fails when what was written is refused.
func closeFid(fid *client.Fid, err *error) {
	if cerr := fid.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}

// ls lists a directory, sorted, a "/" after subdirectories; a file lists
// itself. Long (-l) lines are plan9port's `9p ls -l`: mode, type M, dev 0,
// uid, gid, length, mtime and name, in columns for a directory.
func ls(fsys *client.Fsys, path string, long bool, out io.Writer) (err error) {
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		return err
	}
	defer closeFid(fid, &err)
	st, err := fid.Stat()
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	defer w.Flush()
	now := time.Now()
	if st.Mode&plan9.DMDIR == 0 {
		if long {
			fmt.Fprintf(w, "%v M 0 %s %s %d %s %s\n", st.Mode, st.Uid, st.Gid, st.Length, lsTime(st.Mtime, now), quote9(st.Name))
		} else {
			fmt.Fprintln(w, st.Name)
		}
		return nil
	}
	dirs, err := fid.Dirreadall()
	if err != nil {
		return err
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].Name < dirs[j].Name })
	var uidW, gidW, lenW int
	for _, d := range dirs {
		uidW, gidW = max(uidW, len(d.Uid)), max(gidW, len(d.Gid))
		lenW = max(lenW, len(strconv.FormatUint(d.Length, 10)))
	}
	for _, d := range dirs {
		switch {
		case long:
			fmt.Fprintf(w, "%v M 0 %-*s %-*s %*d %s %s\n", d.Mode, uidW, d.Uid, gidW, d.Gid, lenW, d.Length, lsTime(d.Mtime, now), quote9(d.Name))
		case d.Mode&plan9.DMDIR != 0:
			fmt.Fprintln(w, d.Name+"/")
		default:
			fmt.Fprintln(w, d.Name)
		}
	}
	return nil
}

// lsTime is plan9port's date of ls -l, in local time: "Jan  2 15:04"
// within six months (30-day ones) before now, else "Jan  2  2006".
func lsTime(sec uint32, now time.Time) string {
	t := time.Unix(int64(sec), 0)
	if now.Unix()-int64(sec) < 6*30*86400 {
		return t.Format("Jan _2 15:04")
	}
	return fmt.Sprintf("%s %5d", t.Format("Jan _2"), t.Year())
}

// quote9 quotes a name as Plan 9's %q does: in single quotes, a quote
// doubled, when it is empty or holds a space, a control character or a
// quote.
func quote9(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '\'' }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// stat prints a file's stat fields on one line, as plan9port's `9p stat`
// does (Plan 9's %D).
func stat(fsys *client.Fsys, path string, out io.Writer) error {
	d, err := fsys.Stat(path)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, statLine(d))
	return err
}

// statLine is Plan 9's %D of a Dir.
func statLine(d *plan9.Dir) string {
	qt := ""
	for _, c := range []struct {
		bit uint8
		c   string
	}{{plan9.QTDIR, "d"}, {plan9.QTAPPEND, "a"}, {plan9.QTEXCL, "l"}, {plan9.QTAUTH, "A"}} {
		if d.Qid.Type&c.bit != 0 {
			qt += c.c
		}
	}
	return fmt.Sprintf("'%s' '%s' '%s' '%s' q (%016x %d %s) m %#o at %d mt %d l %d t %d d %d",
		d.Name, d.Uid, d.Gid, d.Muid, d.Qid.Path, d.Qid.Vers, qt, uint32(d.Mode),
		d.Atime, d.Mtime, d.Length, d.Type, d.Dev)
}

func read(fsys *client.Fsys, path string, out io.Writer) (err error) {
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		return err
	}
	defer closeFid(fid, &err)
	_, err = io.Copy(out, fid)
	return err
}

// write copies in to PATH, truncating it; a file that is not there is
// created (plan9port's write only opens), so publishing into t/ or a/
// is one command. The error of the close, where t/ and a/ publish, is
// the command's error.
func write(fsys *client.Fsys, path string, in io.Reader) (err error) {
	fid, err := fsys.Open(path, plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		if _, serr := fsys.Stat(path); serr == nil {
			return err // it is there and refuses the open
		}
		if fid, err = fsys.Create(path, plan9.OWRITE, 0o666); err != nil {
			return err
		}
	}
	defer closeFid(fid, &err)
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

// create makes an empty file, as plan9port's `9p create` does (perm
// 0666; opened for writing, which every server lets a creator do). In t/
// and a/ it is pending: walks find it, and a write that leaves valid
// content in it publishes it.
func create(fsys *client.Fsys, path string) (err error) {
	fid, err := fsys.Create(path, plan9.OWRITE, 0o666)
	if err != nil {
		return err
	}
	closeFid(fid, &err)
	return err
}

// rdwr opens PATH for reading and writing, then for each line of input
// writes the line at offset 0 and prints what the file answers, as
// plan9port's `9p rdwr` does.
// The first failure ends it: its error is the command's, reported once.
func rdwr(fsys *client.Fsys, path string, in io.Reader, out io.Writer) (err error) {
	fid, err := fsys.Open(path, plan9.ORDWR)
	if err != nil {
		return err
	}
	defer closeFid(fid, &err)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20+4096)
	for sc.Scan() {
		answer, err := exchange(fid, sc.Bytes())
		if err != nil {
			return err
		}
		if _, err := out.Write(answer); err != nil {
			return err
		}
	}
	return sc.Err()
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
	fs := newFlagSet("call", "call [-a ADDR] [-session S -agent A] NAME [JSON]")
	addr := fs.String("a", defaultAddr(), "node 9P address")
	cred := credFlags(fs)
	session := fs.String("session", "", "session to call as")
	agent := fs.String("agent", "", "agent to call as (with -session)")
	if err := parseFlags(fs, args); err != nil {
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
