package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/toolnode/toolnode/sandbox"
)

// composeVoters is the -voters every node of the compose file runs with.
func composeVoters(t *testing.T, nodes map[string]node) int {
	t.Helper()
	voters := 0
	for _, s := range sortedNames(nodes) {
		v, err := strconv.Atoi(nodes[s].flags["voters"])
		if err != nil {
			t.Fatalf("service %s: -voters %q: %v", s, nodes[s].flags["voters"], err)
		}
		if voters != 0 && v != voters {
			t.Fatalf("service %s: -voters %d, another node %d: the leader follows its own", s, v, voters)
		}
		voters = v
	}
	return voters
}

// TestComposeVoters checks the quorum: every node keeps the same odd
// number of voters, and there are more nodes than voters, so the others
// are clients; no node asks to be a server beyond them.
func TestComposeVoters(t *testing.T) {
	nodes := loadNodes(t, loadProject(t, nil))
	v := composeVoters(t, nodes)
	if v < 3 || v%2 == 0 {
		t.Errorf("-voters %d: want an odd number, at least 3 (a quorum that survives a node)", v)
	}
	if len(nodes) <= v {
		t.Errorf("%d nodes and -voters %d: want a client beside the voters", len(nodes), v)
	}
	for _, s := range sortedNames(nodes) {
		if sv, ok := nodes[s].flags["servers"]; ok && sv != strconv.Itoa(v) {
			t.Errorf("service %s: -servers %s: more Raft servers than voters", s, sv)
		}
		if _, ok := nodes[s].flags["server"]; ok {
			t.Errorf("service %s: -server", s)
		}
	}
}

// healthWaitProblems finds the waits for a node's health that can never
// end once the cluster stops as a whole (down, then up). A node is
// healthy once a quorum of the voters runs; the voters may be any
// `voters` of the nodes (a voter that leaves hands its place to a live
// node), and a node that waits for Y's health, directly or through
// others, cannot help Y's quorum. So at most (voters-1)/2 nodes may wait
// for any one node's health.
func healthWaitProblems(nodes map[string]node, voters int) []string {
	// waits reports whether x cannot start before y is healthy: a chain
	// of dependencies from x to y of which one is service_healthy.
	var waits func(x, y string, healthy bool, seen map[string]bool) bool
	waits = func(x, y string, healthy bool, seen map[string]bool) bool {
		if seen[x] {
			return false
		}
		seen[x] = true
		defer delete(seen, x)
		for dep, d := range nodes[x].svc.DependsOn {
			if _, ok := nodes[dep]; !ok {
				continue
			}
			h := healthy || d.Condition == types.ServiceConditionHealthy
			if dep == y && h || dep != y && waits(dep, y, h, seen) {
				return true
			}
		}
		return false
	}
	var probs []string
	for _, y := range sortedNames(nodes) {
		var blocked []string
		for _, x := range sortedNames(nodes) {
			if x != y && waits(x, y, false, map[string]bool{}) {
				blocked = append(blocked, x)
			}
		}
		if len(blocked) > (voters-1)/2 {
			probs = append(probs, fmt.Sprintf("%q wait for %s to be healthy, which needs a quorum of %d voters that may include them", blocked, y, voters/2+1))
		}
	}
	return probs
}

// TestComposeHealthWaits checks that `down` then `up` cannot deadlock on
// depends_on: service_healthy, and that a joiner starts with its member.
func TestComposeHealthWaits(t *testing.T) {
	nodes := loadNodes(t, loadProject(t, nil))
	for _, e := range healthWaitProblems(nodes, composeVoters(t, nodes)) {
		t.Error(e)
	}
}

// TestComposeHealthWaitsControl: every joiner waiting for node1 to be
// healthy is the deadlock after `down` and `up` (node1 alone is no
// quorum), and the check says so.
func TestComposeHealthWaitsControl(t *testing.T) {
	nodes := loadNodes(t, loadProject(t, nil))
	for _, s := range sortedNames(nodes) {
		if s != bootstrap {
			n := nodes[s]
			deps := types.DependsOnConfig{}
			for k, v := range n.svc.DependsOn {
				deps[k] = v
			}
			deps[bootstrap] = types.ServiceDependency{Condition: types.ServiceConditionHealthy}
			n.svc.DependsOn = deps
			nodes[s] = n
		}
	}
	got := healthWaitProblems(nodes, composeVoters(t, nodes))
	if !slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, "for "+bootstrap+" to be healthy") }) {
		t.Errorf("every joiner waiting for %s's health: %q", bootstrap, got)
	}
}

