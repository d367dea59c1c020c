package p9

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// v/: every tool's kept versions (DESIGN §8).
//
//	v/NAME/idx           r  one line per kept version, newest first:
//	                        VERSION STATE PUBLISHER TIME DIGEST SIGNER
//	v/NAME/VERSION.meta  r  that version's metadata as published
//	v/NAME/VERSION       r  that version's executable (when it has one)
//	v/NAME/ctl           w  publish role: "rollback VERSION", "canary
//	                        NODE[,NODE] [manual]", "promote", "abort"

// VersionEntry is one kept version of a tool: one line of v/NAME/idx.
type VersionEntry struct {
	Version   uint64
	State     string    // live, canary, old, aborted, withdrawn
	Publisher string    // the principal that published it; "" unknown
	Time      time.Time // when; zero unknown
	Digest    string    // the executable's SHA-256, hex; "" none
	Size      int64     // the executable's size
	Signer    string    // the trusted key that signed it; "" unsigned
	HasMeta   bool      // false for a withdrawal
}

// Versions is v/. A Backend without it serves v/ empty.
type Versions interface {
	// VersionedTools lists the tools with kept versions, sorted.
	VersionedTools() []string
	// ToolVersions lists a tool's kept versions, newest first.
	ToolVersions(name string) ([]VersionEntry, bool)
	// VersionMeta is a kept version's metadata as published.
	VersionMeta(name string, version uint64) ([]byte, bool)
	// VersionExecutable is a kept version's executable.
	VersionExecutable(name string, version uint64) (Executable, bool)
	// Rollback publishes a copy of a kept version as the tool's next
	// version and returns the version live after it; a version not kept
	// is an error starting "invalid".
	Rollback(name string, version uint64) (uint64, error)
}

// Canaries is the canary part of v/NAME/ctl; a Versions backend without
// it refuses canary, promote and abort.
type Canaries interface {
	// Canary marks the tool's next publish as a canary live only on
	// nodes; manual turns the automatic abort off.
	Canary(name string, nodes []string, manual bool) error
	// Promote makes the tool's canary live everywhere and returns its
	// version.
	Promote(name string) (uint64, error)
	// Abort drops the tool's canary.
	Abort(name string) error
}

func versionsOf(b Backend) Versions {
	v, _ := b.(Versions)
	return v
}

// versionEntry finds version ver of tool name.
func versionEntry(vb Versions, name string, ver uint64) (VersionEntry, bool) {
	if vb == nil {
		return VersionEntry{}, false
	}
	es, _ := vb.ToolVersions(name)
	for _, e := range es {
		if e.Version == ver {
			return e, true
		}
	}
	return VersionEntry{}, false
}

// parseVersion reads a version number: decimal, from 1.
func parseVersion(s string) (uint64, bool) {
	if s == "" || s[0] == '0' || s[0] == '+' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// walkVersions is walk1 in v/ and v/NAME/.
func walkVersions(s *Server, n *node, name string) (*node, error) {
	vb := versionsOf(s.b)
	if vb == nil {
		return nil, walkErr("no versions on this node")
	}
	if n.kind == kVDir {
		if _, ok := vb.ToolVersions(name); !ok {
			return nil, walkErr("no versions of tool %q", name)
		}
		c := newNode(n, kVTool, name)
		c.arg = name
		return c, nil
	}
	switch name {
	case "idx":
		return vChild(n, kVIdx, name, 0), nil
	case "ctl":
		return vChild(n, kVCtl, name, 0), nil
	}
	base, isMeta := strings.CutSuffix(name, ".meta")
	ver, ok := parseVersion(base)
	if !ok {
		return nil, walkErr("no file %q in %s", name, n.path)
	}
	e, ok := versionEntry(vb, n.arg, ver)
	switch {
	case !ok:
		return nil, walkErr("tool %q keeps no version %d", n.arg, ver)
	case isMeta && e.HasMeta:
		return vChild(n, kVMeta, name, ver), nil
	case !isMeta && e.Digest != "":
		return vChild(n, kVExec, name, ver), nil
	}
	return nil, walkErr("version %d of tool %q has no %s", ver, n.arg, name)
}

func vChild(parent *node, k kind, name string, ver uint64) *node {
	c := newNode(parent, k, name)
	c.arg, c.ver = parent.arg, ver
	return c
}

// versionChildren lists v/ and v/NAME/.
func (s *Server) versionChildren(n *node) []*node {
	vb := versionsOf(s.b)
	if vb == nil {
		return nil
	}
	var out []*node
	if n.kind == kVDir {
		for _, name := range vb.VersionedTools() {
			c := newNode(n, kVTool, name)
			c.arg = name
			out = append(out, c)
		}
		return out
	}
	out = append(out, vChild(n, kVCtl, "ctl", 0), vChild(n, kVIdx, "idx", 0))
	es, _ := vb.ToolVersions(n.arg)
	for _, e := range es {
		v := strconv.FormatUint(e.Version, 10)
		if e.Digest != "" {
			out = append(out, vChild(n, kVExec, v, e.Version))
		}
		if e.HasMeta {
			out = append(out, vChild(n, kVMeta, v+".meta", e.Version))
		}
	}
	return out
}

// versionIndex is the text of v/NAME/idx.
func versionIndex(es []VersionEntry) []byte {
	var b []byte
	for _, e := range es {
		b = strconv.AppendUint(b, e.Version, 10)
		b = append(b, ' ')
		b = append(b, orDash(e.State)...)
		b = append(b, ' ')
		b = append(b, orDash(e.Publisher)...)
		b = append(b, ' ')
		if e.Time.IsZero() {
			b = append(b, '-')
		} else {
			b = e.Time.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
		}
		b = append(b, ' ')
		b = append(b, orDash(e.Digest)...)
		b = append(b, ' ')
		b = append(b, orDash(e.Signer)...)
		b = append(b, '\n')
	}
	return b
}

// orDash is an idx field: s, with no space in it, or "-" for none.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' {
			return '_'
		}
		return r
	}, s)
}

