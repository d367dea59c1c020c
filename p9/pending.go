package p9

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// pendingTTL is how long a file created in t/ or a/ and never published
// stays pending after its fid is closed, by default.
const pendingTTL = time.Minute

// maxPendingFiles bounds the files created and not yet published that
// the server keeps after their fids are closed.
const maxPendingFiles = 4096

// markCreated keeps path pending for Options.PendingTTL from now, so a
// file created by one fid (plan9port's "9p create") can be opened by the
// next. It fails when maxPendingFiles are pending already.
func (s *Server) markCreated(path string) error {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	now := time.Now()
	if _, ok := s.created[path]; !ok && len(s.created) >= maxPendingFiles {
		for p, until := range s.created {
			if now.After(until) {
				delete(s.created, p)
			}
		}
		if len(s.created) >= maxPendingFiles {
			return fmt.Errorf("temporarily unavailable: %d files are created and not yet written on this node, its limit; try again in a minute", len(s.created))
		}
	}
	s.created[path] = now.Add(s.opt.PendingTTL)
	return nil
}

// published forgets what was pending about path once it is published.
func (s *Server) published(path string) {
	s.pmu.Lock()
	delete(s.created, path)
	delete(s.truncs, path)
	s.pmu.Unlock()
}

// forgetPending drops a pending file (rm of a file created and never
// written). It reports whether there was one.
func (s *Server) forgetPending(path string) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	until, ok := s.created[path]
	delete(s.created, path)
	delete(s.truncs, path)
	return ok && time.Now().Before(until) || len(s.pending[path]) > 0
}

// truncatePath empties every open upload of path but except, and
// reports how many there were. Clients truncate on a fid other than the
// one they write on: 9pfuse sends the Twstat of length 0, or an open
// with OTRUNC that it closes at once, on the path's fid, before or after
// it opens the fid it writes on.
func (s *Server) truncatePath(path string, except *upload) int {
	n := 0
	for _, u := range s.pendingUploads(path) {
		if u != except {
			u.truncate()
			n++
		}
	}
	return n
}

// setTrunc makes the next open for writing of path, within
// Options.PendingTTL, start empty: a truncation with no upload open yet.
func (s *Server) setTrunc(path string) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	now := time.Now()
	if len(s.truncs) >= maxPendingFiles {
		for p, until := range s.truncs {
			if now.After(until) {
				delete(s.truncs, p)
			}
		}
		if len(s.truncs) >= maxPendingFiles {
			return // the truncation of open uploads has been done; only the next open's is lost
		}
	}
	s.truncs[path] = now.Add(s.opt.PendingTTL)
}

// takeTrunc reports and consumes a truncation waiting for path.
func (s *Server) takeTrunc(path string) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	until, ok := s.truncs[path]
	delete(s.truncs, path)
	return ok && time.Now().Before(until)
}

// pendingUploads are the open uploads of a path, on every connection.
func (s *Server) pendingUploads(path string) []*upload {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	return slices.Clone(s.pending[path])
}

// isPending reports whether path is a file of t/ or a/ being written or
// created and not yet published: walks find it, reads see it empty.
func (s *Server) isPending(path string) bool {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if len(s.pending[path]) > 0 {
		return true
	}
	until, ok := s.created[path]
	if ok && !time.Now().Before(until) {
		delete(s.created, path)
		return false
	}
	return ok
}

// pendingNames lists the pending files of directory dir ("t" or "a").
func (s *Server) pendingNames(dir string) []string {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	now := time.Now()
	var out []string
	for p := range s.pending {
		if d, name, _ := strings.Cut(p, "/"); d == dir {
			out = append(out, name)
		}
	}
	for p, until := range s.created {
		if d, name, _ := strings.Cut(p, "/"); d == dir && now.Before(until) && len(s.pending[p]) == 0 {
			out = append(out, name)
		}
	}
	return out
}

func (s *Server) dropPending(u *upload) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	l := s.pending[u.n.path]
	if i := slices.Index(l, u); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(s.pending, u.n.path)
	} else {
		s.pending[u.n.path] = l
	}
}

// execMode is the stat mode of t/NAME: as published, else as an open
// upload will publish it, else 0755.
func (s *Server) execMode(n *node) uint32 {
	if m, ok := s.b.ToolExecMode(n.arg); ok {
		return m & 0o777
	}
	if ups := s.pendingUploads(n.path); len(ups) > 0 {
		return ups[0].mode.Load()
	}
	return defaultExecMode
}

// chmodExec is a Twstat of t/NAME's mode: open uploads of the file will
// publish with it, and a published executable is published again with it.
func (s *Server) chmodExec(b Backend, n *node, perm uint32) error {
	ups := s.pendingUploads(n.path)
	for _, u := range ups {
		u.mode.Store(perm)
	}
	if _, ok := b.ToolExecutable(n.arg); !ok {
		if len(ups) > 0 {
			return nil
		}
		return fmt.Errorf("tool %q has no published executable", n.arg)
	}
	if m, ok := b.ToolExecMode(n.arg); ok && m&0o777 == perm {
		return nil
	}
	return b.ChmodToolExec(n.arg, perm)
}
