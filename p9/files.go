package p9

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// openHandle makes the per-fid state of an opened node. Read-only files
// take their snapshot here, so an open of a file that cannot be read (a
// killed agent's preamble) fails at the open.
func (s *Server) openHandle(b Backend, n *node) (handle, error) {
	switch n.kind {
	case kRoot, kTDir, kADir, kMDir, kClusterDir, kSessionDir, kSession, kAgentDir, kAgent, kVDir, kVTool:
		return newDirHandle(s, b, n)
	case kVIdx, kVMeta, kVExec, kVCtl:
		return s.openVersion(b, n)
	case kTrustDir, kTrustIdx, kTrustNew, kTrustCtl:
		return s.openTrust(b, n)
	case kTSig:
		return newSigHandle(s, b, n), nil
	case kTIdx:
		return newSnapshot(func() ([]byte, error) { return indexText(b.ToolIndex()), nil })
	case kTMeta:
		return newSnapshot(func() ([]byte, error) {
			meta, ok := b.ToolMeta(n.arg)
			if !ok {
				return s.pendingText(n, "file does not exist: no tool %q in the cluster")
			}
			return withNewline(meta), nil
		})
	case kTExec:
		exe, ok := b.ToolExecutable(n.arg)
		if !ok {
			return newSnapshot(func() ([]byte, error) {
				return s.pendingText(n, "file does not exist: tool %q has no published executable")
			})
		}
		r, err := exe.Open()
		if err != nil {
			return nil, fmt.Errorf("tool %q: %v", n.arg, err)
		}
		return &execHandle{r: r, size: exe.Size}, nil
	case kProfile:
		return newSnapshot(func() ([]byte, error) {
			p, ok := b.Profile(n.arg)
			if !ok {
				return s.pendingText(n, "file does not exist: no agent profile %q in the cluster")
			}
			return withNewline(p), nil
		})
	case kServer:
		return newSnapshot(func() ([]byte, error) {
			p, ok := serversOf(b).ServerDef(n.arg)
			if !ok {
				return s.pendingText(n, "file does not exist: no mcp server %q in the cluster")
			}
			return withNewline(p), nil
		})
	case kNode:
		return newSnapshot(func() ([]byte, error) { return withNewline([]byte(b.NodeInfo())), nil })
	case kMembers:
		return newSnapshot(func() ([]byte, error) { return withNewline([]byte(b.Members())), nil })
	case kSessIdx:
		return newSnapshot(func() ([]byte, error) {
			l, err := b.Sessions()
			return lines(l), err
		})
	case kLoaded:
		return newSnapshot(func() ([]byte, error) {
			l, err := b.Loaded(n.sess, n.agent)
			return lines(l), agentErr(n, err)
		})
	case kRev:
		return newSnapshot(func() ([]byte, error) {
			rev, err := b.Rev(n.sess, n.agent)
			if err != nil {
				return nil, agentErr(n, err)
			}
			return strconv.AppendUint(make([]byte, 0, 8), rev, 10), nil
		}, '\n')
	case kPreamble:
		return newSnapshot(func() ([]byte, error) {
			p, err := b.Preamble(n.sess, n.agent)
			return withNewline([]byte(p)), agentErr(n, err)
		})
	case kEvents:
		return newEvents(s), nil
	case kCall:
		return newCall(s, b, n), nil
	case kTools:
		return &answer{
			run: perLine(func(_ *req, name string) ([]byte, error) {
				doc, err := b.ToolDoc(name)
				return withNewline([]byte(doc)), notFound(err, "no tool %q in the cluster", name)
			}),
		}, nil
	case kWhere:
		return &answer{
			run: perLine(func(_ *req, name string) ([]byte, error) {
				w, err := b.Where(name)
				return withNewline([]byte(w)), notFound(err, "no tool %q in the cluster", name)
			}),
		}, nil
	case kSessNew:
		return &answer{
			run: perLine(func(_ *req, spec string) ([]byte, error) {
				if err := checkSpec(spec, `"name=S [agent=PROFILE] [cwd=DIR]"`, "agent", "cwd"); err != nil {
					return nil, err
				}
				name, err := b.NewSession(spec)
				if err != nil {
					return nil, err
				}
				return []byte(name + "\n"), nil
			}),
		}, nil
	case kAgentNew:
		return &answer{
			run: perLine(func(_ *req, spec string) ([]byte, error) {
				if err := checkSpec(spec, `"name=A [profile=P]"`, "profile"); err != nil {
					return nil, err
				}
				name, err := b.NewAgent(n.sess, spec)
				if err != nil {
					return nil, sessionErr(n.sess, err)
				}
				return []byte(name + "\n"), nil
			}),
		}, nil
	case kSessCtl:
		return &answer{
			run: perLine(func(_ *req, cmd string) ([]byte, error) {
				if cmd != "kill" {
					return nil, fmt.Errorf("unknown command %q: session/%s/ctl takes \"kill\"", cmd, n.sess)
				}
				if err := b.KillSession(n.sess); err != nil {
					return nil, sessionErr(n.sess, err)
				}
				return []byte("killed session " + n.sess + "\n"), nil
			}),
		}, nil
	case kAgentCtl:
		return &answer{
			run: perLine(func(_ *req, cmd string) ([]byte, error) { return agentCtl(b, n, cmd) }),
		}, nil
	case kAgentTools:
		loaded := func() ([]byte, error) {
			l, err := b.Loaded(n.sess, n.agent)
			return lines(l), agentErr(n, err)
		}
		return &answer{
			usage: loaded,
			run: func(_ *req, names []string) ([]byte, error) {
				if err := b.Load(n.sess, n.agent, names); err != nil {
					return nil, agentErr(n, err)
				}
				return loaded()
			},
		}, nil
	}
	return nil, fmt.Errorf("%s cannot be opened", n.path)
}

