package p9

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/knusbaum/go9p/proto"
)

// trust/: the publisher keys whose signatures the cluster accepts
// (DESIGN §8), and t/NAME.sig, the signature a publish carries.
//
//	trust/idx   r  NAME FINGERPRINT, one a line
//	trust/new   w  admin: "NAME OPENSSH-PUBLIC-KEY-LINE", then (once a key
//	               is trusted) the armored signature on the lines after it
//	trust/ctl   w  admin: "remove NAME", then the armored signature
//	t/NAME.sig  w  publish: the armored signature the next publish of
//	               NAME through this connection's principal carries

// Trust is trust/. A Backend without it serves trust/ empty and refuses
// its writes.
type Trust interface {
	// TrustIndex lists the trusted keys, "NAME FINGERPRINT" one a line,
	// sorted by name.
	TrustIndex() string
	// AddTrustedKey trusts an OpenSSH public key line as name; sig is
	// the armored signature of the change (nil for none). It returns the
	// key's fingerprint.
	AddTrustedKey(name, keyLine string, sig []byte) (string, error)
	// RemoveTrustedKey removes a trusted key; sig as in AddTrustedKey.
	RemoveTrustedKey(name string, sig []byte) error
}

// ToolSigs is implemented by a Backend that takes the signature of a
// publish through t/: AttachToolSig keeps sig for the next publish of
// tool name by the same principal (t/NAME.meta or t/NAME closed).
type ToolSigs interface {
	AttachToolSig(name string, sig []byte) error
}

func trustOf(b Backend) Trust {
	t, _ := b.(Trust)
	return t
}

var errNoTrust = errors.New("this node keeps no trusted keys")

// Armor lines of an SSH signature.
const (
	sigBegin = "-----BEGIN SSH SIGNATURE-----"
	sigEnd   = "-----END SSH SIGNATURE-----"
)

// maxSigFile bounds t/NAME.sig.
const maxSigFile = 16 << 10

const (
	trustNewUsage = `trust/new takes "NAME OPENSSH-PUBLIC-KEY-LINE", then, once a key is trusted, the armored signature (toolnode trust add -key) on the lines after it, in one write`
	trustCtlUsage = `trust/ctl takes "remove NAME", then the armored signature (toolnode trust rm -key) on the lines after it, in one write`
)

// splitSigned splits the lines of one write into the command line and
// the armored signature after it (nil for none).
func splitSigned(lines []string, usage string) (string, []byte, error) {
	cmd, rest := lines[0], lines[1:]
	if len(rest) == 0 {
		return cmd, nil, nil
	}
	if rest[0] != sigBegin || rest[len(rest)-1] != sigEnd {
		return "", nil, fmt.Errorf("invalid signature: the lines after the command must be one armored SSH signature (%s ... %s): %s", sigBegin, sigEnd, usage)
	}
	return cmd, []byte(strings.Join(rest, "\n") + "\n"), nil
}

// openTrust opens a file of trust/ for b.
func (s *Server) openTrust(b Backend, n *node) (handle, error) {
	tb := trustOf(b)
	switch n.kind {
	case kTrustDir:
		return newDirHandle(s, b, n)
	case kTrustIdx:
		return newSnapshot(func() ([]byte, error) {
			if tb == nil {
				return nil, nil
			}
			return withNewline([]byte(tb.TrustIndex())), nil
		})
	case kTrustNew:
		return &answer{run: func(_ *req, lines []string) ([]byte, error) {
			if tb == nil {
				return nil, errNoTrust
			}
			cmd, sig, err := splitSigned(lines, trustNewUsage)
			if err != nil {
				return nil, err
			}
			name, key, ok := strings.Cut(cmd, " ")
			if !ok || strings.TrimSpace(key) == "" {
				return nil, fmt.Errorf("invalid key %q: %s", cmd, trustNewUsage)
			}
			fp, err := tb.AddTrustedKey(name, strings.TrimSpace(key), sig)
			if err != nil {
				return nil, err
			}
			return []byte(name + " " + fp + "\n"), nil
		}}, nil
	case kTrustCtl:
		return &answer{run: func(_ *req, lines []string) ([]byte, error) {
			if tb == nil {
				return nil, errNoTrust
			}
			cmd, sig, err := splitSigned(lines, trustCtlUsage)
			if err != nil {
				return nil, err
			}
			f := strings.Fields(cmd)
			if len(f) != 2 || f[0] != "remove" {
				return nil, fmt.Errorf("invalid command %q: %s", cmd, trustCtlUsage)
			}
			if err := tb.RemoveTrustedKey(f[1], sig); err != nil {
				return nil, notFound(err, "file does not exist: no trusted key %q", f[1])
			}
			return []byte("removed " + f[1] + "\n"), nil
		}}, nil
	}
	return nil, fmt.Errorf("%s cannot be opened", n.path)
}

