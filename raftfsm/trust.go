package raftfsm

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/signing"
)

// Trusted keys (DESIGN §8 "Signatures"). trust/ holds the publisher keys
// whose signatures the cluster accepts. While it holds none, publishes
// need no signature and an admin adds the first key unsigned. From then
// on every change to it carries an SSH signature by a key already
// trusted over its toolnode-trust-v1 manifest, and every publish an SSH
// signature by a trusted key over its tool's toolnode-tool-v1 manifest.
// Apply verifies both itself, on every node: verification is a pure
// function of the command's bytes and the keys in the state, so it is
// deterministic, and an entry forged around the leader's check changes
// nothing on any node. A tool stays in the state when the key that
// signed it is removed; TrustError says, on each node, whether its live
// version may be served and run now.

// ErrDenied: a change that needs a signature by a trusted key has none,
// or one that does not verify.
var ErrDenied = errors.New("permission denied")

// TrustedKey is a publisher key in trust/; immutable like Tool.
type TrustedKey struct {
	Name string `json:"name"`
	// Line is the OpenSSH public key line as added.
	Line        string `json:"line"`
	Fingerprint string `json:"fingerprint"`
	// By is the principal that added it; Time when (stamped by the
	// proposer); Index the Raft index of the command.
	By    string `json:"by,omitempty"`
	Time  int64  `json:"time"`
	Index uint64 `json:"index"`
}

// AddKey adds a trusted key. Sig is the armored SSH signature, by a key
// already trusted, over signing.Trust("add", Name, fingerprint of Key);
// the first key needs none.
type AddKey struct {
	Name string `json:"name"`
	Key  string `json:"key"` // an OpenSSH public key line
	Sig  []byte `json:"sig,omitempty"`
	By   string `json:"by,omitempty"`
	Time int64  `json:"time"`
}

// RemoveKey removes a trusted key. Sig is the armored SSH signature, by
// a trusted key (the removed one among them), over
// signing.Trust("remove", Name, its fingerprint).
type RemoveKey struct {
	Name string `json:"name"`
	Sig  []byte `json:"sig,omitempty"`
	By   string `json:"by,omitempty"`
	Time int64  `json:"time"`
}

// maxKeyLine and maxSig bound a key line and an armored signature.
const (
	maxKeyLine = 8 << 10
	maxSig     = 16 << 10
)

// trustedKeys are the keys of st.Trust parsed, sorted by name.
func (s *state) trustedKeys() []*signing.Key { return s.keys }

// rekey derives st.keys from st.Trust; called under the write lock on
// every change to Trust and when a state is restored.
func (s *state) rekey() {
	if len(s.Trust) == 0 {
		s.keys = nil
		return
	}
	keys := make([]*signing.Key, 0, len(s.Trust))
	for _, name := range sortedKeys(s.Trust) {
		// Lines were parsed when added; one that no longer parses (a
		// corrupt snapshot) is not trusted.
		if k, err := signing.ParseKey(name, []byte(s.Trust[name].Line)); err == nil {
			keys = append(keys, k)
		}
	}
	s.keys = keys
}

// verifyTrust checks a trust change's signature while keys are trusted.
func (s *state) verifyTrust(verb, name, fingerprint string, sig []byte) error {
	if len(s.Trust) == 0 {
		return nil
	}
	_, err := signing.Verify(signing.Trust(verb, name, fingerprint), sig, s.trustedKeys())
	if errors.Is(err, signing.ErrUnsigned) {
		return refuse(ErrDenied, "permission denied: unsigned: keys are trusted, so %s %s needs a signature by one of them (%s) over its %s manifest",
			verb, name, joinNames(s), signing.TrustManifest)
	}
	if err != nil {
		return refuse(ErrDenied, "%v (trust %s %s)", err, verb, name)
	}
	return nil
}

