package testcluster

import (
	"io"
	"sort"
	"strings"
	"testing"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// Conn is one 9P connection, attached.
type Conn struct {
	C    *client.Conn
	Fsys *client.Fsys
}

// Dial connects to the 9P server at addr and attaches as user with
// token as the attach name ("" for none).
func Dial(addr, user, token string) (*Conn, error) {
	c, err := client.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	fsys, err := c.Attach(nil, user, token)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Conn{c, fsys}, nil
}

// Close detaches and closes the connection.
func (c *Conn) Close() {
	c.Fsys.Close()
	c.C.Close()
}

// Read is the whole file at path.
func (c *Conn) Read(path string) (string, error) { return ReadErr(c.Fsys, path) }

// Ask is Ask on the connection's tree.
func (c *Conn) Ask(path, req string) (string, error) { return Ask(c.Fsys, path, req) }

// Attach dials addr and attaches as user with token, failing tb when it
// cannot; the tree is closed at the end of the test.
func Attach(tb testing.TB, addr, user, token string) *client.Fsys {
	tb.Helper()
	c, err := client.Dial("tcp", addr)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	fsys, err := c.Attach(nil, user, token)
	if err != nil {
		c.Close()
		tb.Fatalf("attach %s: %v", addr, err)
	}
	tb.Cleanup(func() { fsys.Close() })
	return fsys
}

// ReadAll reads a fid from offset 0 to the end, at explicit offsets. An
// empty read is the end as io.EOF is.
func ReadAll(fid *client.Fid) ([]byte, error) {
	var out []byte
	buf := make([]byte, 8192)
	for {
		n, err := fid.ReadAt(buf, int64(len(out)))
		out = append(out, buf[:n]...)
		if err == io.EOF || (err == nil && n == 0) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// ReadErr is the whole file at path, or the error opening or reading it.
func ReadErr(fsys *client.Fsys, path string) (string, error) {
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	b, err := ReadAll(fid)
	return string(b), err
}

// Cat is the whole file at path; an error fails tb.
func Cat(tb testing.TB, fsys *client.Fsys, path string) string {
	tb.Helper()
	s, err := ReadErr(fsys, path)
	if err != nil {
		tb.Fatalf("read %s: %v", path, err)
	}
	return s
}

// Ask writes a request at offset 0 of a fid opened for reading and
// writing and reads the answer on the same fid, as 9p rdwr does.
func Ask(fsys *client.Fsys, path, req string) (string, error) {
	fid, err := fsys.Open(path, plan9.ORDWR)
	if err != nil {
		return "", err
	}
	defer fid.Close()
	if _, err := fid.WriteAt([]byte(req), 0); err != nil {
		return "", err
	}
	b, err := ReadAll(fid)
	return string(b), err
}

// MustAsk is Ask; an error fails tb.
func MustAsk(tb testing.TB, fsys *client.Fsys, path, req string) string {
	tb.Helper()
	s, err := Ask(fsys, path, req)
	if err != nil {
		tb.Fatalf("%s <- %q: %v", path, req, err)
	}
	return s
}

// AskFails checks that a request is a 9P error whose text has every
// substring.
func AskFails(tb testing.TB, fsys *client.Fsys, path, req string, subs ...string) {
	tb.Helper()
	out, err := Ask(fsys, path, req)
	if err == nil {
		tb.Fatalf("%s <- %q: succeeded with %q, want an error", path, req, out)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			tb.Errorf("%s <- %q: error %q does not say %q", path, req, err, s)
		}
	}
}

// Ls is the sorted names in the directory at path; an error fails tb.
func Ls(tb testing.TB, fsys *client.Fsys, path string) []string {
	tb.Helper()
	fid, err := fsys.Open(path, plan9.OREAD)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	defer fid.Close()
	dirs, err := fid.Dirreadall()
	if err != nil {
		tb.Fatalf("list %s: %v", path, err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, d.Name)
	}
	sort.Strings(names)
	return names
}
