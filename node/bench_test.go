package node

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"9fans.net/go/plan9"
)

// A trivial tool called through 9P (write "NAME {}" and read the answer on
// an open call fid, sandbox on) against exec'ing the same executable
// directly with the same stdin. The difference is what the node adds.
const nopScript = "#!/bin/sh\nexec cat\n"

func benchTools(b *testing.B) (tools string) {
	tools = filepath.Join(b.TempDir(), "tools")
	os.MkdirAll(tools, 0o755)
	writeTool(b, tools, "nop", `{"description":"echo stdin"}`, nopScript)
	return tools
}

func BenchmarkCallThrough9P(b *testing.B) {
	tools := benchTools(b)
	n := startNode(b, filepath.Join(b.TempDir(), "data"), tools, "")
	fsys := mount(b, n.P9Addr())
	mustAsk(b, fsys, "session/new", "name=bench")
	mustAsk(b, fsys, "session/bench/agent/new", "name=a")
	mustAsk(b, fsys, "session/bench/agent/a/tools", "nop")
	fid, err := fsys.Open("session/bench/agent/a/call", plan9.ORDWR)
	if err != nil {
		b.Fatal(err)
	}
	defer fid.Close()
	req := []byte(`nop {"x":1}`)
	buf := make([]byte, 256)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := fid.WriteAt(req, 0); err != nil {
			b.Fatal(err)
		}
		k, err := fid.ReadAt(buf, 0)
		if (err != nil && err != io.EOF) || !bytes.Equal(buf[:k], []byte(`{"x":1}`)) {
			b.Fatalf("call answered %q, %v", buf[:k], err)
		}
	}
}

func BenchmarkExecDirect(b *testing.B) {
	tools := benchTools(b)
	exe := filepath.Join(tools, "nop")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(exe)
		cmd.Stdin = bytes.NewReader([]byte(`{"x":1}`))
		out, err := cmd.Output()
		if err != nil || string(out) != `{"x":1}` {
			b.Fatalf("exec answered %q, %v", out, err)
		}
	}
}