// entrypointHealthAddr is the address the entrypoint's health step reads
// when TOOLNODE_HEALTH_ADDR is unset.
func entrypointHealthAddr(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("entrypoint.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$\{TOOLNODE_HEALTH_ADDR:-([0-9.:]+)\}`).FindSubmatch(b)
	if m == nil {
		t.Fatal("entrypoint.sh: no default for TOOLNODE_HEALTH_ADDR")
	}
	return string(m[1])
}

// TestComposeHealthCheck checks that every node's health check is the
// entrypoint's, which reads /readyz on the node's -metrics listener and
// needs no token (only the bootstrap node has an admin token), and that
// -metrics stays on loopback. The image's own HEALTHCHECK does the same
// with the image's default command, and the Dockerfile names no frontend
// to fetch at build time.
func TestComposeHealthCheck(t *testing.T) {
	p := loadProject(t, nil)
	nodes := loadNodes(t, p)
	for _, s := range sortedNames(nodes) {
		n := nodes[s]
		hc := n.svc.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 3 || hc.Test[0] != "CMD" || hc.Test[1] != "toolnode-entrypoint" || hc.Test[2] != "health" {
			t.Errorf("service %s: health check %+v, want [CMD toolnode-entrypoint health ...]", s, hc)
		} else if len(hc.Test) > 3 && hc.Test[3] != "/readyz" {
			t.Errorf("service %s: health check reads %s, want /readyz", s, hc.Test[3])
		}
		m := n.flags["metrics"]
		if host, _, err := net.SplitHostPort(m); err != nil || host != "127.0.0.1" {
			t.Errorf("service %s: -metrics %q, want 127.0.0.1:PORT (the health check's, on loopback)", s, m)
		}
		addr := entrypointHealthAddr(t)
		if v := n.svc.Environment["TOOLNODE_HEALTH_ADDR"]; v != nil {
			addr = *v
		}
		if addr != m {
			t.Errorf("service %s: the health check reads %s, -metrics is %q", s, addr, m)
		}
		if _, ok := n.svc.Environment["TOOLNODE_TOKEN"]; ok {
			t.Errorf("service %s: TOOLNODE_TOKEN in the environment", s)
		}
	}

	df := filepath.Join(repoRoot(t), "Dockerfile")
	raw, err := os.ReadFile(df)
	if err != nil {
		t.Fatal(err)
	}
	if loc := regexp.MustCompile(`(?mi)^#\s*syntax\s*=.*$`).Find(raw); loc != nil {
		t.Errorf("Dockerfile: %q makes the build fetch a frontend image", loc)
	}
	var check, cmd string
	for _, in := range parseDockerfile(t, df) {
		switch in.cmd {
		case "HEALTHCHECK":
			check = in.args
		case "CMD":
			cmd = in.args
		}
	}
	if !strings.Contains(check, `"toolnode-entrypoint", "health"`) {
		t.Errorf("Dockerfile: HEALTHCHECK %q, want the entrypoint's health step", check)
	}
	var args []string
	if err := json.Unmarshal([]byte(cmd), &args); err != nil {
		t.Fatalf("Dockerfile: CMD %q: %v", cmd, err)
	}
	if i := slices.Index(args, "-metrics"); i < 0 || i+1 == len(args) || args[i+1] != entrypointHealthAddr(t) {
		t.Errorf("Dockerfile: CMD %q has no -metrics %s, which the health check reads", args, entrypointHealthAddr(t))
	}
}

// variantEnv is every variable a tool variant of the image matches on
// (deploy/tools and examples/tools).
func variantEnv(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, dir := range []string{"tools", filepath.Join("..", "examples", "tools")} {
		metas, err := filepath.Glob(filepath.Join(dir, "*.meta"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range metas {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				Variants []struct {
					Match map[string]any `json:"match"`
				} `json:"variants"`
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, v := range meta.Variants {
				if e, ok := v.Match["env"].(string); ok && !slices.Contains(names, e) {
					names = append(names, e)
				}
			}
		}
	}
	return names
}

// toolEnvProblems: a node whose environment sets a variable a variant
// matches has the tool, which reads the variable; the sandbox passes it
// only when -tool-env names it (NAME, or PREFIX*), and the node refuses
// to start with a -tool-env it does not allow.
func toolEnvProblems(nodes map[string]node, vars []string) []string {
	var probs []string
	for _, s := range sortedNames(nodes) {
		n := nodes[s]
		passed := strings.Split(n.flags["tool-env"], ",")
		if _, ok := n.flags["tool-env"]; ok {
			if err := sandbox.CheckToolEnv(passed); err != nil {
				probs = append(probs, fmt.Sprintf("service %s: the node would not start: %v", s, err))
			}
		}
		for _, v := range vars {
			if val, ok := n.svc.Environment[v]; !ok || val == nil || *val == "" {
				continue
			}
			if !slices.ContainsFunc(passed, func(p string) bool {
				pre, wild := strings.CutSuffix(p, "*")
				return p == v || wild && strings.HasPrefix(v, pre)
			}) {
				probs = append(probs, fmt.Sprintf("service %s sets %s, but its tools do not get it (-tool-env %q)", s, v, n.flags["tool-env"]))
			}
		}
	}
	return probs
}

// TestComposeToolEnv checks that the node with SITE passes it to
// its tools, so that `site` prints the site; the control drops -tool-env.
func TestComposeToolEnv(t *testing.T) {
	nodes := loadNodes(t, loadProject(t, nil))
	vars := variantEnv(t)
	if !slices.Contains(vars, "SITE") {
		t.Fatalf("no tool variant matches SITE: %q", vars)
	}
	for _, e := range toolEnvProblems(nodes, vars) {
		t.Error(e)
	}
	for s, n := range nodes {
		delete(n.flags, "tool-env")
		nodes[s] = n
	}
	if got := toolEnvProblems(nodes, vars); len(got) == 0 {
		t.Error("control: nodes without -tool-env pass the check")
	}
	// A name the node refuses (its own TOOLNODE_* variables).
	n := nodes["node4"]
	n.flags["tool-env"] = "TOOLNODE_SITE"
	if got := toolEnvProblems(nodes, vars); !slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, "would not start") }) {
		t.Errorf("control: -tool-env TOOLNODE_SITE: %q", got)
	}
}
