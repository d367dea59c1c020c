//go:build linux

// End-to-end tests of where a call runs and of publishing through t/ and
// a/: three real toolnode processes per test on loopback, sandbox on,
// hosts made different by their environment (a variable set on one, a
// binary on the PATH of one), driven over 9P by the 9fans client.
//
// Every helper of this file starts with rt, to keep clear of the other
// end-to-end files of this package.

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"github.com/toolnode/toolnode/internal/testcluster"
	"github.com/toolnode/toolnode/internal/testport"
)

// rtHostKeys are the variables that make the test's hosts differ; a node
// gets them only from its rtSpec, never from the test's own environment.
var rtHostKeys = []string{"SITE_B", "SLOWHOST"}

// rtFile is a file of a node's tools directory.
type rtFile struct {
	data string
	mode os.FileMode
}

// rtSpec describes one node of a test cluster.
type rtSpec struct {
	name  string
	flags []string          // extra flags
	env   []string          // KEY=VALUE, added to or replacing the child environment
	tools map[string]rtFile // its tools directory
}

// rtNode is one running node of a test cluster.
type rtNode struct {
	rtSpec
	e *env
	p *proc
}

// rtEnviron is the node's environment: the test's (without an env file,
// see childEnv), less the host-making variables, plus its own.
func rtEnviron(n *rtNode) []string {
	drop := slices.Clone(rtHostKeys)
	for _, kv := range n.env {
		k, _, _ := strings.Cut(kv, "=")
		drop = append(drop, k)
	}
	out := slices.DeleteFunc(n.e.childEnv(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(drop, k)
	})
	return append(out, n.env...)
}

// rtLaunch starts the node's process (joining join when it is not empty)
// without waiting for it.
func rtLaunch(t *testing.T, n *rtNode, join string) {
	t.Helper()
	extra := n.flags
	if join != "" {
		extra = append([]string{"-join", join}, n.flags...)
	}
	n.p = n.e.spawn(t, n.name, withClusterKey(rtEnviron(n), extra), extra...)
}

// rtWaitUp waits until the node's 9P port answers.
func rtWaitUp(t *testing.T, n *rtNode) {
	t.Helper()
	rtPoll(t, 60*time.Second, "the 9P port of node "+n.name+" answers", func() (bool, string) {
		select {
		case <-n.p.done:
			t.Fatalf("node %s exited while starting (%v); log:\n%s", n.name, n.p.waitErr, n.p.log.String())
		default:
		}
		c, err := dial9(n.e.p9, 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		c.close()
		return true, ""
	})
}

// rtKill SIGKILLs the node and waits for its process to be gone.
func rtKill(t *testing.T, n *rtNode) {
	t.Helper()
	if err := n.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("node %s still runs 10s after SIGKILL", n.name)
	}
}

// rtCluster starts one node per spec, the first bootstrapping and the
// others joining it, and waits until each is alive and a Raft voter. The
// nodes share one working directory for the test's sessions: rtShared.
func rtCluster(t *testing.T, specs ...rtSpec) []*rtNode {
	t.Helper()
	root := t.TempDir()
	shared := filepath.Join(root, "shared")
	ports := testport.Pick(t, 3*len(specs))
	var nodes []*rtNode
	for i, s := range specs {
		dir := filepath.Join(root, s.name)
		e := &env{
			root: dir, data: filepath.Join(dir, "data"), tools: filepath.Join(dir, "tools"),
			agents: filepath.Join(dir, "agents"), config: filepath.Join(dir, "config"), cwd: shared,
			p9: ports[3*i], gossip: ports[3*i+1], cluster: ports[3*i+2],
		}
		for _, d := range []string{e.tools, e.agents, e.config, shared} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, f := range s.tools {
			if err := os.WriteFile(filepath.Join(e.tools, name), []byte(f.data), f.mode); err != nil {
				t.Fatal(err)
			}
		}
		nodes = append(nodes, &rtNode{rtSpec: s, e: e})
	}
	start := time.Now()
	rtLaunch(t, nodes[0], "")
	rtWaitUp(t, nodes[0])
	for _, n := range nodes[1:] {
		rtLaunch(t, n, nodes[0].e.gossip)
	}
	for _, n := range nodes[1:] {
		rtWaitUp(t, n)
	}
	fsys := attach9(t, nodes[0].e.p9)
	rtPoll(t, 60*time.Second, "every node alive and a Raft voter", func() (bool, string) {
		m, err := readErr(fsys, "cluster/members")
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if !slices.ContainsFunc(lines(m), func(l string) bool {
				f := strings.Fields(l)
				return len(f) == 5 && f[0] == n.name && f[2] == "alive" && (f[3] == "leader" || f[3] == "voter")
			}) {
				return false, m
			}
		}
		return true, m
	})
	fsys.Close()
	t.Logf("%d nodes up, alive and in Raft after %v", len(nodes), time.Since(start).Round(time.Millisecond))
	return nodes
}

