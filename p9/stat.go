package p9

import (
	"fmt"

	"github.com/knusbaum/go9p/proto"
)

func (c *conn) statFid(fc *proto.TStat) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	st := c.s.stat(f.n)
	if h, _ := f.handle(); h != nil {
		if u, ok := h.(*upload); ok {
			st.Length = uint64(u.size()) // the writer sees what it wrote
		}
	}
	m := proto.RStat{Header: proto.Header{Type: proto.Rstat, Tag: fc.Tag}, Stat: st}
	return m.Compose(), nil
}

// wstat accepts what clients send to files they only write: a sync (every
// field "don't touch"), a truncation to length 0 and new times, on
// writable files, and a new mode for t/NAME. It refuses renames, owner
// changes and other mode changes. A truncation of a fid open for writing
// empties its buffer. A truncation of any other fid of t/ or a/ empties
// the buffers of the path's open uploads, or, when none is open, the
// buffer of the next open for writing (Server.truncatePath): 9pfuse
// truncates on the path's fid and writes on another, opened without
// OTRUNC, before or after.
func (c *conn) wstat(fc *proto.TWstat) ([]byte, error) {
	f, err := c.getFid(fc.Fid)
	if err != nil {
		return nil, err
	}
	n, st := f.n, &fc.Stat
	cur := c.s.stat(n)
	// FUSE sends Unix modes: only the directory and permission bits count.
	const modeBits = proto.DMDIR | 0o777
	chmod := st.Mode != ^uint32(0) && n.kind == kTExec && st.Mode&proto.DMDIR == 0
	switch {
	case st.Name != "" && st.Name != n.name:
		return nil, fmt.Errorf("permission denied: cannot rename %s: the names of the tree are fixed", n.path)
	case st.Uid != "" || st.Gid != "" || st.Muid != "":
		return nil, fmt.Errorf("permission denied: cannot change the owner of %s", n.path)
	case st.Mode != ^uint32(0) && !chmod && st.Mode&modeBits != cur.Mode&modeBits:
		return nil, fmt.Errorf("permission denied: cannot change the mode of %s: it is %s", n.path, modeString(cur.Mode))
	case st.Type != ^uint16(0) && st.Type != cur.Type,
		st.Dev != ^uint32(0) && st.Dev != cur.Dev,
		!dontTouchQid(st.Qid) && st.Qid != cur.Qid:
		return nil, fmt.Errorf("permission denied: cannot change the type, device or qid of %s", n.path)
	}
	touchTimes := st.Atime != ^uint32(0) || st.Mtime != ^uint32(0)
	truncate := st.Length != ^uint64(0)
	if touchTimes || truncate || chmod {
		if err := need(f.who, writeRole(n.kind), "change", n); err != nil {
			return nil, err
		}
	}
	if (touchTimes || truncate) && !n.writable() {
		if n.isDir() {
			return nil, fmt.Errorf("permission denied: cannot change directory %s", n.path)
		}
		return nil, errReadOnly(n)
	}
	if truncate && st.Length != 0 {
		return nil, fmt.Errorf("invalid length: %s can only be truncated to length 0", n.path)
	}
	if chmod {
		if err := c.s.chmodExec(c.backendFor(f.who), n, st.Mode&0o777); err != nil {
			return nil, err
		}
	}
	if truncate {
		if h, _ := f.handle(); h != nil {
			h.truncate()
		} else if isUpload(n.kind) && c.s.truncatePath(n.path, nil) == 0 {
			c.s.setTrunc(n.path)
		}
	}
	m := proto.RWstat{Header: proto.Header{Type: proto.Rwstat, Tag: fc.Tag}}
	return m.Compose(), nil
}

func dontTouchQid(q proto.Qid) bool {
	return q.Qtype == 0xFF && q.Vers == ^uint32(0) && q.Uid == ^uint64(0)
}

// modeString renders permission bits as ls does, with a leading d for
// directories.
func modeString(m uint32) string {
	const rwx = "rwxrwxrwx"
	b := []byte("----------")
	if m&proto.DMDIR != 0 {
		b[0] = 'd'
	}
	for i := range 9 {
		if m&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	return string(b)
}
