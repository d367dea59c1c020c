package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolnode/toolnode/acl"
)

// Suffixes of the files a tools and an agents directory hold.
const (
	MetaSuffix    = ".meta"
	ProfileSuffix = ".json"
)

// MaxFileSize is the largest .meta or profile file read; a larger one is
// a problem, not a tool.
const MaxFileSize = 1 << 20

// DirTool is one valid tool found in a tools directory.
type DirTool struct {
	Name   string
	Meta   []byte // the .meta file as read
	Parsed *Meta
	Exec   string   // absolute path of the executable NAME beside NAME.meta, "" if none
	Notes  []string // ParseMeta's notes (legacy fields and the like), for the log
}

// Problem is a file of a scanned directory that was skipped: File is its
// path, Err the reason (wrapping ErrInvalidMeta, ErrInvalidName, ...).
type Problem struct {
	File string
	Err  error
}

func (p Problem) Error() string { return p.File + ": " + p.Err.Error() }

func (p Problem) Unwrap() error { return p.Err }

// ScanTools reads every NAME.meta in dir (not its subdirectories) and
// returns the valid tools by name. A file with a bad name, unreadable or
// invalid content is returned as a Problem; hidden files (".x.meta", such
// as editor lock files) are skipped silently. A tool's Exec is the file
// NAME beside NAME.meta when that is a regular file (symlinks followed)
// with an execute bit. err is only for a directory that cannot be read; a
// missing directory is an empty result. Files are read and parsed by
// GOMAXPROCS workers.
func ScanTools(dir string) (map[string]DirTool, []Problem, error) {
	var abs string
	execs := make(map[string]fs.DirEntry)
	found, problems, err := scanDir(dir, MetaSuffix,
		func(entries []fs.DirEntry) {
			for _, e := range entries {
				if !e.IsDir() && !strings.HasSuffix(e.Name(), MetaSuffix) {
					execs[e.Name()] = e
				}
			}
		},
		func(name string, data []byte) (DirTool, error) {
			m, notes, err := ParseMeta(data)
			if err != nil {
				return DirTool{}, err
			}
			t := DirTool{Name: name, Meta: data, Parsed: m, Notes: notes}
			if e, ok := execs[name]; ok && isExecEntry(dir, e) {
				t.Exec = filepath.Join(abs, name)
			}
			return t, nil
		},
		&abs)
	return found, problems, err
}

// isExecEntry reports whether e, an entry of dir, is a regular file with
// an execute bit (a symlink is followed).
func isExecEntry(dir string, e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink != 0 {
		return isExecutable(filepath.Join(dir, e.Name()))
	}
	if !e.Type().IsRegular() {
		return false
	}
	fi, err := e.Info()
	return err == nil && fi.Mode().Perm()&0o111 != 0
}

// Profile is an agent profile. Fields other than autoLoad and tools are
// ignored.
type Profile struct {
	AutoLoad []string `json:"autoLoad"`
	// Tools, when set, is the allow-list of DESIGN §9: glob patterns of
	// the tools an agent made from the profile may load and call.
	Tools []string `json:"tools"`
}

// ParseProfile decodes an agent profile: a JSON object whose optional
// autoLoad is an array of valid tool names (duplicates are dropped). The
// error wraps ErrInvalidProfile and says what is wrong and where.
func ParseProfile(data []byte) (*Profile, error) {
	obj, err := decodeObject(data, "")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidProfile, err)
	}
	p := new(Profile)
	if err := parseProfileTools(obj, p); err != nil {
		return nil, err
	}
	raw, ok := obj.get("autoLoad")
	if !ok || isNull(raw) {
		return p, nil
	}
	if raw[0] != '[' {
		return nil, fmt.Errorf("%w: autoLoad: want an array of tool names, got %s", ErrInvalidProfile, jsonKind(raw))
	}
	for i, e := range arrayElems(raw) {
		if e[0] != '"' {
			return nil, fmt.Errorf("%w: autoLoad[%d]: want a tool name (a string), got %s", ErrInvalidProfile, i, jsonKind(e))
		}
		name := decodeString(e)
		if err := ValidName(name); err != nil {
			return nil, fmt.Errorf("%w: autoLoad[%d]: %w", ErrInvalidProfile, i, err)
		}
		if !slices.Contains(p.AutoLoad, name) {
			p.AutoLoad = append(p.AutoLoad, name)
		}
	}
	return p, nil
}

