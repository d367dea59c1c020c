package node

import (
	"errors"
	"fmt"
	"io"
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
		if got := raftStartNoise(c.msg, c.args); got != c.want {
			t.Errorf("raftStartNoise(%q, %v) = %v, want %v", c.msg, c.args, got, c.want)
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
		if got := peerHungUp([]any{"error", c.err}); got != c.want {
			t.Errorf("peerHungUp(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