// verifyTool checks the signature of what a command makes tool name:
// its metadata, its executable's digest. While no key is trusted
// anything passes; then the signer is "". Else it returns the name of
// the trusted key that signed it.
func (s *state) verifyTool(name string, meta []byte, execHash string, sig []byte) (string, error) {
	if len(s.Trust) == 0 {
		return "", nil
	}
	k, err := signing.Verify(signing.Tool(name, meta, execHash), sig, s.trustedKeys())
	if errors.Is(err, signing.ErrUnsigned) {
		return "", refuse(ErrDenied, "permission denied: unsigned: keys are trusted, so tool %q needs a signature by one of them (%s) over its manifest (toolnode manifest)", name, joinNames(s))
	}
	if err != nil {
		return "", refuse(ErrDenied, "%v (tool %q)", err, name)
	}
	return k.Name, nil
}

func joinNames(s *state) string {
	names := sortedKeys(s.Trust)
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

func checkSig(sig []byte) error {
	if len(sig) > maxSig {
		return fmt.Errorf("a signature of %d bytes: at most %d", len(sig), maxSig)
	}
	return nil
}

func checkKeyName(name string) error {
	if err := registry.ValidName(name); err != nil {
		return refuse(ErrInvalid, "invalid key name: %v", err)
	}
	return nil
}

func validateAddKey(body []byte, lim Limits) error {
	var c AddKey
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkKeyName(c.Name); err != nil {
		return err
	}
	if len(c.Key) > maxKeyLine {
		return fmt.Errorf("a key line of %d bytes: at most %d", len(c.Key), maxKeyLine)
	}
	if _, err := signing.ParseKey(c.Name, []byte(c.Key)); err != nil {
		return err
	}
	if err := checkPublisher(c.By); err != nil {
		return err
	}
	if err := checkSig(c.Sig); err != nil {
		return err
	}
	return checkTime(c.Time)
}

func validateRemoveKey(body []byte, lim Limits) error {
	var c RemoveKey
	if err := decodeStrict(body, &c); err != nil {
		return err
	}
	if err := checkKeyName(c.Name); err != nil {
		return err
	}
	if err := checkPublisher(c.By); err != nil {
		return err
	}
	if err := checkSig(c.Sig); err != nil {
		return err
	}
	return checkTime(c.Time)
}

func applyAddKey(st *state, index uint64, body []byte, ev *[]Event) any {
	var c AddKey
	if err := decode(body, &c); err != nil {
		return err
	}
	if err := checkKeyName(c.Name); err != nil {
		return err
	}
	k, err := signing.ParseKey(c.Name, []byte(c.Key))
	if err != nil {
		return refuse(ErrInvalid, "%v", err)
	}
	if _, ok := st.Trust[c.Name]; ok {
		return refuse(ErrExists, "key %q is already trusted: remove it first, or choose another name", c.Name)
	}
	for _, t := range st.Trust {
		if t.Fingerprint == k.Fingerprint {
			return refuse(ErrExists, "key %s is already trusted as %q", k.Fingerprint, t.Name)
		}
	}
	if err := st.verifyTrust("add", c.Name, k.Fingerprint, c.Sig); err != nil {
		return err
	}
	st.Trust[c.Name] = &TrustedKey{Name: c.Name, Line: k.Line(), Fingerprint: k.Fingerprint, By: c.By, Time: c.Time, Index: index}
	st.rekey()
	*ev = append(*ev, Event{index, "trust+", c.Name})
	return Result{Name: k.Fingerprint}
}

func applyRemoveKey(st *state, index uint64, body []byte, ev *[]Event) any {
	var c RemoveKey
	if err := decode(body, &c); err != nil {
		return err
	}
	t, ok := st.Trust[c.Name]
	if !ok {
		return refuse(ErrNotFound, "no trusted key %q", c.Name)
	}
	if err := st.verifyTrust("remove", c.Name, t.Fingerprint, c.Sig); err != nil {
		return err
	}
	if len(st.Trust) == 1 {
		return lastKey(c.Name)
	}
	delete(st.Trust, c.Name)
	st.rekey()
	*ev = append(*ev, Event{index, "trust-", c.Name})
	return Result{Name: t.Fingerprint}
}

// lastKey refuses the removal of the last trusted key: with none, no
// signature would be asked for, so removing it would not stop what it
// signed but serve every unsigned version again.
func lastKey(name string) error {
	return refuse(ErrInvalid, "invalid: %s is the last trusted key; removing it would turn signature checks off: trust another key first", name)
}

// TrustedKeys lists the trusted keys, sorted by name.
func (f *FSM) TrustedKeys() []*TrustedKey {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*TrustedKey, 0, len(f.st.Trust))
	for _, name := range sortedKeys(f.st.Trust) {
		out = append(out, f.st.Trust[name])
	}
	return out
}

