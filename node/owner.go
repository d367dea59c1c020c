package node

import (
	"fmt"
	"time"

	"github.com/toolnode/toolnode/p9"
)

// Sessions belong to their maker (DESIGN §7): a session records the
// principal that made it, and only that principal and admin may use it
// (make agents in it, load, unload, call, read its agents' state, kill
// it); session/idx lists the sessions the caller may use. One
// principal's sessions still see each other. A session made before
// sessions had owners has none and stays open to every call role.

// mayUse is nil when a's principal may use session, else the refusal,
// audited. A session this node does not have yet is looked for again
// once the node is current; one that does not exist is the method's to
// report.
func (a auditBackend) mayUse(session string) error {
	if a.role >= p9.RoleAdmin {
		return nil
	}
	owner, ok := a.fsm.SessionOwner(session)
	if !ok && a.caughtUp() == nil {
		owner, ok = a.fsm.SessionOwner(session)
	}
	if !ok || owner == "" || owner == a.who {
		return nil
	}
	err := fmt.Errorf("permission denied: session %q was made by another principal; only its maker and admin may use it", session)
	a.record(time.Now(), a.who, "use-session", session, err)
	return err
}

// Sessions is session/idx: the sessions the principal may use.
func (a auditBackend) Sessions() ([]string, error) {
	all, err := a.Node.Sessions()
	if err != nil || a.role >= p9.RoleAdmin {
		return all, err
	}
	out := all[:0:0]
	for _, s := range all {
		if owner, _ := a.fsm.SessionOwner(s); owner == "" || owner == a.who {
			out = append(out, s)
		}
	}
	return out, nil
}

func (a auditBackend) Agents(session string) ([]string, error) {
	if err := a.mayUse(session); err != nil {
		return nil, err
	}
	return a.Node.Agents(session)
}

func (a auditBackend) Loaded(session, agent string) ([]string, error) {
	if err := a.mayUse(session); err != nil {
		return nil, err
	}
	return a.Node.Loaded(session, agent)
}

func (a auditBackend) Rev(session, agent string) (uint64, error) {
	if err := a.mayUse(session); err != nil {
		return 0, err
	}
	return a.Node.Rev(session, agent)
}

func (a auditBackend) Preamble(session, agent string) (string, error) {
	if err := a.mayUse(session); err != nil {
		return "", err
	}
	return a.Node.Preamble(session, agent)
}