// indexText is the text of t/idx: NAME<TAB>description, one a line.
func indexText(idx []ToolEntry) []byte {
	var buf []byte
	for _, e := range idx {
		buf = append(buf, e.Name...)
		buf = append(buf, '\t')
		buf = append(buf, oneLine(e.Description)...)
		buf = append(buf, '\n')
	}
	return buf
}

// pendingText is the content of a file of t/ or a/ that is not
// published: empty while it is pending (created, or open for writing),
// else the error notExist, formatted with the file's tool or profile.
func (s *Server) pendingText(n *node, notExist string) ([]byte, error) {
	if s.isPending(n.path) {
		return nil, nil
	}
	return nil, fmt.Errorf(notExist, n.arg)
}

const ctlUsage = `write "tool_load NAME", "tool_unload NAME", "tools_all" or "kill"`

// agentCtl runs one command written to session/S/agent/A/ctl. tool_load
// and tool_unload answer "loaded NAME" and "unloaded NAME", kill answers
// "killed agent A", tools_all answers the cluster's catalog.
func agentCtl(b Backend, n *node, line string) ([]byte, error) {
	f := strings.Fields(line)
	switch f[0] {
	case "tool_load", "tool_unload":
		if len(f) < 2 {
			return nil, fmt.Errorf("%s needs a tool name: %s NAME", f[0], f[0])
		}
		var err error
		verb := "loaded"
		if f[0] == "tool_load" {
			err = b.Load(n.sess, n.agent, f[1:])
		} else {
			err = b.Unload(n.sess, n.agent, f[1:])
			verb = "unloaded"
		}
		if err != nil {
			return nil, agentErr(n, err)
		}
		var out []byte
		for _, name := range f[1:] {
			out = append(out, verb+" "+name+"\n"...)
		}
		return out, nil
	case "tools_all":
		if len(f) > 1 {
			return nil, errors.New("tools_all takes no argument")
		}
		return withNewline([]byte(b.ToolsAll(n.sess, n.agent))), nil
	case "kill":
		if len(f) > 1 {
			return nil, errors.New("kill takes no argument")
		}
		if err := b.KillAgent(n.sess, n.agent); err != nil {
			return nil, agentErr(n, err)
		}
		return []byte("killed agent " + n.agent + "\n"), nil
	}
	return nil, fmt.Errorf("unknown command %q: %s", f[0], ctlUsage)
}

