package registry

// maxTrees bounds the views of cwds a Runner keeps; past it a call builds
// its own and closes it after.
const maxTrees = 64

// treeKey names the view of a cwd around a protected path.
type treeKey struct {
	dir      string
	writable bool
}

// grantCwd adds the session's cwd to sb, writable or read-only. A cwd that
// holds a protected path (a session started in the home directory, which
// holds ~/.ssh) is granted as the siblings along the way to it, like the
// read view, since a grant of the whole cwd would open the protected
// path too.
func (r *Runner) grantCwd(sb *sandboxSpec, cwd string, writable bool) {
	if r.view == nil || !r.view.protects(cwd) {
		if writable {
			sb.rw = append(sb.rw, cwd)
		} else if !r.view.grants(cwd) {
			sb.ro = append(sb.ro, cwd)
		}
		return
	}
	key := treeKey{cwd, writable}
	r.treesMu.Lock()
	defer r.treesMu.Unlock()
	if v, ok := r.trees[key]; ok {
		sb.trees = append(sb.trees, v)
		return
	}
	v := r.view.tree(cwd, writable)
	if len(r.trees) >= maxTrees {
		sb.transient = append(sb.transient, v)
		return
	}
	if r.trees == nil {
		r.trees = make(map[treeKey]*fsView)
	}
	r.trees[key] = v
	sb.trees = append(sb.trees, v)
}
