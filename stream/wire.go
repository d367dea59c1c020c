package stream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Frames a server sends: a kind byte, the index (8 bytes, big-endian), the
// payload's length (4 bytes, big-endian), the payload.
const (
	frameSnapshot  byte = 'S' // index: the snapshot's applied index; payload: the FSM's encoding
	frameEntry     byte = 'E' // index: the entry's; payload: the command bytes as in the log
	frameHeartbeat byte = 'H' // index: the server's applied index; payload: Status as JSON
)

// helloSize is what a client sends first: the index its replica has
// applied (8 bytes, big-endian).
const helloSize = 8

// maxStatus bounds a heartbeat's payload.
const maxStatus = 1 << 20

// Server is one member of the Raft configuration, as a client sees it.
type Server struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"` // cluster address
	Voter bool   `json:"voter,omitempty"`
}

// Status is the cluster as the serving server sees it, sent with every
// heartbeat.
type Status struct {
	Leader     string   `json:"leader,omitempty"`     // the leader's name; "" when none is known
	LeaderAddr string   `json:"leaderAddr,omitempty"` // its cluster address
	Servers    []Server `json:"servers,omitempty"`
}

// errIdle is readFrame's answer when no frame began within its idle
// wait: nothing of the stream was read, so it may be read on.
var errIdle = errors.New("stream: no frame")

// ErrTooBig is a frame over its cap.
var ErrTooBig = errors.New("stream: frame too big")

type frame struct {
	kind  byte
	index uint64
	data  []byte
}

func writeFrame(w io.Writer, kind byte, index uint64, data []byte) error {
	var hdr [13]byte
	hdr[0] = kind
	binary.BigEndian.PutUint64(hdr[1:9], index)
	binary.BigEndian.PutUint32(hdr[9:13], uint32(len(data)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// limits are the caps of one frame's payload, by kind.
type limits struct {
	entry    uint32
	snapshot uint32
}

func (l limits) of(kind byte) (uint32, error) {
	switch kind {
	case frameEntry:
		return l.entry, nil
	case frameSnapshot:
		return l.snapshot, nil
	case frameHeartbeat:
		return maxStatus, nil
	}
	return 0, fmt.Errorf("stream: unknown frame kind %#x", kind)
}

// readFrame reads one frame: its header within idle, its payload within
// body (deadlines on c). The payload is read as it arrives, never
// allocated at its declared size up front.
func readFrame(br *bufio.Reader, c net.Conn, lim limits, idle, body time.Duration) (frame, error) {
	var f frame
	c.SetReadDeadline(time.Now().Add(idle))
	var hdr [13]byte
	if n, err := io.ReadFull(br, hdr[:]); err != nil {
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() {
			return f, fmt.Errorf("%w: %w", errIdle, err)
		}
		return f, err
	}
	f.kind, f.index = hdr[0], binary.BigEndian.Uint64(hdr[1:9])
	size := binary.BigEndian.Uint32(hdr[9:13])
	max, err := lim.of(f.kind)
	if err != nil {
		return f, err
	}
	if size > max {
		return f, fmt.Errorf("%w: a %c frame of %d bytes is over its %d-byte limit", ErrTooBig, f.kind, size, max)
	}
	c.SetReadDeadline(time.Now().Add(body))
	var buf []byte
	if size <= 1<<16 {
		buf = make([]byte, size)
		_, err = io.ReadFull(br, buf)
	} else {
		var b bytes.Buffer
		_, err = io.CopyN(&b, br, int64(size))
		buf = b.Bytes()
	}
	if err != nil {
		return f, err
	}
	f.data = buf
	return f, nil
}

func encodeStatus(s Status) []byte {
	b, _ := json.Marshal(s)
	return b
}
