//go:build linux

package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// fwdMsg and fwdAnswer are the cluster port's 'F' protocol as a follower
// speaks it: a 4-byte big-endian length, then JSON.
// fwdMsg is a forwarded write as a member sends it: for a token-less
// caller, anon@e2e, via a node it names (the leader grants it the call
// role at most).
type fwdMsg struct {
	Cmd  []byte `json:"cmd"`
	Anon string `json:"anon"`
	Node string `json:"node"`
}

type fwdAnswer struct {
	Index uint64 `json:"index"`
	Name  string `json:"name"`
	Err   string `json:"err"`
	Kind  string `json:"kind"`
}

func forwardRaw(t *testing.T, c net.Conn, cmd []byte) fwdAnswer {
	t.Helper()
	b, _ := json.Marshal(fwdMsg{Cmd: cmd, Anon: "anon@e2e", Node: "forger"})
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := c.Write(append(msg, b...)); err != nil {
		t.Fatalf("send %q: %v", cmd, err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("answer to %q: %v", cmd, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("answer to %q: %v", cmd, err)
	}
	var a fwdAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("answer to %q: %v", cmd, err)
	}
	return a
}

// Issue 7: a forged command sent to the leader over the cluster port, as
// a follower forwards writes, is refused and never committed: the node
// says why, keeps serving, and starts again on its log. The control is a
// valid command sent the same way, which is committed (and
// TestInMem_PoisonedEntrySkipped in node shows what becomes of an
// invalid entry appended around the leader's check: every node skips it).
func TestE2E_ForgedCommandNeverCommitted(t *testing.T) {
	e := newEnv(t)
	// Plain TCP on the cluster port, as a member speaks it: no key and
	// no cluster secret (-insecure). What a member may send is the test.
	p := e.startWith(t, e.childEnv(), "-insecure")
	pollUntil(t, 60*time.Second, "the node serves its tree", func() (bool, string) {
		s, err := read9(e.p9, "session/idx")
		if err != nil {
			return false, err.Error()
		}
		return true, s
	})

	c, err := net.DialTimeout("tcp", e.cluster, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{'F'}); err != nil {
		t.Fatal(err)
	}
	for _, forged := range []struct{ name, cmd string }{
		{"unknown type", "\x63{}"},
		{"undecodable body", "\x0a{"},
		{"unknown field", "\x05" + `{"name":"evil","evil":1}`},
		{"bad session name", "\x05" + `{"name":"../../etc"}`},
		{"hash mismatch", "\x0c" + `{"owner":"e2e","origin":"9p","time":1,"name":"x","exec":"eA==","execHash":"` + strings.Repeat("0", 64) + `","mode":493}`},
	} {
		a := forwardRaw(t, c, []byte(forged.cmd))
		if a.Err == "" || a.Kind != "invalid" || a.Index != 0 {
			t.Fatalf("%s: answer %+v, want an invalid error and no index", forged.name, a)
		}
		t.Logf("%s: refused: %s", forged.name, a.Err)
	}
	p.waitLog(t, 5*time.Second, "refused a command from node at", "unknown command type 99")

	// Control: the same connection commits a valid command.
	a := forwardRaw(t, c, []byte("\x05"+`{"name":"forwarded","owner":"anon@e2e","time":1}`))
	if a.Err != "" || a.Index == 0 || a.Name != "forwarded" {
		t.Fatalf("a valid forwarded command: answer %+v, want it committed", a)
	}
	c.Close()
	p.stop(t)

	// Nothing poisoned was committed: the node starts again on its log,
	// skips nothing, and has the valid write.
	p = e.start(t)
	pollUntil(t, 60*time.Second, "the restarted node has the forwarded session", func() (bool, string) {
		s, err := read9(e.p9, "session/idx")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(s, "forwarded"), s
	})
	if strings.Contains(p.log.String(), "skipped the log entry") {
		t.Fatalf("the restarted node skipped a log entry: an invalid command was committed:\n%s", p.log.String())
	}
	p.stop(t)
}
