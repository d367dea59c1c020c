package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/p9"
)

// BenchmarkSessionOwner prices the owner check on a call: the same call
// of a sandboxed no-op tool, in a session of one's own, as admin (whom
// the check lets through at once, as every call went before sessions had
// owners) and as a call-role token (its session's owner looked up on
// every call), side by side in rounds.
func BenchmarkSessionOwner(b *testing.B) {
	root := b.TempDir()
	tools := filepath.Join(root, "tools")
	os.MkdirAll(tools, 0o755)
	writeTool(b, tools, "nop", `{"description":"nop"}`, nopScript)
	n := startNode(b, filepath.Join(root, "data"), tools, "")
	admin := mount(b, n.P9Addr())
	waitFor(b, "nop published", 10*time.Second, func() bool { return strings.Contains(readFile(b, admin, "t/idx"), "nop") })
	secret, err := n.NewToken(p9.Principal{Name: "bench"}, "alice", p9.RoleCall, nil)
	if err != nil {
		b.Fatal(err)
	}
	fids := map[string]*client.Fid{}
	for _, who := range []struct{ name, aname string }{{"admin", ""}, {"owner_checked", secret}} {
		fs, err := mountAs(b, n.P9Addr(), who.aname)
		if err != nil {
			b.Fatal(err)
		}
		s := "s-" + who.name
		mustAsk(b, fs, "session/new", "name="+s)
		mustAsk(b, fs, "session/"+s+"/agent/new", "name=a")
		mustAsk(b, fs, "session/"+s+"/agent/a/tools", "nop")
		fid, err := fs.Open("session/"+s+"/agent/a/call", plan9.ORDWR)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { fid.Close() })
		fids[who.name] = fid
	}
	for round := range 3 {
		for _, who := range []string{"admin", "owner_checked"} {
			b.Run(fmt.Sprintf("%s/round=%d", who, round), func(b *testing.B) {
				callLoop(b, fids[who], "nop")
			})
		}
	}
}
