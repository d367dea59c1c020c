//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Read rights a tool gets beneath a directory or on a file it may read.
const (
	roDirAccess  = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir
	roFileAccess = llsys.AccessFSExecute | llsys.AccessFSReadFile
	// allFSAccess is every right; granted, it is masked with what the
	// kernel handles.
	allFSAccess = llsys.AccessFSResolveUnix<<1 - 1
)

// fsView is the read half of the sandbox: everything but the protected
// trees. Landlock only grants, so "everything but P" is the set of
// siblings along each protected path: walking from / down to each P,
// every entry of a directory on the way that is neither P nor on the way
// to another protected path is granted read and execute beneath it.
// Directories on the way (/, /home, ...) are walked but not granted: a
// tool can resolve paths through them and stat them, but not list them,
// since a Landlock rule on a directory covers all beneath it.
//
// The rules are opened once (O_PATH descriptors, close-on-exec) and reused
// by every call; they are rebuilt when a directory on the way changes
// (its inode, mtime or ctime: an entry was added, removed or renamed), so
// a directory made next to a protected path after the last call is
// readable by the next one. A protected path that does not exist yet is
// still kept out when it appears: its parent changes, and the walk skips
// it. Symbolic links among the siblings are not granted themselves: what
// they point at is readable when it is granted on its own path.
type fsView struct {
	root      string   // the tree granted: "/" for reading, a cwd for writing
	protected []string // absolute, symbolic links resolved, none beneath another, all beneath root
	dirAccess uint64   // granted beneath each directory of the tree
	fileAcc   uint64   // granted on each other file of the tree

	mu    sync.RWMutex
	rules *fsRules // nil until first built; guarded by mu
}

// fsRules is one walk of the layout.
type fsRules struct {
	stamps []dirStamp
	rules  []pathRule

	dirAccess, fileAccess uint64 // what grant gives
}

// dirStamp is a directory on the way to a protected path, as walked.
type dirStamp struct {
	path         string
	dev, ino     uint64
	mtime, ctime unix.Timespec
}

// pathRule is a granted tree: an O_PATH descriptor and its rights.
type pathRule struct {
	fd     int
	access uint64
}

// newFSView returns the view that grants reading everything but the
// trees of protected.
func newFSView(protected []string) *fsView {
	return &fsView{root: "/", protected: cleanProtected(protected), dirAccess: roDirAccess, fileAcc: roFileAccess}
}

// newTreeView returns the view that grants dirAccess and fileAccess in the
// tree of root but not in the trees of protected beneath it: a session's
// cwd around a protected path. Entries directly in a directory on the way
// (root itself included) can be read and written but not made, removed or
// renamed.
func newTreeView(root string, protected []string, dirAccess, fileAccess uint64) *fsView {
	root = resolveExisting(filepath.Clean(root))
	var inside []string
	for _, p := range cleanProtected(protected) {
		if p != root && within(p, root) {
			inside = append(inside, p)
		}
	}
	return &fsView{root: root, protected: inside, dirAccess: dirAccess, fileAcc: fileAccess}
}

// tree returns the view of dir without v's protected paths, writable or
// read-only.
func (v *fsView) tree(dir string, writable bool) *fsView {
	if writable {
		return newTreeView(dir, v.protected, allFSAccess, fileRWAccess)
	}
	return newTreeView(dir, v.protected, roDirAccess, roFileAccess)
}

// close closes the descriptors of the view's rules.
func (v *fsView) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rules != nil {
		v.rules.close()
		v.rules = nil
	}
}

// protects reports whether a protected path lies strictly beneath dir.
func (v *fsView) protects(dir string) bool {
	dir = resolveExisting(filepath.Clean(dir))
	for _, p := range v.protected {
		if p != dir && within(p, dir) {
			return true
		}
	}
	return false
}

