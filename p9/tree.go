package p9

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/knusbaum/go9p/proto"
)

// kind is what a node of the tree is; it fixes the node's mode and how it
// is read, written and listed.
type kind uint8

const (
	kRoot       kind = iota
	kTDir            // t/
	kADir            // a/
	kClusterDir      // cluster/
	kSessionDir      // session/
	kSession         // session/S/
	kAgentDir        // session/S/agent/
	kAgent           // session/S/agent/A/
	kTokenDir        // token/
	kVDir            // v/
	kVTool           // v/NAME/
	kTrustDir        // trust/
	kMDir            // m/

	kTIdx       // t/idx
	kTMeta      // t/NAME.meta
	kTExec      // t/NAME
	kProfile    // a/NAME.json
	kTools      // tools
	kEvents     // events
	kNode       // node
	kMembers    // cluster/members
	kWhere      // cluster/where
	kSessNew    // session/new
	kSessIdx    // session/idx
	kSessCtl    // session/S/ctl
	kAgentNew   // session/S/agent/new
	kAgentTools // session/S/agent/A/tools
	kAgentCtl   // session/S/agent/A/ctl
	kLoaded     // session/S/agent/A/toolsrv.loaded
	kRev        // session/S/agent/A/toolsrv.rev
	kPreamble   // session/S/agent/A/preamble
	kCall       // session/S/agent/A/call
	kTokenNew   // token/new
	kTokenIdx   // token/idx
	kTokenCtl   // token/ctl
	kVIdx       // v/NAME/idx
	kVMeta      // v/NAME/VERSION.meta
	kVExec      // v/NAME/VERSION
	kVCtl       // v/NAME/ctl
	kTSig       // t/NAME.sig
	kTrustIdx   // trust/idx
	kTrustNew   // trust/new
	kTrustCtl   // trust/ctl
	kServer     // m/NAME.json
	nKinds
)

// perms holds each kind's permission bits. They decide what may be
// opened for reading and writing; the stat mode of t/NAME is the mode its
// executable was published with (Server.execMode).
var perms = [nKinds]uint32{
	kRoot: 0o555, kTDir: 0o755, kADir: 0o755, kClusterDir: 0o555,
	kSessionDir: 0o555, kSession: 0o555, kAgentDir: 0o555, kAgent: 0o555,

	kTIdx: 0o444, kTMeta: 0o644, kTExec: 0o755, kProfile: 0o644,
	kTools: 0o666, kEvents: 0o444, kNode: 0o444, kMembers: 0o444,
	kWhere: 0o666, kSessNew: 0o666, kSessIdx: 0o444, kSessCtl: 0o222,
	kAgentNew: 0o666, kAgentTools: 0o666, kAgentCtl: 0o666,
	kLoaded: 0o444, kRev: 0o444, kPreamble: 0o444, kCall: 0o666,

	kTokenDir: 0o555, kTokenNew: 0o666, kTokenIdx: 0o444, kTokenCtl: 0o222,

	kVDir: 0o555, kVTool: 0o555, kVIdx: 0o444, kVMeta: 0o444, kVExec: 0o555, kVCtl: 0o222,

	kTSig: 0o222, kTrustDir: 0o555, kTrustIdx: 0o444, kTrustNew: 0o666, kTrustCtl: 0o222,

	kMDir: 0o755, kServer: 0o644,
}

// node is one file or directory of the tree. Nodes are immutable and may be
// shared between fids and connections.
type node struct {
	kind   kind
	name   string // last element; "/" for the root
	path   string // tree path without a leading slash; "." for the root
	parent *node  // the root is its own parent
	sess   string // session, for nodes under session/S
	agent  string // agent, for nodes under session/S/agent/A
	arg    string // tool or profile name, for t/ and a/ files and under v/
	ver    uint64 // version, for v/NAME/VERSION and VERSION.meta
	qid    proto.Qid
}

func (n *node) isDir() bool { return n.kind < kTIdx }

// mode is the stat mode: permission bits, plus DMDIR for directories.
func (n *node) mode() uint32 {
	if n.isDir() {
		return proto.DMDIR | perms[n.kind]
	}
	return perms[n.kind]
}

func (n *node) readable() bool { return perms[n.kind]&0o444 != 0 }
func (n *node) writable() bool { return perms[n.kind]&0o222 != 0 }

// qidPath hashes a tree path into a stable Qid.Path: the same path has the
// same qid on every node and across restarts.
func qidPath(path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64()
}

func newNode(parent *node, k kind, name string) *node {
	n := &node{kind: k, name: name, parent: parent}
	if parent == nil {
		n.parent = n
		n.path = "."
	} else {
		n.sess, n.agent = parent.sess, parent.agent
		if parent.path == "." {
			n.path = name
		} else {
			n.path = parent.path + "/" + name
		}
	}
	n.qid = proto.Qid{Uid: qidPath(n.path)}
	if n.isDir() {
		n.qid.Qtype = uint8(proto.DMDIR >> 24)
	}
	return n
}

