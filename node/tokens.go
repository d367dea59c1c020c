package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolnode/toolnode/acl"
	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
)

// 9P tokens (DESIGN §7): the node checks each attach against the tokens
// its FSM holds, serves token/ through p9.TokenBackend, ends a revoked
// token's connections as it applies the revocation, and makes its own
// admin token at its first start.

var _ p9.TokenBackend = (*Node)(nil)

// AdminTokenFile is the name, in the data directory, of the file that
// holds the node's own admin token.
const AdminTokenFile = "admin.token"

// errNameTaken: the name of the node's admin token is taken already.
var errNameTaken = errors.New("the name is taken; trying the next")

// errBadToken is the refusal of an attach name that is no live token.
var errBadToken = errors.New("permission denied: unknown or revoked token")

// errNoToken is the refusal of a token-less attach under -9p-anon none.
var errNoToken = errors.New("permission denied: an attach without a token is refused (-9p-anon none); present a token as the attach name")

// setupAnon decides the role of an attach without a token: -9p-anon,
// default none on every listener (DESIGN §7 "Local trust"): a loopback
// address proves nothing on a host that runs other people's tools. Any
// other role is said loudly at every start.
func (n *Node) setupAnon() error {
	n.anon = p9.RoleNone
	if n.cfg.P9Anon != "" {
		r, err := p9.ParseRole(n.cfg.P9Anon)
		if err != nil {
			return fmt.Errorf("-9p-anon: %w", err)
		}
		n.anon = r
	}
	if n.anon == p9.RoleNone {
		n.logger.Printf("9P: an attach without a token is refused (-9p-anon none); the cluster's admin token is in %s on the node that bootstrapped it", AdminTokenFile)
		return nil
	}
	where := "every process that reaches it"
	if isLoopback(n.p9ln.Addr()) {
		where = "every process on this host, each tool included"
	}
	n.warnf("WARNING: -9p-anon %s: an attach without a token on %s gets role %s: %s has it", n.anon, n.p9ln.Addr(), n.anon, where)
	return nil
}

// anonName is the principal of a token-less client: anon@IP, the
// address without its port.
func anonName(remote net.Addr) string {
	if remote == nil {
		return "anon@unknown"
	}
	s := remote.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	return "anon@" + s
}

// isLoopback reports whether a listener's address is a loopback one.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// attach is p9.Options.Attach: an empty attach name is anonymous, any
// other is looked up by its hash.
func (n *Node) attach(aname string, remote net.Addr) (p9.Principal, error) {
	if aname == "" {
		if n.anon == p9.RoleNone {
			n.refused(anonName(remote), errNoToken)
			return p9.Principal{}, errNoToken
		}
		return p9.Principal{Name: anonName(remote), Role: n.anon}, nil
	}
	hash := acl.Hash(aname)
	t, ok := n.fsm.TokenByHash(hash)
	if !ok {
		// A token this replica lacks may be one it has not applied yet
		// (a node restarted, or joined, behind the leader): it is
		// refused as unknown only once the node is current.
		if err := n.caughtUp(); err != nil {
			n.logger.Printf("9p: %s: attach with a token this node does not know yet: %v", remote, err)
			return p9.Principal{}, err
		}
		if t, ok = n.fsm.TokenByHash(hash); !ok {
			n.refused(anonName(remote), errBadToken)
			return p9.Principal{}, errBadToken
		}
	}
	r, err := p9.ParseRole(t.Role)
	if err != nil {
		return p9.Principal{}, errBadToken
	}
	return p9.Principal{Name: t.Name, Role: r, Secret: aname, Tools: t.Tools}, nil
}

// refused audits a refused attach under who.
func (n *Node) refused(who string, err error) {
	if n.audit != nil {
		n.record(time.Now(), who, "attach", "", err)
	}
}

// NewToken makes a token: the secret is drawn here and only its hash is
// replicated.
func (n *Node) NewToken(by p9.Principal, name string, role p9.Role, tools []string) (string, error) {
	if err := acl.CheckName(name); err != nil {
		return "", err
	}
	if err := acl.CheckTools(tools); err != nil {
		return "", err
	}
	secret, hash, err := acl.NewSecret()
	if err != nil {
		return "", err
	}
	start := time.Now()
	_, err = n.applyFor(caller{who: by.Name, token: by.Secret}, raftfsm.CmdPutToken, raftfsm.PutToken{
		Name: name, Role: role.String(), Hash: hash, Tools: tools, By: by.Name, Time: nowNano(),
	})
	if n.audit != nil {
		n.record(start, by.Name, "token-new", name+" role="+role.String()+toolsSuffix(tools), err)
	}
	if err != nil {
		return "", err
	}
	n.logger.Printf("token %s (role %s) made by %s", name, role, by.Name)
	return secret, nil
}