// rtShared is the working directory the cluster's sessions share.
func rtShared(n *rtNode) string { return n.e.cwd }

// rtPoll calls cond until it holds, every 50 ms, for at most d; cond's
// string says what it saw, for the failure message. It returns how long
// it took.
func rtPoll(t testing.TB, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return testcluster.Until(t, d, what, cond)
}

// rtWhere asks cluster/where for the nodes that can run tool.
func rtWhere(fsys *client.Fsys, tool string) ([]string, error) {
	s, err := ask(fsys, "cluster/where", tool)
	if err != nil {
		return nil, err
	}
	out := strings.Fields(s)
	slices.Sort(out)
	return out, nil
}

// rtWaitWhere polls cluster/where on fsys until it names exactly nodes.
func rtWaitWhere(t *testing.T, fsys *client.Fsys, tool string, nodes ...string) time.Duration {
	t.Helper()
	slices.Sort(nodes)
	return rtPoll(t, 30*time.Second, fmt.Sprintf("cluster/where %s names %q", tool, nodes), func() (bool, string) {
		got, err := rtWhere(fsys, tool)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, nodes), fmt.Sprintf("%q", got)
	})
}

// rtAgent makes session S (cwd: the shared directory) with agent w
// through fsys, loads tools, and returns the agent's path.
func rtAgent(t *testing.T, fsys *client.Fsys, cwd, session string, tools ...string) string {
	t.Helper()
	if got := mustAsk(t, fsys, "session/new", "name="+session+" cwd="+cwd); got != session+"\n" {
		t.Fatalf("session/new %s = %q", session, got)
	}
	agent := "session/" + session + "/agent/"
	if got := mustAsk(t, fsys, agent+"new", "name=w"); got != "w\n" {
		t.Fatalf("agent/new w = %q", got)
	}
	agent += "w/"
	if len(tools) > 0 {
		mustAsk(t, fsys, agent+"tools", strings.Join(tools, "\n"))
	}
	return agent
}

// rtCall makes a call through agent and says how long it took.
func rtCall(fsys *client.Fsys, agent, req string) (string, time.Duration, error) {
	start := time.Now()
	out, err := ask(fsys, agent+"call", req)
	return out, time.Since(start), err
}

// rtCallWithin makes a call, and fails the test when it has no answer
// within d: a call never hangs.
func rtCallWithin(t *testing.T, fsys *client.Fsys, agent, req string, d time.Duration) (string, time.Duration, error) {
	t.Helper()
	type answer struct {
		out  string
		took time.Duration
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		out, took, err := rtCall(fsys, agent, req)
		ch <- answer{out, took, err}
	}()
	select {
	case a := <-ch:
		return a.out, a.took, a.err
	case <-time.After(d):
		t.Fatalf("call %q through %s: no answer within %v", req, agent, d)
		return "", 0, nil
	}
}