// The fixed part of the tree, shared by every fid.
var (
	rootNode       = newNode(nil, kRoot, "/")
	tDirNode       = newNode(rootNode, kTDir, "t")
	aDirNode       = newNode(rootNode, kADir, "a")
	mDirNode       = newNode(rootNode, kMDir, "m")
	clusterDirNode = newNode(rootNode, kClusterDir, "cluster")
	sessionDirNode = newNode(rootNode, kSessionDir, "session")
	toolsNode      = newNode(rootNode, kTools, "tools")
	eventsNode     = newNode(rootNode, kEvents, "events")
	nodeNode       = newNode(rootNode, kNode, "node")
	tIdxNode       = newNode(tDirNode, kTIdx, "idx")
	membersNode    = newNode(clusterDirNode, kMembers, "members")
	whereNode      = newNode(clusterDirNode, kWhere, "where")
	sessNewNode    = newNode(sessionDirNode, kSessNew, "new")
	sessIdxNode    = newNode(sessionDirNode, kSessIdx, "idx")
	tokenDirNode   = newNode(rootNode, kTokenDir, "token")
	tokenNewNode   = newNode(tokenDirNode, kTokenNew, "new")
	tokenIdxNode   = newNode(tokenDirNode, kTokenIdx, "idx")
	tokenCtlNode   = newNode(tokenDirNode, kTokenCtl, "ctl")
	trustDirNode   = newNode(rootNode, kTrustDir, "trust")
	trustIdxNode   = newNode(trustDirNode, kTrustIdx, "idx")
	trustNewNode   = newNode(trustDirNode, kTrustNew, "new")
	trustCtlNode   = newNode(trustDirNode, kTrustCtl, "ctl")
	vDirNode       = newNode(rootNode, kVDir, "v")

	// rootChildren and the other fixed lists are sorted by name.
	rootChildren    = []*node{aDirNode, clusterDirNode, eventsNode, mDirNode, nodeNode, sessionDirNode, tDirNode, tokenDirNode, toolsNode, trustDirNode, vDirNode}
	clusterChildren = []*node{membersNode, whereNode}
	tokenChildren   = []*node{tokenCtlNode, tokenIdxNode, tokenNewNode}
	trustChildren   = []*node{trustCtlNode, trustIdxNode, trustNewNode}
)

// agentFiles are the files of session/S/agent/A, sorted by name.
var agentFiles = []struct {
	name string
	kind kind
}{
	{"call", kCall}, {"ctl", kAgentCtl}, {"preamble", kPreamble},
	{"tools", kAgentTools}, {"toolsrv.loaded", kLoaded}, {"toolsrv.rev", kRev},
}

// errNotExist is the error of a walk that finds nothing, exactly as
// Plan 9 says it: plan9port's 9pfuse maps any text containing "exist"
// (after "exists") to ENOENT, the Linux kernel maps this exact string,
// so a client goes on to create the file. The client named what it
// walked to; what is missing is that name.
var errNotExist = errors.New("file does not exist")

// walkErr is a walk that found nothing. Its text, naming what is
// missing, is for the reader of the code: the 9P error is errNotExist.
func walkErr(format string, args ...any) error { return errNotExist }

// sessionErr turns a Backend error about a session into a 9P error text.
func sessionErr(sess string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("session %q does not exist", sess)
	}
	return err
}

