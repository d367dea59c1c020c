package p9

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"9fans.net/go/plan9"
)

// fuzzSeeds are streams a client could send after Tversion: whole
// sessions, and the broken frames the server must survive.
func fuzzSeeds(t testing.TB) [][]byte {
	msg := func(fs ...*plan9.Fcall) []byte {
		var out []byte
		for _, f := range fs {
			out = append(out, mustBytes(t, f)...)
		}
		return out
	}
	attach := &plan9.Fcall{Type: plan9.Tattach, Tag: 1, Fid: 0, Afid: plan9.NOFID, Uname: "u"}
	walk := func(fid uint32, names ...string) *plan9.Fcall {
		return &plan9.Fcall{Type: plan9.Twalk, Tag: 2, Fid: 0, Newfid: fid, Wname: names}
	}
	open := func(fid uint32, mode uint8) *plan9.Fcall {
		return &plan9.Fcall{Type: plan9.Topen, Tag: 3, Fid: fid, Mode: mode}
	}
	read := func(tag uint16, fid uint32, off uint64) *plan9.Fcall {
		return &plan9.Fcall{Type: plan9.Tread, Tag: tag, Fid: fid, Offset: off, Count: 4000}
	}
	write := func(tag uint16, fid uint32, data string) *plan9.Fcall {
		return &plan9.Fcall{Type: plan9.Twrite, Tag: tag, Fid: fid, Data: []byte(data)}
	}
	null := new(plan9.Dir)
	null.Null()
	nullStat, _ := null.Bytes()
	return [][]byte{
		msg(attach, walk(1, "node"), open(1, plan9.OREAD), read(4, 1, 0), read(5, 1, 3)),
		msg(attach, walk(1, "session", "s1", "agent", "a1"), open(1, plan9.OREAD), read(4, 1, 0), read(4, 1, 50)),
		msg(attach, walk(1, "session", "s1", "agent", "a1", "call"), open(1, plan9.ORDWR), write(4, 1, `echo {"a":`), write(5, 1, "1}"), read(6, 1, 0)),
		msg(attach, walk(1, "session", "s1", "agent", "a1", "call"), open(1, plan9.ORDWR), write(4, 1, "block"),
			&plan9.Fcall{Type: plan9.Tflush, Tag: 5, Oldtag: 4}),
		msg(attach, walk(1, "events"), open(1, plan9.OREAD), read(4, 1, 0), &plan9.Fcall{Type: plan9.Tflush, Tag: 5, Oldtag: 4}),
		msg(attach, walk(1, "session", "new"), open(1, plan9.ORDWR), write(4, 1, "name=x agent=coder"), read(5, 1, 0)),
		msg(attach, walk(1, "session", "s1", "agent", "a1", "ctl"), open(1, plan9.ORDWR), write(4, 1, "tools_all\nkill\n"), read(5, 1, 0)),
		msg(attach, walk(1, "tools"), &plan9.Fcall{Type: plan9.Twstat, Tag: 4, Fid: 1, Stat: nullStat}, &plan9.Fcall{Type: plan9.Tremove, Tag: 5, Fid: 1}),
		msg(attach, &plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 300, Version: "9P2000"}, attach, read(1, 0, 0)),
		msg(attach, walk(0, ".."), walk(0, "t", "echo"), &plan9.Fcall{Type: plan9.Tclunk, Tag: 1, Fid: 0}),
		msg(attach, walk(1, "t"), &plan9.Fcall{Type: plan9.Tcreate, Tag: 4, Fid: 1, Name: "f.meta", Perm: 0o644, Mode: plan9.ORDWR},
			write(5, 1, `{"description":`), write(6, 1, `"x"}`), read(7, 1, 0), &plan9.Fcall{Type: plan9.Tclunk, Tag: 8, Fid: 1}),
		msg(attach, walk(1, "t"), &plan9.Fcall{Type: plan9.Tcreate, Tag: 4, Fid: 1, Name: "f", Perm: 0o700, Mode: plan9.OWRITE},
			write(5, 1, "#!/bin/sh\n"), &plan9.Fcall{Type: plan9.Twstat, Tag: 6, Fid: 1, Stat: nullStat}, &plan9.Fcall{Type: plan9.Tclunk, Tag: 7, Fid: 1},
			walk(2, "t", "f"), &plan9.Fcall{Type: plan9.Tremove, Tag: 8, Fid: 2}),
		{0, 0, 0, 0},
		{6, 0, 0, 0, plan9.Tread, 0},
		{0xff, 0xff, 0xff, 0xff},
		frame(plan9.Rread, 1, 1, 0, 0, 0, 'x'),
		frame(plan9.Twrite, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff),
		frame(plan9.Twalk, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff),
		frame(plan9.Twstat, 1, 0, 0, 0, 0, 0xff, 0xff),
		append(frame(plan9.Tclunk, 1, 0, 0, 0, 0), 0xde, 0xad),
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
	}
}

// FuzzFrame feeds arbitrary bytes as one connection's stream after a valid
// Tversion. The server must not panic or hang, and must go on serving a
// second connection.
func FuzzFrame(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	_, addr := startServer(f, newFake(), Options{EventWait: 20 * time.Millisecond, Logf: func(string, ...any) {}})
	f.Fuzz(func(t *testing.T, stream []byte) {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(nc)
		v, _ := (&plan9.Fcall{Type: plan9.Tversion, Tag: plan9.NOTAG, Msize: 8192, Version: "9P2000"}).Bytes()
		if _, err := nc.Write(v); err != nil {
			t.Fatal(err)
		}
		if rx, err := plan9.ReadFcall(br); err != nil || rx.Type != plan9.Rversion {
			t.Fatalf("version: %v, %v", rx, err)
		}
		// Send the stream while draining replies, then half-close: the
		// server must answer what it can and close the connection.
		go func() {
			nc.Write(stream)
			nc.(*net.TCPConn).CloseWrite()
		}()
		_, err = io.Copy(io.Discard, br)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection still open 10s after the stream ended")
		}

		// A second connection is served.
		r := dialRaw(t, addr)
		r.handshake()
		r.stillServes()
	})
}