// TrustedKey returns a trusted key by name.
func (f *FSM) TrustedKey(name string) (*TrustedKey, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k, ok := f.st.Trust[name]
	return k, ok
}

// TrustError is why the live version of tool t may not be served or run
// on this node now, verified against the keys trusted now: nil while no
// key is trusted, or when a trusted key signed it. A version published
// unsigned, or signed by a key since removed, is refused.
func (f *FSM) TrustError(t *Tool) error {
	if t == nil {
		return nil
	}
	f.mu.RLock()
	st := f.st
	if len(st.Trust) == 0 {
		f.mu.RUnlock()
		return nil
	}
	keys := st.trustedKeys()
	ntools := len(st.Tools)
	f.mu.RUnlock()
	// Tool records are immutable and keys is replaced, never changed, by
	// a change to trust/: a verdict holds for the pair.
	if err, ok := f.verdicts.get(t, keys); ok {
		return err
	}
	err := trustError(t, keys)
	f.verdicts.put(t, keys, err, ntools)
	return err
}

func trustError(t *Tool, keys []*signing.Key) error {
	if len(t.Sig) == 0 {
		return refuse(ErrDenied, "permission denied: version %s of tool %q is unsigned, and keys are trusted; publish a version signed by one", versionName(t.Version), t.Name)
	}
	_, err := signing.Verify(signing.Tool(t.Name, t.Meta, t.ExecHash), t.Sig, keys)
	if err == nil {
		return nil
	}
	if t.Signer != "" && !hasKey(keys, t.Signer) {
		return refuse(ErrDenied, "permission denied: signer %s is not trusted (version %s of tool %q)", t.Signer, versionName(t.Version), t.Name)
	}
	return refuse(ErrDenied, "%v (version %s of tool %q)", err, versionName(t.Version), t.Name)
}

func hasKey(keys []*signing.Key, name string) bool {
	i := sort.Search(len(keys), func(i int) bool { return keys[i].Name >= name })
	return i < len(keys) && keys[i].Name == name
}

func versionName(v uint64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatUint(v, 10)
}