// grants reports whether the view already gives path what a read rule on
// it would (roDirAccess beneath a directory, roFileAccess on a file): the
// view grants read, and path, its symbolic links resolved, lies in no
// protected tree and is no directory on the way to one. A rule for such a
// path would add nothing to the ruleset. A path that cannot be resolved
// counts as not granted.
func (v *fsView) grants(path string) bool {
	if v == nil || v.root != "/" || v.dirAccess != roDirAccess || v.fileAcc != roFileAccess {
		return false
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil || !filepath.IsAbs(real) {
		return false
	}
	for _, p := range v.protected {
		if within(real, p) || within(p, real) {
			return false
		}
	}
	return true
}

// cleanProtected makes each path absolute and resolves its symbolic links
// (as far as it exists: the rest is kept as written), drops duplicates
// and paths beneath another protected path, and sorts them.
func cleanProtected(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		out = append(out, resolveExisting(filepath.Clean(p)))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	var kept []string
	for _, p := range out {
		if len(kept) > 0 && within(p, kept[len(kept)-1]) {
			continue // sorted: a parent comes right before its children's run
		}
		kept = append(kept, p)
	}
	return kept
}

// resolveExisting resolves the symbolic links of the longest existing
// prefix of p.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// current returns the rules for the layout as it is now, rebuilding them
// when it changed, with the read lock held: the caller adds them to its
// ruleset and then calls release.
func (v *fsView) current() (rules []pathRule, release func(), err error) {
	built, release, err := v.currentRules()
	if err != nil {
		return nil, nil, err
	}
	return built.rules, release, nil
}

// currentRules is current, returning the walk itself, whose identity
// isCurrent checks later.
func (v *fsView) currentRules() (rules *fsRules, release func(), err error) {
	v.mu.RLock()
	if v.rules != nil && v.rules.fresh() {
		return v.rules, v.mu.RUnlock, nil
	}
	v.mu.RUnlock()
	v.mu.Lock()
	if v.rules == nil || !v.rules.fresh() {
		built, err := walkView(v.root, v.protected, v.dirAccess, v.fileAcc)
		if err != nil {
			v.mu.Unlock()
			return nil, nil, err
		}
		if v.rules != nil {
			v.rules.close()
		}
		v.rules = built
	}
	v.mu.Unlock()
	// Use what is there now without checking again: under constant churn
	// beside a protected path, checking again could rebuild forever.
	v.mu.RLock()
	return v.rules, v.mu.RUnlock, nil
}

// isCurrent reports whether rules is the view's walk and the layout has
// not changed since: a ruleset filled from it ahead of a call grants
// exactly what one filled now would.
func (v *fsView) isCurrent(rules *fsRules) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return rules != nil && v.rules == rules && rules.fresh()
}

// size returns how many trees are granted, building the rules if needed.
func (v *fsView) size() (int, error) {
	rules, release, err := v.current()
	if err != nil {
		return 0, err
	}
	defer release()
	return len(rules), nil
}

// fresh reports whether every directory walked is unchanged.
func (r *fsRules) fresh() bool {
	for _, s := range r.stamps {
		now, ok := stampOf(s.path)
		if !ok || now != s {
			return false
		}
	}
	return true
}

func (r *fsRules) close() {
	for _, pr := range r.rules {
		_ = unix.Close(pr.fd)
	}
}

func stampOf(path string) (dirStamp, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return dirStamp{}, false
	}
	return dirStamp{path: path, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}, true
}

// walkView walks from root to each protected path beneath it and opens
// the siblings, to be granted dirAccess (directories) or fileAccess.
func walkView(root string, protected []string, dirAccess, fileAccess uint64) (*fsRules, error) {
	isProtected := make(map[string]bool, len(protected))
	onTheWay := map[string]bool{}
	for _, p := range protected {
		isProtected[p] = true
		for d := filepath.Dir(p); within(d, root); d = filepath.Dir(d) {
			onTheWay[d] = true
			if d == root || d == "/" {
				break
			}
		}
	}
	r := &fsRules{dirAccess: dirAccess, fileAccess: fileAccess}
	if len(protected) == 0 {
		return r, r.grant(root, os.ModeDir)
	}
	if isProtected[root] {
		return r, nil // nothing granted
	}
	if root != "/" {
		// A cwd must be listable: listing is granted in all of it, so
		// the names in a protected path beneath it can be listed, though
		// not read.
		if err := r.grantAccess(root, llsys.AccessFSReadDir); err != nil {
			return nil, err
		}
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		stamp, ok := stampOf(dir)
		if !ok {
			// Not a directory (any more): nothing beneath it to protect,
			// and its parent's stamp notices when that changes.
			return nil
		}
		r.stamps = append(r.stamps, stamp)
		entries, err := os.ReadDir(dir)
		if err != nil {
			// The node cannot list it, so grants nothing beneath it: the
			// tool, as the same user, could not read it either.
			return nil
		}
		for _, e := range entries {
			child := filepath.Join(dir, e.Name())
			switch {
			case isProtected[child]:
			case onTheWay[child] && e.IsDir():
				if err := walk(child); err != nil {
					return err
				}
			case e.Type()&os.ModeSymlink != 0:
			default:
				if err := r.grant(child, e.Type()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// grantAccess opens the directory path and records access beneath it.
func (r *fsRules) grantAccess(path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	r.rules = append(r.rules, pathRule{fd: fd, access: access})
	return nil
}

// grant opens path and records read rights beneath it; typ is its type
// as the directory listing gave it (it spares a stat when known). A path
// that went away since it was listed is skipped.
func (r *fsRules) grant(path string, typ os.FileMode) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	access := r.fileAccess
	if typ&os.ModeDir != 0 {
		access = r.dirAccess
	} else if typ&os.ModeType == os.ModeIrregular {
		// Type unknown: ask.
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			access = r.dirAccess
		}
	}
	r.rules = append(r.rules, pathRule{fd: fd, access: access})
	return nil
}