// TokenIndex is token/idx: NAME ROLE [TOOLS], one a line.
func (n *Node) TokenIndex() string {
	var b strings.Builder
	for _, t := range n.fsm.Tokens() {
		b.WriteString(t.Name + " " + t.Role + toolsSuffix(t.Tools) + "\n")
	}
	return b.String()
}

// RevokeToken removes a token cluster-wide; every node, this one
// included, ends its connections as it applies the revocation.
func (n *Node) RevokeToken(by p9.Principal, name string) error {
	if err := acl.CheckName(name); err != nil {
		return err
	}
	start := time.Now()
	_, err := n.applyFor(caller{who: by.Name, token: by.Secret}, raftfsm.CmdRevokeToken, raftfsm.RevokeToken{Name: name})
	if n.audit != nil {
		n.record(start, by.Name, "token-revoke", name, err)
	}
	if err != nil {
		return err
	}
	n.logger.Printf("token %s revoked by %s", name, by.Name)
	return nil
}

// tokenRevoked ends the connections of a token the FSM removed. It runs
// on the FSM's goroutine, before or after 9P has started.
func (n *Node) tokenRevoked(name string) {
	if s := n.p9srv.Load(); s != nil {
		if k := s.DropPrincipal(name); k > 0 {
			n.logger.Printf("token %s revoked: ended %d 9P connection(s)", name, k)
		}
	}
}

// tokensRestored ends the connections of tokens a restored snapshot no
// longer has.
func (n *Node) tokensRestored() {
	s := n.p9srv.Load()
	if s == nil {
		return
	}
	for _, name := range s.Principals() {
		if strings.HasPrefix(name, "anon@") {
			continue
		}
		if _, ok := n.fsm.Token(name); !ok {
			n.tokenRevoked(name)
		}
	}
}

// adminTokenPath is DATA/admin.token.
func (n *Node) adminTokenPath() string { return filepath.Join(n.cfg.DataDir, AdminTokenFile) }

// startAdminToken makes the cluster's first admin token when this node
// bootstrapped the cluster (no DATA/admin.token yet), as soon as the
// cluster takes writes. A node that joins writes none: its data
// directory holds no cluster admin (DESIGN §7 "Local trust"). A lone
// node whose cluster holds no token at all (it bootstrapped, then
// stopped before its token committed) makes one too.
func (n *Node) startAdminToken() {
	if _, err := os.Stat(n.adminTokenPath()); err == nil {
		return
	}
	if !n.bootstrapped && (n.joins() || len(n.fsm.Tokens()) > 0) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for try := 1; n.ctx.Err() == nil; {
			err := n.makeAdminToken(try)
			if err == nil {
				return
			}
			if errors.Is(err, errNameTaken) {
				try++ // the next name; anything else: the same again
			}
			n.logger.Printf("making this node's admin token: %v; trying again", err)
			select {
			case <-n.ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

// makeAdminToken proposes a token admin-NAME (admin-NAME-TRY when that
// name is taken, e.g. by an earlier life of this node whose data was
// lost) and writes its secret to DATA/admin.token, mode 0600. The file
// is written first under a temporary name and renamed into place once
// the token is committed, so it never holds a token the cluster lacks.
func (n *Node) makeAdminToken(try int) error {
	base := n.cfg.Name
	if len(base) > acl.MaxNameLen-16 {
		base = base[:acl.MaxNameLen-16]
	}
	name := "admin-" + base
	if try > 1 {
		name = fmt.Sprintf("%s-%d", name, try)
	}
	secret, hash, err := acl.NewSecret()
	if err != nil {
		return err
	}
	tmp := n.adminTokenPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(secret+"\n"), 0o600); err != nil {
		return err
	}
	_, err = n.apply(raftfsm.CmdPutToken, raftfsm.PutToken{
		Name: name, Role: "admin", Hash: hash, By: "node " + n.cfg.Name, Time: nowNano(),
	})
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, raftfsm.ErrExists) {
			return fmt.Errorf("token %s: %w", name, errNameTaken)
		}
		return err
	}
	if err := os.Rename(tmp, n.adminTokenPath()); err != nil {
		return err
	}
	n.logger.Printf("made this node's admin token %s: its secret is in %s (mode 0600)", name, n.adminTokenPath())
	return nil
}
