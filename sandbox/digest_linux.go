//go:build linux

package sandbox

import (
	"os"
	"syscall"
	"time"
)

// fileID is what changes when a file's content can have changed.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// fileIDOf returns the identity of a file and whether a digest may be
// remembered under it: not while its change time is under a second old,
// since file times move in clock ticks and a write in the same tick as
// the hash would leave them as they were (git's "racy" entries).
func fileIDOf(fi os.FileInfo) (fileID, bool) {
	id, ok := fileIDOfUnchecked(fi)
	if !ok || time.Since(time.Unix(id.ctime.Unix())) < time.Second {
		return fileID{}, false
	}
	return id, true
}

// fileIDOfUnchecked is the identity of a file, however recent.
func fileIDOfUnchecked(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, true
}
