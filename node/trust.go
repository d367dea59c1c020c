package node

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolnode/toolnode/p9"
	"github.com/toolnode/toolnode/raftfsm"
	"github.com/toolnode/toolnode/registry"
	"github.com/toolnode/toolnode/rollout"
	"github.com/toolnode/toolnode/signing"
)

// Trusted keys and signed publishes through 9P (DESIGN §8): trust/, and
// t/NAME.sig. The checks are the FSM's (raftfsm/trust.go): the leader's
// before it appends, and every node's as it applies and before it serves
// or runs a tool.

var (
	_ p9.Trust    = auditBackend{}
	_ p9.ToolSigs = auditBackend{}
)

// sigTTL is how long a signature written to t/NAME.sig waits for the
// publish it is for; stagedTTL how long an executable closed while keys
// are trusted, whose signature covers metadata not yet published, waits
// for the close of its t/NAME.meta.
const (
	sigTTL    = time.Minute
	stagedTTL = 10 * time.Second
)

// toolSigs holds, per principal and tool, the signature written to
// t/NAME.sig and the executable staged for the next t/NAME.meta.
type toolSigs struct {
	mu   sync.Mutex
	m    map[string]*pendingSig
	kick chan struct{} // an executable was staged (flushStaged)
}

type pendingSig struct {
	sig    []byte
	at     time.Time
	staged *stagedExec
}

// stagedExec is an executable stored in the blob store, not yet
// published: the next close of its t/NAME.meta publishes both as one
// version, under the signature over both.
type stagedExec struct {
	c      caller // who closed t/NAME: the flush publishes as them
	digest string
	size   int64
	mode   uint32
	at     time.Time
}

func sigKey(who, name string) string { return who + "\x00" + name }

// get returns the pending signature (nil when none or expired) and
// staged executable of who's tool name; take also forgets them.
func (t *toolSigs) get(who, name string, take bool) ([]byte, *stagedExec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sigKey(who, name)
	p, ok := t.m[k]
	if !ok {
		return nil, nil
	}
	if take {
		delete(t.m, k)
	}
	now := time.Now()
	var sig []byte
	if now.Sub(p.at) < sigTTL {
		sig = p.sig
	}
	return sig, p.staged
}

// chmodStaged sets the mode of who's staged executable of name, if any.
func (t *toolSigs) chmodStaged(who, name string, mode uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.m[sigKey(who, name)]
	if !ok || p.staged == nil {
		return false
	}
	p.staged.mode = mode
	return true
}

// due takes the staged executables older than stagedTTL, by tool name,
// and says when the next one is due (zero when none is staged).
func (t *toolSigs) due(now time.Time) (map[string]*stagedExec, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[string]*stagedExec
	var next time.Time
	for k, p := range t.m {
		st := p.staged
		if st == nil {
			continue
		}
		at := st.at.Add(stagedTTL)
		if now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		if out == nil {
			out = map[string]*stagedExec{}
		}
		out[k[strings.IndexByte(k, 0)+1:]] = st
		p.staged = nil
		if p.sig == nil {
			delete(t.m, k)
		}
	}
	return out, next
}

func (t *toolSigs) kicks() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kick == nil {
		t.kick = make(chan struct{}, 1)
	}
	return t.kick
}

func (t *toolSigs) put(who, name string, sig []byte, staged *stagedExec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*pendingSig{}
	}
	now := time.Now()
	for k, p := range t.m {
		if now.Sub(p.at) >= sigTTL {
			delete(t.m, k)
		}
	}
	k := sigKey(who, name)
	p := t.m[k]
	if p == nil {
		p = &pendingSig{}
		t.m[k] = p
	}
	if sig != nil {
		p.sig = sig
	}
	if staged != nil {
		p.staged = staged
		if t.kick == nil {
			t.kick = make(chan struct{}, 1)
		}
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
	p.at = now
}

// signsLiveMeta says whether sig, while keys are trusted, signs the
// tool's live metadata with the executable d: then d is all the publish
// changes, and nothing waits for a t/NAME.meta.
func (n *Node) signsLiveMeta(name, d string, sig []byte) bool {
	if !n.fsm.Trusting() {
		return false
	}
	t, ok := n.fsm.Tool(name)
	return ok && t.Meta != nil && n.fsm.CheckTool(name, t.Meta, d, sig) == nil
}

// flushStaged publishes each executable staged longer than stagedTTL
// with its tool's live metadata, under the signature then attached; a
// tool with no metadata drops it (DESIGN §8).
func (n *Node) flushStaged() {
	defer n.wg.Done()
	kick := n.sigs.kicks()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next := n.sigs.due(time.Now())
		for name, st := range due {
			n.publishStaged(name, st)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-n.ctx.Done():
			return
		case <-kick:
		case <-timer.C:
		}
	}
}

