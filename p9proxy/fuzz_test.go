package p9proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/knusbaum/go9p/proto"
)

// FuzzAttach feeds any body to the attach rewriter: it never panics, and
// what it forwards is a well-formed message of the same type and tag
// whose aname is the token and whose uname is the client's.
func FuzzAttach(f *testing.F) {
	f.Add(true, tattach(1, "glenda", "x")[headerSize:], uint32(8192))
	f.Add(false, []byte{1, 0, 0, 0, 5, 0, 'a'}, uint32(256))
	f.Add(true, []byte{}, uint32(256))
	f.Fuzz(func(t *testing.T, isAttach bool, body []byte, msize uint32) {
		typ := uint8(proto.Tauth)
		if isAttach {
			typ = proto.Tattach
		}
		frame := msg(typ, 42, body)
		p, err := New(Options{Dial: nopDial, Token: "the-token"})
		if err != nil {
			t.Fatal(err)
		}
		s := &session{p: p, cw: bufio.NewWriter(io.Discard)}
		s.msize.Store(max(msize%70000, headerSize))
		out, err := s.attach(frame)
		if err != nil || out == nil {
			return
		}
		if int(binary.LittleEndian.Uint32(out)) != len(out) || out[4] != typ || out[5] != 42 || out[6] != 0 {
			t.Fatalf("forwarded a bad header: % x", out[:7])
		}
		if uint32(len(out)) > s.msize.Load() {
			t.Fatalf("forwarded %d bytes over msize %d", len(out), s.msize.Load())
		}
		fixed := 8
		if typ == proto.Tauth {
			fixed = 4
		}
		if !bytes.Equal(out[headerSize:headerSize+fixed], body[:fixed]) {
			t.Fatal("fids changed")
		}
		uname, rest, ok := str(out[headerSize+fixed:])
		wantUname, _, _ := str(body[fixed:])
		if !ok || !bytes.Equal(uname, wantUname) {
			t.Fatalf("uname %q, want %q", uname, wantUname)
		}
		aname, rest, ok := str(rest)
		if !ok || string(aname) != "the-token" || len(rest) != 0 {
			t.Fatalf("aname %q (ok %v), %d bytes after", aname, ok, len(rest))
		}
	})
}

// FuzzReadFrame reads any stream: every frame returned is whole and
// within the limit, and nothing panics.
func FuzzReadFrame(f *testing.F) {
	f.Add(append(tversion(8192), tattach(1, "u", "a")...))
	f.Add([]byte{3, 0, 0, 0})
	f.Add([]byte{255, 255, 255, 255, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		for {
			frame, err := readFrame(br, buf, func() uint32 { return 512 })
			if err != nil {
				return
			}
			if len(frame) < headerSize || len(frame) > 512 || int(binary.LittleEndian.Uint32(frame)) != len(frame) {
				t.Fatalf("frame of %d bytes", len(frame))
			}
			buf = frame
		}
	})
}

func nopDial(context.Context) (net.Conn, error) { return nil, io.EOF }
