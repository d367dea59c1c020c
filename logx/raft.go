package logx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// Raft's warnings and errors that are no fault, and hclog's key, value
// lists read: what an HclogOptions.Adjust for Raft uses to re-level them.

// raftShutdownNoise is what Raft logs, as a warning or an error, when a
// node stops as it should: a leader that hands over leadership sees the
// new leader's higher term on its next replication ("peer has newer
// term"), and a node already removed from the configuration does not
// stand for election.
var raftShutdownNoise = map[string]bool{
	"peer has newer term, stopping replication":           true,
	"not part of stable configuration, aborting election": true,
}

// RaftShutdownNoise reports whether Raft's warning or error msg is one a
// node logs when it stops as it should (a leader handing over, a removed
// node not standing for election); while it closes these are INFO.
func RaftShutdownNoise(msg string) bool { return raftShutdownNoise[msg] }

// RaftStartNoise reports whether Raft's warning is what a healthy
// cluster logs as it forms: a node's first election, with no leader ever
// seen (a cluster of one bootstrapping), and a new member with an empty
// log being caught up from its first entry (on the leader and on the new
// member), and a client's idle Raft, in no configuration.
func RaftStartNoise(msg string, args []any) bool {
	switch msg {
	case "heartbeat timeout reached, starting election":
		return fmt.Sprint(ArgValue(args, "last-leader-id")) == ""
	case "appendEntries rejected, sending older logs":
		return fmt.Sprint(ArgValue(args, "next")) == "1"
	case "failed to get previous log":
		return fmt.Sprint(ArgValue(args, "last-index")) == "0"
	case "no known peers, aborting election":
		// A client's Raft: it is in no configuration, and stays idle.
		return true
	}
	return false
}

// ArgValue is the value of key in hclog's key, value list, or nil.
func ArgValue(args []any, key string) any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == key {
			return args[i+1]
		}
	}
	return nil
}

// ArgUint is an unsigned value of hclog's key, value list, or the
// largest uint64 when there is none.
func ArgUint(args []any, key string) uint64 {
	v, err := strconv.ParseUint(fmt.Sprint(ArgValue(args, key)), 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return v
}

// PeerHungUp reports whether an hclog "error" value is a connection the
// other end closed or reset.
func PeerHungUp(args []any) bool {
	err, _ := ArgValue(args, "error").(error)
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	// The decoder may flatten the error into its text.
	text := err.Error()
	return strings.Contains(text, syscall.ECONNRESET.Error()) || strings.Contains(text, net.ErrClosed.Error())
}