func parseProfileTools(obj members, p *Profile) error {
	raw, ok := obj.get("tools")
	if !ok || isNull(raw) {
		return nil
	}
	if raw[0] != '[' {
		return fmt.Errorf("%w: tools: want an array of tool name patterns, got %s", ErrInvalidProfile, jsonKind(raw))
	}
	for i, e := range arrayElems(raw) {
		if e[0] != '"' {
			return fmt.Errorf("%w: tools[%d]: want a pattern (a string), got %s", ErrInvalidProfile, i, jsonKind(e))
		}
		p.Tools = append(p.Tools, decodeString(e))
	}
	if err := acl.CheckTools(p.Tools); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidProfile, err)
	}
	return nil
}

// DirProfile is one valid profile found in an agents directory.
type DirProfile struct {
	Name   string
	Data   []byte // the file as read
	Parsed *Profile
}

// ScanProfiles reads every NAME.json in dir, like ScanTools does .meta
// files.
func ScanProfiles(dir string) (map[string]DirProfile, []Problem, error) {
	var abs string
	return scanDir(dir, ProfileSuffix, nil,
		func(name string, data []byte) (DirProfile, error) {
			p, err := ParseProfile(data)
			if err != nil {
				return DirProfile{}, err
			}
			return DirProfile{Name: name, Data: data, Parsed: p}, nil
		},
		&abs)
}

// parallelFrom is the number of files from which a scan uses workers.
const parallelFrom = 64

// scanDir is the shared body of ScanTools and ScanProfiles. It lists dir
// once, hands the listing to index (which runs before any parse, may be
// nil), then reads and parses every NAME+suffix file in parallel. *abs is
// set to the absolute dir before any parse.
func scanDir[T any](dir, suffix string, index func([]fs.DirEntry), parse func(name string, data []byte) (T, error), abs *string) (map[string]T, []Problem, error) {
	found := make(map[string]T)
	entries, err := readDirUnsorted(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return found, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read directory %s: %w", dir, err)
	}
	if *abs, err = filepath.Abs(dir); err != nil {
		return nil, nil, fmt.Errorf("read directory %s: %w", dir, err)
	}
	if index != nil {
		index(entries)
	}
	var files []fs.DirEntry
	var problems []Problem
	for _, e := range entries {
		fname := e.Name()
		name, ok := strings.CutSuffix(fname, suffix)
		if !ok || strings.HasPrefix(fname, ".") {
			continue
		}
		if e.IsDir() {
			problems = append(problems, Problem{filepath.Join(dir, fname), errors.New("is a directory")})
			continue
		}
		if err := ValidName(name); err != nil {
			problems = append(problems, Problem{filepath.Join(dir, fname), err})
			continue
		}
		if suffix == ".meta" && strings.Contains(name, "__") {
			// The cluster names upstream MCP servers' tools SERVER__TOOL.
			problems = append(problems, Problem{filepath.Join(dir, fname), fmt.Errorf("%w %q: \"__\" is for the tools of upstream MCP servers (SERVER__TOOL); choose another name", ErrInvalidName, name)})
			continue
		}
		files = append(files, e)
	}

	type result struct {
		val T
		err error
	}
	results := make([]result, len(files))
	work := func(i int) {
		e := files[i]
		name := strings.TrimSuffix(e.Name(), suffix)
		data, err := readFileLimited(filepath.Join(dir, e.Name()), MaxFileSize)
		if err != nil {
			results[i].err = err
			return
		}
		results[i].val, results[i].err = parse(name, data)
	}
	workers := runtime.GOMAXPROCS(0)
	if len(files) < parallelFrom || workers < 2 {
		for i := range files {
			work(i)
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(files) {
						return
					}
					work(i)
				}
			})
		}
		wg.Wait()
	}
	for i, r := range results {
		if r.err != nil {
			problems = append(problems, Problem{filepath.Join(dir, files[i].Name()), r.err})
			continue
		}
		found[strings.TrimSuffix(files[i].Name(), suffix)] = r.val
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.File, b.File) })
	return found, problems, nil
}

// readDirUnsorted lists dir without sorting (the callers index by name).
func readDirUnsorted(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// readBufs are scratch buffers of readFileLimited.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// readFileLimited reads a whole file of at most limit bytes. The result is
// exactly as long as the file (it is kept, so no spare capacity).
func readFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	buf := *bp
	n := 0
	for {
		if n == len(buf) {
			if int64(n) > limit {
				break
			}
			buf = append(buf, make([]byte, len(buf))...)
			*bp = buf[:cap(buf)]
			buf = *bp
		}
		m, err := f.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(n) > limit {
		return nil, fmt.Errorf("file is larger than %d bytes", limit)
	}
	return bytes.Clone(buf[:n]), nil
}
