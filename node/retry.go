package node

import (
	"errors"
	"time"
)

// The write path's retry rules.
//
// A forwarded write fails in one of two ways. Either it certainly was not
// applied (errUnsent: the dial failed, the leader refused it as no longer
// the leader, the connection was closed before the command left), or the
// answer was lost after the command left (errAmbiguous). Both are retried
// until the write timeout, the leader re-resolved each time: every command
// is proposed as a request with an id, the same for each try, which the
// FSM applies once and answers alike ever after (raftfsm/dedupe.go). So a
// retried create answers the name the first try made, and a retried
// unload answers what the first try did ("not loaded" included), where
// guessing from the state after the fact could not tell.

const (
	// fwdDialTimeout bounds one dial of the leader. The cluster port is on
	// a LAN: a leader that does not accept within it is cut off or dead,
	// and Raft will elect another within about a second; the write is
	// retried against whichever leader Raft names then.
	fwdDialTimeout = time.Second
	// fwdAnswerTimeout bounds the wait for the leader's answer to a
	// command under 1 MiB (a larger one may take its time to travel). A leader cut off from its majority steps down
	// after LeaderLeaseTimeout and answers; one that cannot answer at all
	// is given up on here and the command retried elsewhere.
	fwdAnswerTimeout = 3 * time.Second
)

// errAmbiguous marks a write whose command left this node but whose answer
// did not arrive: it may or may not have been applied.
var errAmbiguous = errors.New("the write may or may not have been applied")
