package logx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

func TestRaftNoise(t *testing.T) {
	for _, c := range []struct {
		msg  string
		args []any
		want bool
	}{
		{"heartbeat timeout reached, starting election", []any{"last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID("")}, true},
		{"heartbeat timeout reached, starting election", []any{"last-leader-addr", raft.ServerAddress("x:1"), "last-leader-id", raft.ServerID("n1")}, false},
		{"appendEntries rejected, sending older logs", []any{"peer", "n2", "next", uint64(1)}, true},
		{"appendEntries rejected, sending older logs", []any{"peer", "n2", "next", uint64(42)}, false},
		{"failed to get previous log", []any{"previous-index", uint64(4), "last-index", uint64(0), "error", raft.ErrLogNotFound}, true},
		{"failed to get previous log", []any{"previous-index", uint64(9), "last-index", uint64(7), "error", raft.ErrLogNotFound}, false},
		{"failed to contact quorum of nodes, stepping down", nil, false},
	} {
		if got := RaftStartNoise(c.msg, c.args); got != c.want {
			t.Errorf("RaftStartNoise(%q, %v) = %v, want %v", c.msg, c.args, got, c.want)
		}
	}

	reset := &net.OpError{Op: "read", Net: "tcp", Err: fmt.Errorf("read: %w", syscall.ECONNRESET)}
	for _, c := range []struct {
		err  any
		want bool
	}{
		{reset, true},
		{errors.New("read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer"), true},
		{fmt.Errorf("decode: %w", net.ErrClosed), true},
		{io.ErrUnexpectedEOF, true},
		{errors.New("msgpack decode error: invalid code"), false},
		{"not an error", false},
	} {
		if got := PeerHungUp([]any{"error", c.err}); got != c.want {
			t.Errorf("PeerHungUp(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestArgUint(t *testing.T) {
	args := []any{"previous-index", uint64(4), "peer", "n2"}
	if got := ArgUint(args, "previous-index"); got != 4 {
		t.Errorf("ArgUint(previous-index) = %d, want 4", got)
	}
	for _, key := range []string{"peer", "absent"} {
		if got := ArgUint(args, key); got != math.MaxUint64 {
			t.Errorf("ArgUint(%s) = %d, want the largest uint64", key, got)
		}
	}
	if !RaftShutdownNoise("peer has newer term, stopping replication") || RaftShutdownNoise("failed to contact quorum of nodes, stepping down") {
		t.Error("RaftShutdownNoise does not tell a handover from a lost quorum")
	}
}
