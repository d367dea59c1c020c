//go:build linux

package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// anameRecorder is a 9P server that answers Tversion, and every Tattach
// with an Rerror after noting its aname.
type anameRecorder struct {
	ln     net.Listener
	mu     sync.Mutex
	anames []string
}

func newAnameRecorder(t *testing.T) *anameRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &anameRecorder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(c)
		}
	}()
	return r
}

func (r *anameRecorder) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		var hdr [7]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		body := make([]byte, binary.LittleEndian.Uint32(hdr[:])-7)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		var out []byte
		typ := hdr[4] + 1
		switch hdr[4] {
		case 100: // Tversion: msize and version back
			out = body
		case 104: // Tattach: fid afid uname aname
			rest := body[8:]
			n := binary.LittleEndian.Uint16(rest)
			rest = rest[2+n:]
			n = binary.LittleEndian.Uint16(rest)
			r.mu.Lock()
			r.anames = append(r.anames, string(rest[2:2+n]))
			r.mu.Unlock()
			typ, out = 107, []byte{8, 0, 'r', 'e', 'c', 'o', 'r', 'd', 'e', 'd'}
		default:
			return
		}
		msg := binary.LittleEndian.AppendUint32(nil, uint32(7+len(out)))
		msg = append(msg, typ, hdr[5], hdr[6])
		if _, err := c.Write(append(msg, out...)); err != nil {
			return
		}
	}
}

func (r *anameRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.anames) == 0 {
		return "(no attach)"
	}
	return r.anames[len(r.anames)-1]
}

// The client presents -token, else $TOOLNODE_TOKEN, else the admin token
// in the node's data directory (-data, else the default one), as the
// attach name, and nothing without any of them.
func TestClientTokenIsTheAname(t *testing.T) {
	r := newAnameRecorder(t)
	addr := r.ln.Addr().String()
	xdg, other := t.TempDir(), t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	for _, tc := range []struct {
		env, flag, data, want string
		file                  string // the default data dir's admin.token
	}{
		{want: ""},
		{env: "from-env", want: "from-env"},
		{env: "from-env", flag: "from-flag", want: "from-flag"},
		{file: "from-default-data\n", want: "from-default-data"},
		{file: "from-default-data", env: "from-env", want: "from-env"},
		{file: "from-default-data", data: other, want: "from-data"},
	} {
		os.RemoveAll(filepath.Join(xdg, "toolnode"))
		if tc.file != "" {
			os.MkdirAll(filepath.Join(xdg, "toolnode"), 0o700)
			os.WriteFile(filepath.Join(xdg, "toolnode", "admin.token"), []byte(tc.file), 0o600)
		}
		os.WriteFile(filepath.Join(other, "admin.token"), []byte("from-data\n"), 0o600)
		t.Setenv("TOOLNODE_TOKEN", tc.env)
		t.Setenv("TOOLNODE_CA", "")
		c := &creds{token: tc.flag, data: tc.data}
		_, err := c.mount(addr)
		if err == nil || !strings.Contains(err.Error(), "recorded") {
			t.Fatalf("mount: %v, want the recorder's refusal", err)
		}
		if got := r.last(); got != tc.want {
			t.Errorf("env %q, -token %q, -data %q, default file %q: aname %q, want %q", tc.env, tc.flag, tc.data, tc.file, got, tc.want)
		}
	}
}

func TestClientTLSConfig(t *testing.T) {
	t.Setenv("TOOLNODE_CA", "")
	if cfg, err := (&creds{}).tlsConfig("h:1"); cfg != nil || err != nil {
		t.Fatalf("no CA: %v, %v; want plain", cfg, err)
	}
	if _, err := (&creds{serverName: "x"}).tlsConfig("h:1"); err == nil || !strings.Contains(err.Error(), "needs -tls-ca") {
		t.Errorf("-tls-server-name without a CA: %v", err)
	}
	ca := newTestCA(t, "dial test CA")
	t.Setenv("TOOLNODE_CA", ca.file)
	cfg, err := (&creds{}).tlsConfig("node.example:9564")
	if err != nil || cfg == nil || cfg.ServerName != "node.example" || cfg.MinVersion == 0 {
		t.Fatalf("$TOOLNODE_CA: %+v, %v", cfg, err)
	}
	cfg, err = (&creds{serverName: "n1"}).tlsConfig("10.0.0.1:9564")
	if err != nil || cfg.ServerName != "n1" {
		t.Fatalf("-tls-server-name: %v, %v", cfg, err)
	}
	if _, err := (&creds{ca: t.TempDir() + "/none.pem"}).tlsConfig("h:1"); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
