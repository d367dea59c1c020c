package node

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/toolnode/toolnode/clusterport"
	"github.com/toolnode/toolnode/raftfsm"
)

// BenchmarkForwardMessages measures what the forwarding protocol's
// encoding costs one agent/new through a follower, in memory: the
// command made and wrapped in a request id, the request written and read
// back, the answer written and read back (the cluster port's codec,
// clusterport.WriteMsg and ReadMsg, JSON in 4-byte frames). No network, no Raft: the share of a
// forwarded write's CPU that is JSON and allocation.
func BenchmarkForwardMessages(b *testing.B) {
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		cmd, err := raftfsm.Encode(raftfsm.CmdCreateAgent, raftfsm.CreateAgent{Session: "b123", Name: "a4567"})
		if err != nil {
			b.Fatal(err)
		}
		if cmd, err = raftfsm.Request(rand.Text(), cmd); err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		if err := clusterport.WriteMsg(&buf, fwdRequest{Cmd: cmd, From: "n2", Addr: "127.0.0.1:7947", Applied: 123456}); err != nil {
			b.Fatal(err)
		}
		var req fwdRequest
		if err := clusterport.ReadMsg(bufio.NewReader(&buf), &req, maxForward); err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		if err := clusterport.WriteMsg(&buf, fwdResponse{Index: 123457, Name: "a4567"}); err != nil {
			b.Fatal(err)
		}
		var resp fwdResponse
		if err := clusterport.ReadMsg(&buf, &resp, maxFwdResponse); err != nil {
			b.Fatal(err)
		}
	}
}
