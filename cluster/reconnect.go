package cluster

import (
	"math/rand"
	"time"
)

// Reconnecting, serf's way. memberlist forgets a dead node after
// GossipToTheDeadTime, and never contacts it again on its own: after a
// partition longer than that, both sides list each other dead for good.
// So this package remembers every member that failed (dead, not left)
// with its address, and keeps trying memberlist Join to one of them, at
// random, every ReconnectInterval until ReconnectTimeout has passed since
// it failed. A join is a push/pull of the whole state: each side learns
// the other's members, and every node told it is dead refutes that, so one
// successful join on either side heals the whole cluster.
const (
	// DefaultReconnectInterval is short, unlike serf's 30 s, so that gossip
	// agrees again within a few seconds of a network healing. A try costs
	// one TCP connection attempt.
	DefaultReconnectInterval = time.Second
	// DefaultReconnectTimeout is serf's and consul's: a day.
	DefaultReconnectTimeout = 24 * time.Hour
	// maxTrying bounds the joins under way at once: a join to a node that
	// is still unreachable can block for memberlist's TCP timeout (10 s).
	maxTrying = 3
)

// reconnectLoop tries a failed member every reconnectEvery until
// Shutdown. While no member has failed it sleeps until one does: an idle
// node of a large cluster should not wake every second for nothing.
func (c *Cluster) reconnectLoop() {
	for {
		if !c.anyFailed(time.Now()) {
			select {
			case <-c.stop:
				return
			case <-c.failed:
			}
		}
		select {
		case <-c.stop:
			return
		case <-time.After(c.reconnectEvery):
		}
		name, addr, ok := c.pickFailed(time.Now())
		if !ok {
			continue
		}
		go c.reconnect(name, addr)
	}
}

// anyFailed reports whether a member failed less than reconnectFor ago.
func (c *Cluster) anyFailed(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, t := range c.members {
		if c.retriable(n, t, now) {
			return true
		}
	}
	return false
}

// retriable: member n (t) failed less than reconnectFor ago, at an
// address to try again. c.mu is held.
func (c *Cluster) retriable(n string, t tracked, now time.Time) bool {
	return n != c.name && t.m.State == "dead" && t.m.Addr != "" && now.Sub(t.gone) <= c.reconnectFor
}

// pickFailed chooses, at random, a failed member to try again, one that no
// try is under way to, and marks it as being tried. Members that failed
// longer than reconnectFor ago are reaped: they are no longer tried, and
// Members stops listing them after ForgetAfter.
func (c *Cluster) pickFailed(now time.Time) (name, addr string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.trying) >= maxTrying {
		return "", "", false
	}
	var failed []Member
	for n, t := range c.members {
		if c.retriable(n, t, now) && !c.trying[n] {
			failed = append(failed, t.m)
		}
	}
	if len(failed) == 0 {
		return "", "", false
	}
	m := failed[rand.Intn(len(failed))]
	c.trying[m.Name] = true
	return m.Name, m.Addr, true
}

// reconnect joins one failed member. Failure is the usual outcome while
// the network is cut, so it is not logged; success is.
func (c *Cluster) reconnect(name, addr string) {
	defer func() {
		c.mu.Lock()
		delete(c.trying, name)
		c.mu.Unlock()
	}()
	select {
	case <-c.stop:
		return
	default:
	}
	if n, err := c.ml.Join([]string{addr}); err == nil && n > 0 {
		c.logger.Printf("cluster: reconnected to failed member %s at %s", name, addr)
	}
}
