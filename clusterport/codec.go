package clusterport

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The port's one framing for the messages of its own protocols
// (forwarded writes, routed calls): a 4-byte big-endian length and a JSON
// body, requests and answers in turn on a connection that is kept for the
// next. Raft (hashicorp/raft), the change stream (package stream) and
// executables (package blobs) speak their own wire formats inside their
// protocols.

// WriteMsg writes v as one message.
func WriteMsg(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(append(hdr[:], b...)); err != nil {
		return err
	}
	return nil
}

// ErrTooBig is a message over its protocol's cap.
var ErrTooBig = errors.New("message too big")

// errMidMessage marks a deadline that passed inside a message, not
// between messages.
var errMidMessage = errors.New("deadline passed inside a message")

// ReadMsg reads one message of at most limit bytes into v. The body is
// read as it arrives, never allocated at its declared size up front, so a
// peer that announces a large message and sends it slowly holds only what
// it has sent.
func ReadMsg(r io.Reader, v any, limit uint32) error {
	_, err := ReadMsgTimed(r, nil, v, limit, 0, 0)
	return err
}

// ReadMsgTimed is ReadMsg with deadlines on c (when c is not nil): the
// header must arrive within idle, then the body within body (no deadline
// for one that is 0). It returns the size the header declared. A deadline
// that passes inside a message is told apart by MidMessage.
func ReadMsgTimed(r io.Reader, c net.Conn, v any, limit uint32, idle, body time.Duration) (uint32, error) {
	if c != nil && idle > 0 {
		c.SetReadDeadline(time.Now().Add(idle))
	}
	var hdr [4]byte
	if k, err := io.ReadFull(r, hdr[:]); err != nil {
		if k > 0 && IsTimeout(err) {
			return 0, fmt.Errorf("%w after %d of 4 header bytes: %w", errMidMessage, k, err)
		}
		return 0, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > limit {
		return size, fmt.Errorf("%w: a message of %d bytes is over this protocol's %d-byte limit", ErrTooBig, size, limit)
	}
	if c != nil && body > 0 {
		c.SetReadDeadline(time.Now().Add(body))
	}
	var buf bytes.Buffer
	if n, err := buf.ReadFrom(io.LimitReader(r, int64(size))); err != nil {
		if IsTimeout(err) {
			return size, fmt.Errorf("%w after %d of %d bytes: %w", errMidMessage, n, size, err)
		}
		return size, err
	} else if n < int64(size) {
		return size, fmt.Errorf("message cut short after %d of %d bytes: %w", n, size, io.ErrUnexpectedEOF)
	}
	if c != nil {
		c.SetReadDeadline(time.Time{})
	}
	return size, json.Unmarshal(buf.Bytes(), v)
}

// MidMessage reports whether err is a deadline that passed inside a
// message (a stalled sender), not between messages (an idle one).
func MidMessage(err error) bool { return errors.Is(err, errMidMessage) }

// IsTimeout reports whether err is a deadline passing.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ErrorKinds names the errors that cross the wire in an answer, so that
// errors.Is still works on the side that reads it.
type ErrorKinds map[string]error

// Kind is err's name in k, "" when none matches.
func (k ErrorKinds) Kind(err error) string {
	for name, e := range k {
		if errors.Is(err, e) {
			return name
		}
	}
	return ""
}

// Error is the error an answer carried, message msg of kind kind.
func (k ErrorKinds) Error(msg, kind string) error {
	return &RemoteError{Msg: msg, Kind: k[kind]}
}

// RemoteError is an error a peer answered with, as this side sees it: its
// message, and unwrapping to its kind (nil when it had none).
type RemoteError struct {
	Msg  string
	Kind error
}

func (e *RemoteError) Error() string { return e.Msg }
func (e *RemoteError) Unwrap() error { return e.Kind }