// checkSpec checks a "name=X [key=V]..." line before the Backend sees it,
// so a mistyped line gets the usage in its error.
func checkSpec(spec, usage string, keys ...string) error {
	for _, f := range strings.Fields(spec) {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case !ok || v == "":
			return fmt.Errorf("%q is not KEY=VALUE: write %s", f, usage)
		case k != "name" && !contains(keys, k):
			return fmt.Errorf("unknown key %q: write %s", k, usage)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// notFound replaces the bare ErrNotFound by a sentence; a Backend error
// that already says more is kept as is.
func notFound(err error, format string, args ...any) error {
	if err != nil && err.Error() == ErrNotFound.Error() {
		return fmt.Errorf(format, args...)
	}
	return err
}

// agentErr is notFound for the agent of n.
func agentErr(n *node, err error) error {
	return notFound(err, "agent %q does not exist in session %q", n.agent, n.sess)
}

// lines renders a list one a line; an empty list is an empty file.
func lines(l []string) []byte {
	var buf []byte
	for _, s := range l {
		buf = append(buf, s...)
		buf = append(buf, '\n')
	}
	return buf
}

// withNewline ends non-empty text with a newline.
func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b[:len(b):len(b)], '\n')
	}
	return b
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\t", " ").Replace(s)
}

// window returns the part of data a read at off for count bytes sees.
func window(data []byte, off uint64, count uint32) []byte {
	if off >= uint64(len(data)) {
		return nil
	}
	data = data[off:]
	if uint64(len(data)) > uint64(count) {
		data = data[:count]
	}
	return data
}

var (
	_ handle    = (*snapshot)(nil)
	_ handle    = (*dirHandle)(nil)
	_ handle    = (*answer)(nil)
	_ handle    = (*call)(nil)
	_ committer = (*call)(nil)
	_ handle    = (*events)(nil)
)

// snapshot is a read-only generated file. Its text is made at open and
// made again by a read at offset 0 that follows other reads, so a reader
// paging through it sees one consistent text and a reader that starts
// over sees the present. Reads are serialized by mu.
type snapshot struct {
	gen   func() ([]byte, error)
	mu    sync.Mutex
	data  []byte
	fresh bool // made at open and not yet read
}

// newSnapshot makes a snapshot file; suffix, if given, is appended to
// every text generated.
func newSnapshot(gen func() ([]byte, error), suffix ...byte) (*snapshot, error) {
	if len(suffix) > 0 {
		inner := gen
		gen = func() ([]byte, error) {
			b, err := inner()
			return append(b, suffix...), err
		}
	}
	data, err := gen()
	if err != nil {
		return nil, err
	}
	return &snapshot{gen: gen, data: data, fresh: true}, nil
}

func (f *snapshot) read(_ *req, off uint64, count uint32) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off == 0 && !f.fresh {
		data, err := f.gen()
		if err != nil {
			return nil, err
		}
		f.data = data
	}
	f.fresh = false
	return window(f.data, off, count), nil
}

func (f *snapshot) write(*req, uint64, []byte) (int, error) {
	return 0, errors.New("file is read-only")
}
func (f *snapshot) truncate() {}
func (f *snapshot) close()    {}

// execHandle is a published executable open for reading: reads go to
// the Backend's file at their offsets, so the node never holds the whole
// executable in memory. The version opened is the one read to the end.
type execHandle struct {
	r    ExecReader
	size int64
}

func (h *execHandle) read(_ *req, off uint64, count uint32) ([]byte, error) {
	if off >= uint64(h.size) {
		return nil, nil
	}
	p := make([]byte, min(int64(count), h.size-int64(off)))
	n, err := h.r.ReadAt(p, int64(off))
	if err == io.EOF {
		err = nil
	}
	return p[:n], err
}

func (h *execHandle) write(*req, uint64, []byte) (int, error) {
	return 0, errors.New("file is read-only")
}
func (h *execHandle) truncate() {}
func (h *execHandle) close()    { h.r.Close() }

