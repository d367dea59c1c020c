package sandbox

// maxTrees bounds the views of cwds a Sandbox keeps; past it a call builds
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
func (s *Sandbox) grantCwd(sb *sandboxSpec, cwd string, writable bool) {
	if s.view == nil || !s.view.protects(cwd) {
		if writable {
			sb.rw = append(sb.rw, cwd)
		} else if !s.view.grants(cwd) {
			sb.ro = append(sb.ro, cwd)
		}
		return
	}
	key := treeKey{cwd, writable}
	s.treesMu.Lock()
	defer s.treesMu.Unlock()
	if v, ok := s.trees[key]; ok {
		sb.trees = append(sb.trees, v)
		return
	}
	v := s.view.tree(cwd, writable)
	if len(s.trees) >= maxTrees {
		sb.transient = append(sb.transient, v)
		return
	}
	if s.trees == nil {
		s.trees = make(map[treeKey]*fsView)
	}
	s.trees[key] = v
	sb.trees = append(sb.trees, v)
}