// rtMustCall makes a call that must answer want.
func rtMustCall(t *testing.T, fsys *client.Fsys, agent, req, want, via string) {
	t.Helper()
	out, took, err := rtCallWithin(t, fsys, agent, req, 45*time.Second)
	if err != nil {
		t.Fatalf("call %q via %s: %v", req, via, err)
	}
	if out != want {
		t.Fatalf("call %q via %s = %q, want %q", req, via, out, want)
	}
	t.Logf("call %q via %s: %q in %v", req, via, out, took.Round(time.Millisecond))
}

// rtIdxHas reports whether a t/idx text has a line for tool.
func rtIdxHas(idx, tool string) bool {
	return slices.ContainsFunc(lines(idx), func(l string) bool { return strings.HasPrefix(l, tool+"\t") })
}

// rtJSON encodes v as a .meta or profile file.
func rtJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// rtPut creates path through fsys with perm, writes data and closes the
// fid (where t/ and a/ publish); the error is the first of the three.
func rtPut(fsys *client.Fsys, path string, perm plan9.Perm, data string) error {
	fid, err := fsys.Create(path, plan9.OWRITE, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := fid.WriteAt([]byte(data), 0); err != nil {
		fid.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fid.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// rtHasFileWith reports whether a file under dir holds exactly data, and
// whether it is executable.
func rtHasFileWith(dir, data string) (found, executable bool) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Size() != int64(len(data)) {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && string(b) == data {
			found, executable = true, fi.Mode()&0o111 != 0
		}
		return nil
	})
	return found, executable
}

// ---- 1, 2 and 5: routing by the host's environment, a capable host killed, t/ as a tools directory

const rtFrobnicate = "#!/bin/sh\necho \"frobnicated on $TOOLNODE_NODE\"\n"

const rtBScript = "#!/bin/sh\necho \"script on $TOOLNODE_NODE\"\n"

// rtFrobPrompt is the prompt of needs_frob's variant, which only bravo's
// host matches.
const rtFrobPrompt = "## needs_frob\n\nFrobnicates with the frobnicate binary of a host that has it (the variant's prompt)."

func rtRouteTools(t *testing.T) map[string]rtFile {
	return map[string]rtFile{
		"only_b.meta": {rtJSON(t, map[string]any{
			"description": "Runs where SITE_B is set.",
			"variants":    []any{map[string]any{"match": map[string]any{"env": "SITE_B"}, "cmd": "echo ran on $TOOLNODE_NODE"}},
		}), 0o644},
		"needs_frob.meta": {rtJSON(t, map[string]any{
			"description": "Frobnicates.",
			"prompt":      "## needs_frob\n\nThe top-level prompt, for no host.",
			"variants":    []any{map[string]any{"match": map[string]any{"binary": "frobnicate"}, "cmd": "frobnicate", "prompt": rtFrobPrompt}},
		}), 0o644},
		"everywhere.meta": {rtJSON(t, map[string]any{
			"description": "Runs on any host.",
			"cmd":         "echo $TOOLNODE_NODE",
		}), 0o644},
		// An executable that only SITE_B hosts run: published by alpha,
		// which cannot run it.
		"b_script": {rtBScript, 0o755},
		"b_script.meta": {rtJSON(t, map[string]any{
			"description": "A script for SITE_B hosts.",
			"variants":    []any{map[string]any{"match": map[string]any{"env": "SITE_B"}}},
		}), 0o644},
	}
}

// TestRouteByEnvironment: alpha publishes tools; bravo alone has SITE_B
// and frobnicate; charlie has neither.
func TestRouteByEnvironment(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "frobnicate"), []byte(rtFrobnicate), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("frobnicate"); err == nil {
		t.Fatal("frobnicate is on the test's own PATH; the test needs a host without it")
	}
	timeout := []string{"-call-timeout", "5s"}
	nodes := rtCluster(t,
		rtSpec{name: "alpha", flags: timeout, tools: rtRouteTools(t)},
		rtSpec{name: "bravo", flags: timeout, env: []string{"SITE_B=1", "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}},
		rtSpec{name: "charlie", flags: timeout},
	)
	a, b, c := nodes[0], nodes[1], nodes[2]
	fa, fb, fc := attach9(t, a.e.p9), attach9(t, b.e.p9), attach9(t, c.e.p9)
	took := rtWaitWhere(t, fa, "only_b", "bravo")
	rtWaitWhere(t, fa, "needs_frob", "bravo")
	rtWaitWhere(t, fa, "b_script", "bravo")
	rtWaitWhere(t, fa, "everywhere", "alpha", "bravo", "charlie")
	rtWaitWhere(t, fc, "only_b", "bravo")
	t.Logf("bravo's capabilities reached alpha %v after the cluster formed", took.Round(time.Millisecond))

	var agentA string
	t.Run("routing", func(t *testing.T) {
		agentA = rtAgent(t, fa, rtShared(a), "viaalpha", "only_b", "needs_frob", "everywhere", "b_script")
		for range 3 {
			rtMustCall(t, fa, agentA, "only_b", "ran on bravo\n", "alpha")
		}
		rtMustCall(t, fa, agentA, "needs_frob", "frobnicated on bravo\n", "alpha")
		rtMustCall(t, fa, agentA, "b_script", "script on bravo\n", "alpha")
		for range 3 { // a tool alpha can run never leaves it
			rtMustCall(t, fa, agentA, "everywhere", "alpha\n", "alpha")
		}
		agentC := rtAgent(t, fc, rtShared(c), "viacharlie", "only_b", "everywhere")
		for range 3 {
			rtMustCall(t, fc, agentC, "everywhere", "charlie\n", "charlie")
		}
		rtMustCall(t, fc, agentC, "only_b", "ran on bravo\n", "charlie")

		// t/idx is what this host can run.
		idxA, idxB, idxC := cat(t, fa, "t/idx"), cat(t, fb, "t/idx"), cat(t, fc, "t/idx")
		for _, tool := range []string{"only_b", "needs_frob", "b_script"} {
			if rtIdxHas(idxA, tool) || rtIdxHas(idxC, tool) {
				t.Errorf("t/idx of alpha or charlie lists %s, which only bravo can run:\nalpha:\n%s\ncharlie:\n%s", tool, idxA, idxC)
			}
			if !rtIdxHas(idxB, tool) {
				t.Errorf("t/idx of bravo does not list %s:\n%s", tool, idxB)
			}
		}
		if l := "only_b\tRuns where SITE_B is set."; !slices.Contains(lines(idxB), l) {
			t.Errorf("t/idx of bravo has no line %q:\n%s", l, idxB)
		}
		for name, idx := range map[string]string{"alpha": idxA, "bravo": idxB, "charlie": idxC} {
			if !slices.Contains(lines(idx), "everywhere\tRuns on any host.") {
				t.Errorf("t/idx of %s does not list everywhere:\n%s", name, idx)
			}
		}

		// tools_all names the capable nodes.
		all := mustAsk(t, fa, agentA+"ctl", "tools_all")
		if !slices.ContainsFunc(lines(all), func(l string) bool {
			f := strings.Split(l, "\t")
			return len(f) == 3 && f[0] == "only_b" && strings.TrimSpace(f[2]) == "bravo"
		}) {
			t.Errorf("tools_all on alpha has no line only_b<TAB>...<TAB>bravo:\n%s", all)
		}

		// The preamble on alpha documents needs_frob as bravo runs it.
		pre := cat(t, fa, agentA+"preamble")
		if !strings.Contains(pre, rtFrobPrompt) {
			t.Errorf("preamble on alpha has not bravo's variant prompt of needs_frob:\n%s", pre)
		}
		if strings.Contains(pre, "The top-level prompt") {
			t.Errorf("preamble on alpha has needs_frob's top-level prompt, not the variant's:\n%s", pre)
		}
	})

	// t/ of any node is a tools directory: every published tool as
	// NAME.meta, with NAME (executable) when it has an executable, even
	// when this host cannot run it.
	t.Run("t_as_tools_dir", func(t *testing.T) {
		fid, err := fa.Open("t", plan9.OREAD)
		if err != nil {
			t.Fatal(err)
		}
		dirs, err := fid.Dirreadall()
		fid.Close()
		if err != nil {
			t.Fatal(err)
		}
		stat := map[string]*plan9.Dir{}
		for _, d := range dirs {
			stat[d.Name] = d
		}
		tools := rtRouteTools(t)
		for name, f := range tools {
			d, ok := stat[name]
			if !ok {
				t.Errorf("ls t on alpha has no %s", name)
				continue
			}
			if d.Mode&plan9.DMDIR != 0 {
				t.Errorf("t/%s is a directory", name)
			}
			if got := cat(t, fa, "t/"+name); got != f.data {
				t.Errorf("t/%s = %q, want %q", name, got, f.data)
			}
			if strings.HasSuffix(name, ".meta") {
				if exe := strings.TrimSuffix(name, ".meta"); tools[exe].data == "" {
					if _, ok := stat[exe]; ok {
						t.Errorf("ls t lists %s, a tool without an executable", exe)
					}
				}
			} else if d.Mode&0o111 == 0 {
				t.Errorf("t/%s has mode %v, want an execute bit", name, d.Mode)
			}
		}
		for name := range stat {
			if _, ok := tools[name]; !ok && name != "idx" {
				t.Errorf("ls t on alpha lists %s, which nobody published", name)
			}
		}
	})

	// SIGKILL bravo: only_b fails at once, and says why once bravo is
	// dead; everywhere still runs.
	t.Run("capable_host_killed", func(t *testing.T) {
		if agentA == "" {
			t.Skip("routing failed before its agent was made")
		}
		killed := time.Now()
		rtKill(t, b)
		var seen []string
		var slowest time.Duration
		const deadMsg = "no live node can run tool"
		rtPoll(t, 40*time.Second, "a call of only_b says "+deadMsg, func() (bool, string) {
			out, took, err := rtCallWithin(t, fa, agentA, "only_b", 15*time.Second)
			slowest = max(slowest, took)
			if took > 5*time.Second {
				t.Errorf("a call of only_b took %v, over the 5s call timeout", took)
			}
			if err == nil {
				t.Fatalf("a call of only_b succeeded with %q after bravo was killed", out)
			}
			if !strings.Contains(err.Error(), "only_b") {
				t.Errorf("the error of only_b does not name the tool: %v", err)
			}
			if !slices.Contains(seen, err.Error()) {
				seen = append(seen, err.Error())
			}
			return strings.Contains(err.Error(), deadMsg), err.Error()
		})
		t.Logf("bravo counted dead %v after SIGKILL; slowest call %v; errors seen:\n%s",
			time.Since(killed).Round(time.Millisecond), slowest.Round(time.Millisecond), strings.Join(seen, "\n"))
		if m := cat(t, fa, "cluster/members"); !slices.ContainsFunc(lines(m), func(l string) bool {
			f := strings.Fields(l)
			return len(f) == 5 && f[0] == "bravo" && f[2] == "dead"
		}) {
			t.Errorf("cluster/members on alpha does not show bravo dead:\n%s", m)
		}
		// Charlie learns it by gossip too (each node's view has its own
		// moment); then the error comes at once.
		agentC := "session/viacharlie/agent/w/"
		lag := rtPoll(t, 15*time.Second, "a call of only_b via charlie says "+deadMsg, func() (bool, string) {
			_, _, err := rtCallWithin(t, fc, agentC, "only_b", 15*time.Second)
			if err == nil {
				t.Fatal("a call of only_b via charlie succeeded after bravo was killed")
			}
			return strings.Contains(err.Error(), deadMsg), err.Error()
		})
		t.Logf("charlie counted bravo dead %v after alpha did", lag.Round(time.Millisecond))
		for _, via := range []struct {
			fsys  *client.Fsys
			agent string
		}{{fa, agentA}, {fc, agentC}} {
			_, took, err := rtCallWithin(t, via.fsys, via.agent, "only_b", 15*time.Second)
			if err == nil || !strings.Contains(err.Error(), deadMsg) {
				t.Errorf("only_b through %s: %v, want %q", via.agent, err, deadMsg)
			} else if took > time.Second {
				t.Errorf("only_b with no capable node took %v, want an error at once", took)
			}
		}
		rtMustCall(t, fa, agentA, "everywhere", "alpha\n", "alpha")
		rtMustCall(t, fc, agentC, "everywhere", "charlie\n", "charlie")
		if w, err := rtWhere(fa, "only_b"); err == nil && len(w) > 0 {
			t.Errorf("cluster/where only_b = %q after bravo died, want no node", w)
		}
	})
}

// ---- 3: the runner killed mid-call

// rtSlowCmd sleeps 20 s after leaving a marker NODE PID in the session's
// cwd, unless its arguments hold "fast"; then it names its node.
const rtSlowCmd = `a=$(cat); case "$a" in *fast*) echo "$TOOLNODE_NODE" ;; *) echo "$TOOLNODE_NODE $$" > "started-$TOOLNODE_NODE"; exec sleep 20 ;; esac`

func TestRouteRunnerKilledMidCall(t *testing.T) {
	t.Parallel()
	slow := rtJSON(t, map[string]any{
		"description": "Sleeps on a slow host.",
		"variants":    []any{map[string]any{"match": map[string]any{"env": "SLOWHOST"}, "cmd": rtSlowCmd}},
	})
	nodes := rtCluster(t,
		rtSpec{name: "alpha", tools: map[string]rtFile{"slow.meta": {slow, 0o644}}},
		rtSpec{name: "bravo", env: []string{"SLOWHOST=1"}},
		rtSpec{name: "charlie", env: []string{"SLOWHOST=1"}},
	)
	a := nodes[0]
	byName := map[string]*rtNode{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	fa := attach9(t, a.e.p9)
	rtWaitWhere(t, fa, "slow", "bravo", "charlie")
	shared := rtShared(a)
	agent := rtAgent(t, fa, shared, "inflight", "slow")

	// Taking turns: both capable nodes run it.
	ran := map[string]int{}
	for range 4 {
		out, _, err := rtCallWithin(t, fa, agent, `slow {"fast":true}`, 45*time.Second)
		if err != nil {
			t.Fatalf("fast call of slow: %v", err)
		}
		ran[strings.TrimSpace(out)]++
	}
	if len(ran) != 2 || ran["bravo"] == 0 || ran["charlie"] == 0 {
		t.Errorf("4 calls of slow via alpha ran on %v, want both bravo and charlie", ran)
	}

	type result struct {
		out string
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	fcall := attach9(t, a.e.p9)
	go func() {
		out, err := ask(fcall, agent+"call", `slow {}`)
		res <- result{out, err, time.Now()}
	}()

	// Whichever node runs it leaves a marker, then sleeps.
	var victim *rtNode
	var pid int
	rtPoll(t, 20*time.Second, "a node starts the slow call", func() (bool, string) {
		ms, _ := filepath.Glob(filepath.Join(shared, "started-*"))
		if len(ms) == 0 {
			return false, "no marker"
		}
		b, err := os.ReadFile(ms[0])
		f := strings.Fields(string(b))
		if err != nil || len(f) != 2 {
			return false, fmt.Sprintf("marker %q, %v", b, err)
		}
		victim = byName[f[0]]
		pid, err = strconv.Atoi(f[1])
		return victim != nil && err == nil, string(b)
	})
	// The tool's process group is the test's doing: end it, whatever the
	// node's death left behind.
	t.Cleanup(func() {
		if rtAliveSleep(pid) {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	survivor := nodes[1]
	if victim == survivor {
		survivor = nodes[2]
	}
	killed := time.Now()
	rtKill(t, victim)
	select {
	case r := <-res:
		took := r.at.Sub(killed)
		t.Logf("the call failed %v after its runner %s was killed: %v", took.Round(time.Millisecond), victim.name, r.err)
		if r.err == nil {
			t.Fatalf("the call whose runner was killed answered %q, want an error", r.out)
		}
		if took > 10*time.Second {
			t.Errorf("the call failed %v after its runner died, want under 10s", took)
		}
		for _, s := range []string{victim.name, "slow"} {
			if !strings.Contains(r.err.Error(), s) {
				t.Errorf("the error %q does not name %s", r.err, s)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the call still hangs 30s after its runner %s was killed", victim.name)
	}
	// The tool does not outlive its node: the kernel kills it with the
	// thread that started it.
	testcluster.Eventually(t, 5*time.Second, func() bool { return !rtAliveSleep(pid) },
		"the tool's process (pid %d) is gone with its SIGKILLed node", pid)

	// The next calls go to the survivor.
	for range 3 {
		rtMustCall(t, fa, agent, `slow {"fast":true}`, survivor.name+"\n", "alpha")
	}
}

// rtAliveSleep reports whether pid is a running sleep (the slow tool).
func rtAliveSleep(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.HasPrefix(b, []byte("sleep")) {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !bytes.Contains(st, []byte(") Z "))
}

// ---- 4 and 5: publishing through t/ and a/ of one node

const rtHello = "#!/bin/sh\necho \"hello from $TOOLNODE_NODE\"\n"

const rtHelloMeta = `{"description": "Say hello.", "prompt": "## hello\n\nSays hello from the node that runs it."}` + "\n"

func TestRoutePublish(t *testing.T) {
	t.Parallel()
	nodes := rtCluster(t, rtSpec{name: "alpha"}, rtSpec{name: "bravo"}, rtSpec{name: "charlie"})
	a, b, c := nodes[0], nodes[1], nodes[2]
	fa, fb, fc := attach9(t, a.e.p9), attach9(t, b.e.p9), attach9(t, c.e.p9)
	views := map[string]*client.Fsys{"alpha": fa, "bravo": fb}

	// Publish through charlie: the executable, then its metadata.
	start := time.Now()
	if err := rtPut(fc, "t/hello", 0o755, rtHello); err != nil {
		t.Fatal(err)
	}
	if err := rtPut(fc, "t/hello.meta", 0o644, rtHelloMeta); err != nil {
		t.Fatal(err)
	}
	if got := cat(t, fc, "t/hello.meta"); got != rtHelloMeta {
		t.Errorf("t/hello.meta on charlie = %q, want what was written", got)
	}
	if got := cat(t, fc, "t/idx"); !slices.Contains(lines(got), "hello\tSay hello.") {
		t.Errorf("t/idx on charlie, right after publishing, has no hello:\n%s", got)
	}

	// An invalid rewrite fails on the write and changes nothing.
	fid, err := fc.Open("t/hello.meta", plan9.OWRITE|plan9.OTRUNC)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := fid.WriteAt([]byte(`{"description": 5}`), 0)
	cerr := fid.Close()
	if werr == nil {
		t.Errorf("writing invalid metadata to t/hello.meta succeeded (close: %v), want an error on the write", cerr)
	} else {
		t.Logf("invalid t/hello.meta refused: %v", werr)
		if !strings.Contains(werr.Error(), "description") {
			t.Errorf("the error %q does not name the bad field", werr)
		}
	}
	if got := cat(t, fc, "t/hello.meta"); got != rtHelloMeta {
		t.Errorf("t/hello.meta on charlie after an invalid write = %q, want the valid version", got)
	}

	// Everywhere soon.
	for name, f := range views {
		rtPoll(t, 10*time.Second, "hello in t/idx of "+name, func() (bool, string) {
			idx := cat(t, f, "t/idx")
			return slices.Contains(lines(idx), "hello\tSay hello."), idx
		})
		t.Logf("hello reached t/idx of %s %v after the publishing began", name, time.Since(start).Round(time.Millisecond))
		if got := cat(t, f, "t/hello"); got != rtHello {
			t.Errorf("t/hello on %s = %q, want the script", name, got)
		}
		if got := cat(t, f, "t/hello.meta"); got != rtHelloMeta {
			t.Errorf("t/hello.meta on %s = %q, want the valid version", name, got)
		}
		d, err := f.Stat("t/hello")
		if err != nil {
			t.Fatal(err)
		}
		if d.Mode&0o777 != 0o755 {
			t.Errorf("t/hello on %s has mode %v, want the create mode 0755", name, d.Mode)
		}
	}
	// A mount of t/ shows the tool to an agent's host.
	if ls := lsDir(t, fa, "t"); !slices.Contains(ls, "hello") || !slices.Contains(ls, "hello.meta") {
		t.Errorf("ls t on alpha = %q, want hello and hello.meta", ls)
	}

	// Materialised in every node's data directory.
	for _, n := range nodes {
		rtPoll(t, 10*time.Second, "hello materialised in the data directory of "+n.name, func() (bool, string) {
			found, exe := rtHasFileWith(n.e.data, rtHello)
			return found && exe, fmt.Sprintf("found %v, executable %v", found, exe)
		})
	}

	// A profile through a/, and a session made with it.
	profile := rtJSON(t, map[string]any{"description": "Says hello.", "autoLoad": []string{"hello"}})
	if err := rtPut(fc, "a/p.json", 0o644, profile); err != nil {
		t.Fatal(err)
	}
	rtPoll(t, 10*time.Second, "a/p.json on alpha", func() (bool, string) {
		got, err := readErr(fa, "a/p.json")
		return err == nil && got == profile, fmt.Sprintf("%q, %v", got, err)
	})
	if got := mustAsk(t, fa, "session/new", "name=ps agent=p cwd="+rtShared(a)); got != "ps\n" {
		t.Fatalf("session/new agent=p = %q", got)
	}
	agent := "session/ps/agent/p/"
	if got := cat(t, fa, agent+"toolsrv.loaded"); got != "hello\n" {
		t.Errorf("agent p's loaded tools = %q, want hello (its profile's autoLoad)", got)
	}

	// The publisher gone, the tool runs on alpha.
	rtKill(t, c)
	rtMustCall(t, fa, agent, "hello", "hello from alpha\n", "alpha")

	// rm t/hello.meta through alpha withdraws it everywhere. (Charlie was
	// killed: a write may wait for a leader.)
	var rmErr error
	rtPoll(t, 30*time.Second, "rm t/hello.meta through alpha", func() (bool, string) {
		err := fa.Remove("t/hello.meta")
		if err != nil && rmErr != nil && strings.Contains(err.Error(), "no tool") {
			return true, "" // a retry after an answer lost in an election
		}
		rmErr = err
		return err == nil, fmt.Sprint(err)
	})
	start = time.Now()
	for name, f := range views {
		rtPoll(t, 10*time.Second, "hello withdrawn on "+name, func() (bool, string) {
			idx := cat(t, f, "t/idx")
			_, err := readErr(f, "t/hello.meta")
			return !rtIdxHas(idx, "hello") && err != nil, idx
		})
		if ls := lsDir(t, f, "t"); slices.Contains(ls, "hello.meta") || slices.Contains(ls, "hello") {
			t.Errorf("ls t on %s after rm = %q", name, ls)
		}
	}
	t.Logf("hello withdrawn from alpha and bravo %v after rm", time.Since(start).Round(time.Millisecond))
	if out, _, err := rtCallWithin(t, fa, agent, "hello", 45*time.Second); err == nil {
		t.Errorf("a call of withdrawn hello answered %q, want an error", out)
	} else {
		t.Logf("a call of withdrawn hello: %v", err)
	}
}