// dirHandle is an open directory: a snapshot of its entries, served in
// whole entries at the offsets where earlier reads ended. Reads are
// serialized by mu. b is the Backend of the fid that opened it, so a
// listing shows what that principal may see (session/: its sessions).
type dirHandle struct {
	s     *Server
	b     Backend
	n     *node
	mu    sync.Mutex
	data  []byte
	ends  []int // end offset of each entry in data
	fresh bool
}

func newDirHandle(s *Server, b Backend, n *node) (*dirHandle, error) {
	d := &dirHandle{s: s, b: b, n: n}
	if err := d.fill(); err != nil {
		return nil, err
	}
	d.fresh = true
	return d, nil
}

func (d *dirHandle) fill() error {
	kids, err := d.s.children(d.b, d.n)
	if err != nil {
		return err
	}
	d.data, d.ends = d.data[:0], d.ends[:0]
	for _, k := range kids {
		st := d.s.stat(k)
		d.data = append(d.data, st.Compose()...)
		d.ends = append(d.ends, len(d.data))
	}
	return nil
}

func (d *dirHandle) read(_ *req, off uint64, count uint32) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 && !d.fresh {
		if err := d.fill(); err != nil {
			return nil, err
		}
	}
	d.fresh = false
	if off >= uint64(len(d.data)) {
		return nil, nil
	}
	i := 0
	if off > 0 {
		// off must be where an entry ends.
		i = sort.SearchInts(d.ends, int(off))
		if i == len(d.ends) || d.ends[i] != int(off) {
			return nil, fmt.Errorf("directory read at offset %d: offsets must be 0 or where the previous read ended", off)
		}
		i++
	}
	start := int(off)
	end := start
	for ; i < len(d.ends) && d.ends[i]-start <= int(count); i++ {
		end = d.ends[i]
	}
	if end == start {
		return nil, fmt.Errorf("directory read of %d bytes is too small for the next entry", count)
	}
	return d.data[start:end], nil
}

func (d *dirHandle) write(*req, uint64, []byte) (int, error) {
	return 0, errIsDir(d.n)
}
func (d *dirHandle) truncate() {}
func (d *dirHandle) close()    {}

// answer is a file that answers writes: each write runs its lines as
// commands when it returns, and reads on the same fid from offset 0
// return the answer. A read before any write returns nothing (0 bytes),
// so plan9port's "9p rdwr", which reads first, prints only answers; a
// file with contents of its own (agent/A/tools) sets usage, and such a
// read returns that. A failed write clears the answer. Reads and writes
// are serialized by mu; a write holds it while its commands run.
type answer struct {
	usage func() ([]byte, error)                       // read before any write; nil: nothing
	run   func(r *req, lines []string) ([]byte, error) // the non-blank lines of one write

	mu     sync.Mutex
	data   []byte
	has    bool // data is an answer
	usaged bool // data is the usage text, made by a read at offset 0
}

// perLine runs one command per line, in order, and stops at the first
// error; the answer is the answers of the lines, concatenated.
func perLine(cmd func(r *req, line string) ([]byte, error)) func(*req, []string) ([]byte, error) {
	return func(r *req, lines []string) ([]byte, error) {
		var out []byte
		for _, l := range lines {
			b, err := cmd(r, l)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
		return out, nil
	}
}

// commandLines splits written text into its non-blank lines, trimmed.
func commandLines(data []byte) []string {
	var out []string
	for l := range strings.SplitSeq(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (a *answer) write(r *req, _ uint64, data []byte) (int, error) {
	cmds := commandLines(data)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(cmds) == 0 {
		return len(data), nil
	}
	out, err := a.run(r, cmds)
	if err != nil {
		a.data, a.has, a.usaged = nil, false, false
		return 0, err
	}
	a.data, a.has, a.usaged = out, true, false
	return len(data), nil
}

func (a *answer) read(_ *req, off uint64, count uint32) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.has && a.usage == nil {
		return nil, nil
	}
	if !a.has && (off == 0 || !a.usaged) {
		u, err := a.usage()
		if err != nil {
			return nil, err
		}
		a.data, a.usaged = u, true
	}
	return window(a.data, off, count), nil
}

func (a *answer) truncate() {}
func (a *answer) close()    {}