// versionContent is the length and time of a file of v/ as stat shows
// them.
func (s *Server) versionContent(n *node) (int, time.Time) {
	vb := versionsOf(s.b)
	if vb == nil {
		return 0, time.Time{}
	}
	switch n.kind {
	case kVIdx:
		es, _ := vb.ToolVersions(n.arg)
		var when time.Time
		if len(es) > 0 {
			when = es[0].Time
		}
		return len(versionIndex(es)), when
	case kVMeta:
		if m, ok := vb.VersionMeta(n.arg, n.ver); ok {
			e, _ := versionEntry(vb, n.arg, n.ver)
			return textLen(m), e.Time
		}
	case kVExec:
		if x, ok := vb.VersionExecutable(n.arg, n.ver); ok {
			e, _ := versionEntry(vb, n.arg, n.ver)
			return int(x.Size), e.Time
		}
	}
	return 0, time.Time{}
}

const vCtlUsage = `v/NAME/ctl takes "rollback VERSION", "canary NODE[,NODE] [manual]", "promote" or "abort"`

// openVersion opens a file of v/NAME/ for b.
func (s *Server) openVersion(b Backend, n *node) (handle, error) {
	vb := versionsOf(b)
	if vb == nil {
		return nil, errors.New("this node keeps no versions")
	}
	switch n.kind {
	case kVIdx:
		return newSnapshot(func() ([]byte, error) {
			es, ok := vb.ToolVersions(n.arg)
			if !ok {
				return nil, fmt.Errorf("file does not exist: no versions of tool %q", n.arg)
			}
			return versionIndex(es), nil
		})
	case kVMeta:
		return newSnapshot(func() ([]byte, error) {
			m, ok := vb.VersionMeta(n.arg, n.ver)
			if !ok {
				return nil, fmt.Errorf("file does not exist: tool %q keeps no version %d", n.arg, n.ver)
			}
			return withNewline(m), nil
		})
	case kVExec:
		x, ok := vb.VersionExecutable(n.arg, n.ver)
		if !ok {
			return nil, fmt.Errorf("file does not exist: tool %q keeps no executable of version %d", n.arg, n.ver)
		}
		r, err := x.Open()
		if err != nil {
			return nil, fmt.Errorf("version %d of tool %q: %v", n.ver, n.arg, err)
		}
		return &execHandle{r: r, size: x.Size}, nil
	case kVCtl:
		return &answer{
			run: perLine(func(_ *req, line string) ([]byte, error) {
				f := strings.Fields(line)
				switch f[0] {
				case "rollback":
				case "canary", "promote", "abort":
					return nil, canaryCtl(vb, n.arg, line, f)
				default:
					return nil, fmt.Errorf("invalid command %q: %s", f[0], vCtlUsage)
				}
				switch {
				case len(f) != 2:
					return nil, fmt.Errorf("invalid command %q: %s", line, vCtlUsage)
				}
				ver, ok := parseVersion(f[1])
				if !ok {
					return nil, fmt.Errorf("invalid version %q: a version is a number of v/%s/idx", f[1], n.arg)
				}
				// ctl is write-only: v/NAME/idx shows the version made.
				_, err := vb.Rollback(n.arg, ver)
				return nil, err
			}),
		}, nil
	}
	return nil, fmt.Errorf("%s cannot be opened", n.path)
}

// canaryCtl runs a canary, promote or abort line of v/NAME/ctl.
func canaryCtl(vb Versions, name, line string, f []string) error {
	cb, ok := vb.(Canaries)
	if !ok {
		return errors.New("this node takes no canaries")
	}
	switch f[0] {
	case "canary":
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "manual") {
			return fmt.Errorf("invalid command %q: %s", line, vCtlUsage)
		}
		var nodes []string
		for _, x := range strings.Split(f[1], ",") {
			if x == "" {
				return fmt.Errorf("invalid canary: an empty node name in %q", f[1])
			}
			nodes = append(nodes, x)
		}
		return cb.Canary(name, nodes, len(f) == 3)
	case "promote":
		if len(f) != 1 {
			return fmt.Errorf("invalid command %q: %s", line, vCtlUsage)
		}
		_, err := cb.Promote(name)
		return err
	default:
		if len(f) != 1 {
			return fmt.Errorf("invalid command %q: %s", line, vCtlUsage)
		}
		return cb.Abort(name)
	}
}