// walkTSig is the node of t/NAME.sig, or nil when name is not one.
func walkTSig(dir *node, name string) *node {
	base, ok := strings.CutSuffix(name, ".sig")
	if !ok || !validName(base) {
		return nil
	}
	c := newNode(dir, kTSig, name)
	c.arg = base
	return c
}

// sigHandle is an open-for-writing fid of t/NAME.sig. The signature is
// attached as soon as the buffer holds a whole armored one (so a bad one
// fails its write), and at clunk if it changed since.
type sigHandle struct {
	s *Server
	b Backend
	n *node

	mu   sync.Mutex
	buf  []byte
	sent []byte
}

func newSigHandle(s *Server, b Backend, n *node) *sigHandle {
	return &sigHandle{s: s, b: b, n: n}
}

func (h *sigHandle) read(*req, uint64, uint32) ([]byte, error) {
	return nil, fmt.Errorf("permission denied: %s is write-only: the signature is attached to the next publish of %s", h.n.path, h.n.arg)
}

func (h *sigHandle) write(_ *req, off uint64, data []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := off + uint64(len(data))
	if end > maxSigFile {
		return 0, fmt.Errorf("file too long: a signature is at most %d bytes", maxSigFile)
	}
	if grow := int(end) - len(h.buf); grow > 0 {
		h.buf = append(h.buf, make([]byte, grow)...)
	}
	copy(h.buf[off:], data)
	if bytes.Contains(h.buf, []byte(sigEnd)) {
		if err := h.attach(); err != nil {
			h.s.opt.Logf("9p: refused the signature written to %s: %v", h.n.path, err)
			return 0, err
		}
	}
	return len(data), nil
}

// attach gives the buffer to the Backend unless it has it; mu is held.
func (h *sigHandle) attach() error {
	if bytes.Equal(h.buf, h.sent) {
		return nil
	}
	ts, ok := h.b.(ToolSigs)
	if !ok {
		return errors.New("this node takes no signatures")
	}
	if err := ts.AttachToolSig(h.n.arg, bytes.Clone(h.buf)); err != nil {
		return err
	}
	h.sent = bytes.Clone(h.buf)
	return nil
}

func (h *sigHandle) commit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(bytes.TrimSpace(h.buf)) == 0 {
		return nil
	}
	if err := h.attach(); err != nil {
		h.s.opt.Logf("9p: refused the signature written to %s: %v", h.n.path, err)
		return err
	}
	return nil
}

func (h *sigHandle) truncate() {
	h.mu.Lock()
	h.buf = h.buf[:0]
	h.mu.Unlock()
}

func (h *sigHandle) close() {}

var (
	_ handle    = (*sigHandle)(nil)
	_ committer = (*sigHandle)(nil)
)

// createSig is Tcreate of t/NAME.sig on fid f: the fid becomes an open
// sigHandle.
func (c *conn) createSig(f *fid, fc *proto.TCreate, child *node) ([]byte, error) {
	mode := proto.Mode(fc.Mode)
	if mode&proto.Orclose != 0 {
		return nil, errOrclose(child)
	}
	if h, _ := f.handle(); h != nil {
		return nil, fmt.Errorf("fid %d is open; create from an unopened fid of %s", fc.Fid, f.n.path)
	}
	h := newSigHandle(c.s, c.backendFor(f.who), child)
	if err := c.becomeCreated(f, fc.Fid, child, h, mode); err != nil {
		return nil, err
	}
	m := proto.RCreate{Header: proto.Header{Type: proto.Rcreate, Tag: fc.Tag}, Qid: child.qid, Iounit: c.msize.Load() - ioHdrSize}
	return m.Compose(), nil
}
