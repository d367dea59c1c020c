package raftfsm

import (
	"sort"

	"github.com/toolnode/toolnode/acl"
)

// 9P tokens (DESIGN §7). The cluster stores a token's name, role and the
// hash of its secret, never the secret: the node that makes a token draws
// the secret, shows it once and proposes only its hash (acl.NewSecret).
// Each change reports an event, token+ or token-, so every node can end
// the connections of a revoked token as it applies the revocation.

// Token is a 9P token; immutable like Tool.
type Token struct {
	Name string `json:"name"`
	Role string `json:"role"` // acl.Roles
	Hash string `json:"hash"` // acl.Hash of the secret
	// Tools, when set, limits the tools its holder may load and call
	// (glob patterns, acl.Matches).
	Tools []string `json:"tools,omitempty"`
	// By is who made it: the token name or anon@ADDR of the 9P client,
	// or the node that made its own admin token.
	By      string `json:"by,omitempty"`
	Created int64  `json:"created"` // unix nanoseconds, stamped by the proposer
	Index   uint64 `json:"index"`
}

// PutToken adds a token. A name or hash the cluster already has is
// refused: a token is revoked and made again, never changed.
type PutToken struct {
	Name string `json:"name"`
	Role string `json:"role"`
	Hash string `json:"hash"`
	// Tools as in Token.
	Tools []string `json:"tools,omitempty"`
	By    string   `json:"by,omitempty"`
	Time  int64    `json:"time"`
}

// RevokeToken removes a token: its secret is refused from then on.
type RevokeToken struct {
	Name string `json:"name"`
}

// validatePutToken and validateRevokeToken check a token command's body
// before the leader appends it (the leader-side validation of DESIGN §7
// calls one validator per command type): a body that fails here would
// be refused by every replica's Apply, so it is never written to the log.
func validatePutToken(body []byte, lim Limits) error {
	var c PutToken
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	return checkPutToken(&c)
}

func validateRevokeToken(body []byte, lim Limits) error {
	var c RevokeToken
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := acl.CheckName(c.Name); err != nil {
		return refuse(ErrInvalid, "%v", err)
	}
	return nil
}

func checkPutToken(c *PutToken) error {
	for _, err := range []error{acl.CheckName(c.Name), acl.CheckRole(c.Role), acl.CheckHash(c.Hash), acl.CheckTools(c.Tools)} {
		if err != nil {
			return refuse(ErrInvalid, "%v", err)
		}
	}
	return nil
}

func applyPutToken(st *state, index uint64, body []byte, ev *[]Event) any {
	var c PutToken
	decode(body, &c)
	if err := checkPutToken(&c); err != nil {
		return err
	}
	if _, ok := st.Tokens[c.Name]; ok {
		return refuse(ErrExists, "token %q already exists: revoke it first, or choose another name", c.Name)
	}
	if _, ok := st.byHash[c.Hash]; ok {
		return refuse(ErrExists, "a token with that secret already exists")
	}
	t := &Token{Name: c.Name, Role: c.Role, Hash: c.Hash, Tools: c.Tools, By: c.By, Created: c.Time, Index: index}
	st.Tokens[c.Name] = t
	st.byHash[c.Hash] = t
	*ev = append(*ev, Event{index, "token+", c.Name})
	return Result{Name: c.Name}
}

func applyRevokeToken(st *state, index uint64, body []byte, ev *[]Event) any {
	var c RevokeToken
	decode(body, &c)
	t, ok := st.Tokens[c.Name]
	if !ok {
		return refuse(ErrNotFound, "no token %q", c.Name)
	}
	delete(st.Tokens, c.Name)
	delete(st.byHash, t.Hash)
	*ev = append(*ev, Event{index, "token-", c.Name})
	return Result{Name: c.Name}
}

// TokenByHash returns the token whose secret has this hash.
func (f *FSM) TokenByHash(hash string) (*Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.byHash[hash]
	return t, ok
}

// Token returns a token by name.
func (f *FSM) Token(name string) (*Token, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.Tokens[name]
	return t, ok
}

// Tokens returns every token, sorted by name.
func (f *FSM) Tokens() []*Token {
	f.mu.RLock()
	out := make([]*Token, 0, len(f.st.Tokens))
	for _, t := range f.st.Tokens {
		out = append(out, t)
	}
	f.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