// CheckSigned is the leader's check, before it appends entry, of the
// signatures Apply will verify against the state as it is now: a publish
// not signed by a trusted key while keys are trusted, or a change to
// trust/ not signed by one, is refused with the error Apply would give,
// so it never reaches the log. Apply checks again whatever this says.
func (f *FSM) CheckSigned(entry []byte) error {
	cmd := Unwrap(entry)
	if len(cmd) == 0 {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	if len(st.Trust) == 0 {
		return nil
	}
	body := cmd[1:]
	switch CommandType(cmd[0]) {
	case CmdPublishTools:
		var c PublishTools
		if decode(body, &c) != nil {
			return nil
		}
		for _, t := range c.Tools {
			if _, err := st.verifyTool(t.Name, t.Meta, t.ExecHash, t.Sig); err != nil {
				return err
			}
		}
	case CmdPutToolMeta:
		var c PutToolMeta
		if decode(body, &c) != nil {
			return nil
		}
		exec := ""
		if old, ok := st.base(c.Name); ok {
			exec = old.ExecHash
		}
		_, err := st.verifyTool(c.Name, c.Meta, exec, c.Sig)
		return err
	case CmdPutToolExec:
		var c PutToolExec
		if decode(body, &c) != nil {
			return nil
		}
		if old, ok := st.base(c.Name); ok && old.Published() {
			_, err := st.verifyTool(c.Name, old.Meta, c.ExecHash, c.Sig)
			return err
		}
	case CmdDropToolExec:
		var c DropToolExec
		if decode(body, &c) != nil {
			return nil
		}
		if old, ok := st.base(c.Name); ok && old.Published() {
			_, err := st.verifyTool(c.Name, old.Meta, "", c.Sig)
			return err
		}
	case CmdRollback:
		var c Rollback
		if decode(body, &c) != nil {
			return nil
		}
		if v, ok := st.Versions[c.Name].Get(c.Version); ok && v.HasContent() {
			if _, err := st.verifyTool(c.Name, v.Meta, v.ExecHash, v.Sig); err != nil {
				return refuse(ErrDenied, "%v: version %d cannot be rolled back to while it is not signed by a trusted key", err, c.Version)
			}
		}
	case CmdAddKey:
		var c AddKey
		if decode(body, &c) != nil {
			return nil
		}
		if k, err := signing.ParseKey(c.Name, []byte(c.Key)); err == nil {
			return st.verifyTrust("add", c.Name, k.Fingerprint, c.Sig)
		}
	case CmdRemoveKey:
		var c RemoveKey
		if decode(body, &c) != nil {
			return nil
		}
		if t, ok := st.Trust[c.Name]; ok {
			if err := st.verifyTrust("remove", c.Name, t.Fingerprint, c.Sig); err != nil {
				return err
			}
			if len(st.Trust) == 1 {
				return lastKey(c.Name)
			}
		}
	}
	return nil
}

// CheckTool is whether a publish of tool name with this content and
// signature would be accepted now: nil while no key is trusted.
func (f *FSM) CheckTool(name string, meta []byte, execHash string, sig []byte) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, err := f.st.verifyTool(name, meta, execHash, sig)
	return err
}

// Trusting reports whether trust/ holds a key, so publishes must be
// signed.
func (f *FSM) Trusting() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.st.Trust) > 0
}

// verdicts caches TrustError's answers for the keys trusted now: the
// catalog, t/ listings and every call ask it.
type verdicts struct {
	mu   sync.Mutex
	keys []*signing.Key
	m    map[*Tool]error
}

func (v *verdicts) get(t *Tool, keys []*signing.Key) (error, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !sameKeys(v.keys, keys) {
		return nil, false
	}
	err, ok := v.m[t]
	return err, ok
}

func (v *verdicts) put(t *Tool, keys []*signing.Key, err error, ntools int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	// A new set of keys, or records of tools since replaced piling up,
	// start the cache over.
	if !sameKeys(v.keys, keys) || len(v.m) > 2*ntools+1024 {
		v.keys, v.m = keys, map[*Tool]error{}
	}
	v.m[t] = err
}

// sameKeys reports whether a and b are the same slice (the state's keys
// are replaced at every change, never modified).
func sameKeys(a, b []*signing.Key) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// SignerOf is the name of the trusted key whose signature version v of
// tool name carries, verified against the keys trusted now; else the
// signer recorded when it was published ("" for none).
func (f *FSM) SignerOf(name string, v *Version) string {
	if len(v.Sig) == 0 {
		return v.Signer
	}
	f.mu.RLock()
	keys := f.st.trustedKeys()
	f.mu.RUnlock()
	if len(keys) == 0 {
		return v.Signer
	}
	if k, err := signing.Verify(signing.Tool(name, v.Meta, v.ExecHash), v.Sig, keys); err == nil {
		return k.Name
	}
	return v.Signer
}