// walk1 looks up one name in directory n. It returns the child or an error
// whose text says what does not exist. A file of t/ or a/ that is open for
// writing after a Tcreate exists for walks before it is published.
func walk1(s *Server, n *node, name string) (*node, error) {
	b := s.b
	if name == ".." {
		return n.parent, nil
	}
	if !n.isDir() {
		return nil, fmt.Errorf("%s is not a directory", n.path)
	}
	if name == "" || name == "." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("invalid file name %q", name)
	}
	switch n.kind {
	case kRoot:
		for _, c := range rootChildren {
			if c.name == name {
				return c, nil
			}
		}
	case kClusterDir:
		for _, c := range clusterChildren {
			if c.name == name {
				return c, nil
			}
		}
	case kTokenDir:
		for _, c := range tokenChildren {
			if c.name == name {
				return c, nil
			}
		}
	case kTrustDir:
		for _, c := range trustChildren {
			if c.name == name {
				return c, nil
			}
		}
	case kVDir, kVTool:
		return walkVersions(s, n, name)
	case kTDir:
		if name == "idx" {
			return tIdxNode, nil
		}
		if base, ok := strings.CutSuffix(name, ".meta"); ok {
			if _, ok := b.ToolMeta(base); ok || s.isPending("t/"+name) {
				c := newNode(n, kTMeta, name)
				c.arg = base
				return c, nil
			}
		}
		if _, ok := b.ToolExecutable(name); ok || s.isPending("t/"+name) {
			c := newNode(n, kTExec, name)
			c.arg = name
			return c, nil
		}
		if c := walkTSig(n, name); c != nil {
			return c, nil
		}
		if _, ok := b.ToolMeta(name); ok {
			return nil, walkErr("tool %q has no published executable", name)
		}
		tool, _ := strings.CutSuffix(name, ".meta")
		return nil, walkErr("no tool %q in the cluster", tool)
	case kADir:
		if base, ok := strings.CutSuffix(name, ".json"); ok {
			if _, ok := b.Profile(base); ok || s.isPending("a/"+name) {
				c := newNode(n, kProfile, name)
				c.arg = base
				return c, nil
			}
			return nil, walkErr("no agent profile %q in the cluster", base)
		}
		return nil, walkErr("no agent profile file %q: profiles are NAME.json", name)
	case kMDir:
		if base, ok := strings.CutSuffix(name, ".json"); ok {
			if _, ok := serversOf(b).ServerDef(base); ok || s.isPending("m/"+name) {
				c := newNode(n, kServer, name)
				c.arg = base
				return c, nil
			}
			return nil, walkErr("no mcp server %q in the cluster", base)
		}
		return nil, walkErr("no mcp server file %q: definitions are NAME.json", name)
	case kSessionDir:
		switch name {
		case "new":
			return sessNewNode, nil
		case "idx":
			return sessIdxNode, nil
		}
		// Whether S exists: the Walker's answer, else the Backend's list
		// of its agents.
		var err error
		if w, ok := b.(Walker); ok {
			err = w.WalkSession(name)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err // the node cannot answer now, e.g. catching up
			}
		} else {
			_, err = b.Agents(name)
		}
		if err != nil {
			return nil, walkErr("session %q does not exist: %v", name, sessionErr(name, err))
		}
		c := newNode(sessionDirNode, kSession, name)
		c.sess = name
		return c, nil
	case kSession:
		switch name {
		case "ctl":
			return newNode(n, kSessCtl, name), nil
		case "agent":
			return newNode(n, kAgentDir, name), nil
		}
	case kAgentDir:
		if name == "new" {
			return newNode(n, kAgentNew, name), nil
		}
		if w, ok := b.(Walker); ok {
			if err := w.WalkAgent(n.sess, name); err != nil {
				if !errors.Is(err, ErrNotFound) {
					return nil, err
				}
				return nil, walkErr("%v", err)
			}
		} else {
			agents, err := b.Agents(n.sess)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err // the node cannot answer now, e.g. catching up
			}
			if err != nil {
				return nil, walkErr("session %q does not exist: %v", n.sess, err)
			}
			if !slices.Contains(agents, name) {
				return nil, walkErr("agent %q does not exist in session %q", name, n.sess)
			}
		}
		c := newNode(n, kAgent, name)
		c.agent = name
		return c, nil
	case kAgent:
		for _, f := range agentFiles {
			if f.name == name {
				return newNode(n, f.kind, name), nil
			}
		}
	}
	return nil, walkErr("no file %q in %s", name, n.path)
}