func (n *Node) publishStaged(name string, st *stagedExec) {
	who := publisherOrNode(st.c.who, n.cfg.Name)
	if t, ok := n.fsm.Tool(name); !ok || !t.Published() || t.Meta == nil {
		n.logger.Printf("t/%s: executable %s staged by %s dropped: no close of t/%s.meta within %s and the tool has no live metadata", name, st.digest, who, name, stagedTTL)
		return
	}
	sig, _ := n.sigs.get(st.c.who, name, true)
	_, err := n.applyFor(st.c, raftfsm.CmdPutToolExec, raftfsm.PutToolExec{
		Owner: n.cfg.Name, Origin: raftfsm.Origin9P, Time: nowNano(), Name: name,
		ExecHash: st.digest, Size: st.size, Mode: st.mode, Publisher: rollout.PublisherName(st.c.who), Sig: sig,
	})
	if err != nil {
		n.logger.Printf("t/%s: executable %s staged by %s not published with the live metadata: %v", name, st.digest, who, err)
		return
	}
	n.logger.Printf("t/%s: executable %s staged by %s published with the live metadata (no close of t/%s.meta within %s)", name, st.digest, who, name, stagedTTL)
}

// AttachToolSig keeps the signature written to t/NAME.sig for the next
// publish of NAME by this principal.
func (a auditBackend) AttachToolSig(name string, sig []byte) error {
	if err := registry.ValidName(name); err != nil {
		return err
	}
	fp, err := signing.Parse(sig)
	if err != nil {
		return fmt.Errorf("%v; t/%s.sig takes the armored signature ssh-keygen -Y sign -n %s writes", err, name, signing.Namespace)
	}
	a.sigs.put(a.who, name, sig, nil)
	a.logger.Printf("t/%s.sig: a signature by %s attached for %s's next publish of %s", name, fp, publisherOrNode(a.who, a.cfg.Name), name)
	return nil
}

func publisherOrNode(who, self string) string {
	if who == "" {
		return "node:" + self
	}
	return who
}

// TrustIndex is trust/idx.
func (n *Node) TrustIndex() string {
	var b strings.Builder
	for _, k := range n.fsm.TrustedKeys() {
		b.WriteString(k.Name + " " + k.Fingerprint + "\n")
	}
	return b.String()
}

// AddTrustedKey trusts a publisher key (trust/new).
func (a auditBackend) AddTrustedKey(name, line string, sig []byte) (string, error) {
	start := time.Now()
	fp, err := a.Node.addTrustedKey(a.caller(), name, line, sig)
	a.record(start, a.who, "trust-add", name, err)
	return fp, err
}

// RemoveTrustedKey removes a publisher key (trust/ctl).
func (a auditBackend) RemoveTrustedKey(name string, sig []byte) error {
	start := time.Now()
	err := a.Node.removeTrustedKey(a.caller(), name, sig)
	a.record(start, a.who, "trust-remove", name, err)
	return err
}

func (n *Node) addTrustedKey(c caller, name, line string, sig []byte) (string, error) {
	if err := registry.ValidName(name); err != nil {
		return "", fmt.Errorf("invalid key name: %v", err)
	}
	k, err := signing.ParseKey(name, []byte(line))
	if err != nil {
		n.logger.Printf("trust: refused key %s from %s: %v", name, publisherOrNode(c.who, n.cfg.Name), err)
		return "", err
	}
	r, err := n.applyFor(c, raftfsm.CmdAddKey, raftfsm.AddKey{Name: name, Key: k.Line(), Sig: sig, By: c.who, Time: nowNano()})
	if err != nil {
		n.logger.Printf("trust: refused key %s (%s) from %s: %v", name, k.Fingerprint, publisherOrNode(c.who, n.cfg.Name), err)
		return "", err
	}
	n.logger.Printf("trust: key %s (%s) trusted, added by %s", name, r.Name, publisherOrNode(c.who, n.cfg.Name))
	return r.Name, nil
}

func (n *Node) removeTrustedKey(c caller, name string, sig []byte) error {
	if _, ok := n.fsm.TrustedKey(name); !ok {
		return fmt.Errorf("file does not exist: no trusted key %q: %w", name, raftfsm.ErrNotFound)
	}
	_, err := n.applyFor(c, raftfsm.CmdRemoveKey, raftfsm.RemoveKey{Name: name, Sig: sig, By: c.who, Time: nowNano()})
	if err != nil {
		n.logger.Printf("trust: refused the removal of key %s by %s: %v", name, publisherOrNode(c.who, n.cfg.Name), err)
		return err
	}
	n.logger.Printf("trust: key %s removed by %s", name, publisherOrNode(c.who, n.cfg.Name))
	return nil
}

// refusedPublish logs a publish the signature checks refused.
func (n *Node) refusedPublish(c caller, name string, err error) {
	if errors.Is(err, raftfsm.ErrDenied) {
		n.logger.Printf("refused the publish of %s by %s: %v", name, publisherOrNode(c.who, n.cfg.Name), err)
	}
}