// children lists directory n through b (the Backend of the fid that
// opened it), sorted by name. t/ and a/ list the files created and not
// yet published too.
func (s *Server) children(b Backend, n *node) ([]*node, error) {
	var out []*node
	switch n.kind {
	case kRoot:
		return rootChildren, nil
	case kClusterDir:
		return clusterChildren, nil
	case kTokenDir:
		return tokenChildren, nil
	case kTrustDir:
		return trustChildren, nil
	case kVDir, kVTool:
		out = s.versionChildren(n)
	case kTDir:
		out = append(out, tIdxNode)
		for _, name := range b.ToolNames() {
			if _, ok := b.ToolMeta(name); ok {
				c := newNode(n, kTMeta, name+".meta")
				c.arg = name
				out = append(out, c)
			}
			if _, ok := b.ToolExecutable(name); ok && name != "idx" {
				c := newNode(n, kTExec, name)
				c.arg = name
				out = append(out, c)
			}
		}
		for _, name := range s.pendingNames("t") {
			k, arg := kTExec, name
			if base, ok := strings.CutSuffix(name, ".meta"); ok {
				k, arg = kTMeta, base
			}
			c := newNode(n, k, name)
			c.arg = arg
			out = append(out, c)
		}
	case kADir:
		out = append(out, jsonFiles(n, kProfile, b.ProfileNames(), s.pendingNames("a"))...)
	case kMDir:
		out = append(out, jsonFiles(n, kServer, serversOf(b).ServerNames(), s.pendingNames("m"))...)
	case kSessionDir:
		sessions, err := b.Sessions()
		if err != nil {
			return nil, err
		}
		out = append(out, sessIdxNode, sessNewNode)
		for _, s := range sessions {
			if s == "new" || s == "idx" {
				continue // shadowed by the fixed files
			}
			c := newNode(n, kSession, s)
			c.sess = s
			out = append(out, c)
		}
	case kSession:
		if _, err := b.Agents(n.sess); err != nil {
			return nil, sessionErr(n.sess, err)
		}
		out = append(out, newNode(n, kAgentDir, "agent"), newNode(n, kSessCtl, "ctl"))
	case kAgentDir:
		agents, err := b.Agents(n.sess)
		if err != nil {
			return nil, sessionErr(n.sess, err)
		}
		out = append(out, newNode(n, kAgentNew, "new"))
		for _, a := range agents {
			if a == "new" {
				continue
			}
			c := newNode(n, kAgent, a)
			c.agent = a
			out = append(out, c)
		}
	case kAgent:
		for _, f := range agentFiles {
			out = append(out, newNode(n, f.kind, f.name))
		}
	default:
		return nil, fmt.Errorf("%s is not a directory", n.path)
	}
	slices.SortStableFunc(out, func(x, y *node) int { return strings.Compare(x.name, y.name) })
	// A tool named "x.meta" with an executable and a tool "x" with
	// metadata give two entries "x.meta"; a walk finds the metadata.
	out = slices.CompactFunc(out, func(x, y *node) bool { return x.name == y.name })
	return out, nil
}

// stat is the directory entry of n. Files of t/ and a/ show the length
// a read returns now and the time their version was published; t/idx
// the newest of its tools'. Other files show length 0 (streams and
// answers have no length until they are read) and the server's start.
func (s *Server) stat(n *node) proto.Stat {
	mode := n.mode()
	if n.kind == kTExec {
		mode = s.execMode(n)
	}
	length, mtime := s.content(n)
	return proto.Stat{
		Qid:    n.qid,
		Mode:   mode,
		Atime:  mtime,
		Mtime:  mtime,
		Length: length,
		Name:   n.name,
		Uid:    s.opt.Owner,
		Gid:    s.opt.Owner,
		Muid:   s.opt.Owner,
	}
}

// content is the length and mtime of n as stat shows them. A pending
// file not yet published is empty.
func (s *Server) content(n *node) (uint64, uint32) {
	b := s.b
	var size int
	var when time.Time
	switch n.kind {
	case kTIdx:
		for _, e := range b.ToolIndex() {
			size += len(e.Name) + len(e.Description) + 2 // indexText's line; oneLine keeps lengths
			if t := b.ToolTime(e.Name); t.After(when) {
				when = t
			}
		}
	case kTMeta:
		if m, ok := b.ToolMeta(n.arg); ok {
			size, when = textLen(m), b.ToolTime(n.arg)
		}
	case kTExec:
		if e, ok := b.ToolExecutable(n.arg); ok {
			size, when = int(e.Size), b.ToolTime(n.arg)
		}
	case kProfile:
		if p, ok := b.Profile(n.arg); ok {
			size, when = textLen(p), b.ProfileTime(n.arg)
		}
	case kServer:
		if p, ok := serversOf(b).ServerDef(n.arg); ok {
			size, when = textLen(p), serversOf(b).ServerTime(n.arg)
		}
	case kVIdx, kVMeta, kVExec:
		size, when = s.versionContent(n)
	}
	mtime := s.mtime
	if !when.IsZero() {
		mtime = uint32(when.Unix())
	}
	return uint64(size), mtime
}

// isPublished reports whether the Backend has the file n of t/ or a/.
func (s *Server) isPublished(n *node) bool {
	var ok bool
	switch n.kind {
	case kTMeta:
		_, ok = s.b.ToolMeta(n.arg)
	case kTExec:
		_, ok = s.b.ToolExecutable(n.arg)
	case kProfile:
		_, ok = s.b.Profile(n.arg)
	case kServer:
		_, ok = serversOf(s.b).ServerDef(n.arg)
	}
	return ok
}

// textLen is len(withNewline(b)), without the copy.
func textLen(b []byte) int {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return len(b) + 1
	}
	return len(b)
}

// jsonFiles are the NAME.json files of a/ or m/: one of kind k for each
// published name, and one for each file being written there (pending,
// named with its .json).
func jsonFiles(n *node, k kind, names, pending []string) []*node {
	var out []*node
	for _, name := range names {
		c := newNode(n, k, name+".json")
		c.arg = name
		out = append(out, c)
	}
	for _, name := range pending {
		c := newNode(n, k, name)
		c.arg = strings.TrimSuffix(name, ".json")
		out = append(out, c)
	}
	return out
}
