package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// bootstrap is the service that starts the cluster; it publishes 9P on the
// host's port 9564.
const (
	bootstrap    = "node1"
	hostP9Port   = "9564"
	jqBuildArg   = "WITH_JQ"
	gossipKeyVar = "TOOLNODE_GOSSIP_KEY"
	// secretsService is the init step that makes the key and certificates;
	// it is not a node.
	secretsService = "secrets"
	caVolume       = "ca"
	secretsDir     = "/etc/toolnode/secrets"
)

// boolFlags are the serve flags that take no value.
var boolFlags = map[string]bool{"yolo": true, "examples": true}

// node is a compose service and the serve flags of its command.
type node struct {
	svc   types.ServiceConfig
	flags map[string]string
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// loadProject loads ../docker-compose.yml from the local file system only
// (no remote resource loaders), with env as the whole environment used for
// interpolation.
func loadProject(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: types.Mapping(env),
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName("toolnode", false)
	})
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p
}

// parseServe parses a serve command line: an optional "serve", then flags
// in the forms -f V, -f=V, --f V (and -f alone for the boolean ones).
func parseServe(cmd []string) (map[string]string, error) {
	if len(cmd) > 0 && !strings.HasPrefix(cmd[0], "-") {
		if cmd[0] != "serve" {
			return nil, fmt.Errorf("command %q does not run serve", cmd)
		}
		cmd = cmd[1:]
	}
	flags := map[string]string{}
	for i := 0; i < len(cmd); i++ {
		a := cmd[i]
		if !strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("unexpected argument %q", a)
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, dup := flags[name]; dup {
			return nil, fmt.Errorf("flag -%s given twice", name)
		}
		if !hasVal && !boolFlags[name] {
			if i+1 == len(cmd) {
				return nil, fmt.Errorf("flag -%s has no value", name)
			}
			i++
			val = cmd[i]
		}
		flags[name] = val
	}
	return flags, nil
}

func loadNodes(t *testing.T, p *types.Project) map[string]node {
	t.Helper()
	nodes := map[string]node{}
	for name, svc := range p.Services {
		if name == secretsService {
			continue
		}
		flags, err := parseServe(svc.Command)
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		nodes[name] = node{svc: svc, flags: flags}
	}
	return nodes
}

func sortedNames(nodes map[string]node) []string {
	var names []string
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func port(t *testing.T, service, flag, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("service %s: -%s %q: %v", service, flag, addr, err)
	}
	return p
}

func TestComposeNodes(t *testing.T) {
	nodes := loadNodes(t, loadProject(t, nil))
	if len(nodes) < 3 {
		t.Fatalf("%d services, want at least 3", len(nodes))
	}
	names := map[string]string{}
	for _, s := range sortedNames(nodes) {
		n := nodes[s]
		name := n.flags["name"]
		if name == "" {
			t.Errorf("service %s: no -name", s)
		} else if other, dup := names[name]; dup {
			t.Errorf("services %s and %s both have -name %s", other, s, name)
		}
		names[name] = s
		if got := n.flags["advertise"]; got != s {
			t.Errorf("service %s: -advertise %q, want the service name", s, got)
		}
		if n.svc.Hostname != "" && n.svc.Hostname != s {
			t.Errorf("service %s: hostname %q, want the service name", s, n.svc.Hostname)
		}
		// Peers and the host reach the node through its container's
		// interfaces: every listener binds them all.
		for _, f := range []string{"9p", "gossip", "cluster"} {
			addr, ok := n.flags[f]
			if !ok {
				t.Errorf("service %s: no -%s", s, f)
				continue
			}
			if host, _, err := net.SplitHostPort(addr); err != nil || host != "0.0.0.0" {
				t.Errorf("service %s: -%s %q, want 0.0.0.0:PORT", s, f, addr)
			}
		}
		if _, ok := n.flags["encrypt"]; ok {
			t.Errorf("service %s: -encrypt in the command; the entrypoint adds it from %s", s, gossipKeyVar)
		}
		if len(n.svc.Networks) == 0 {
			t.Errorf("service %s: on no network", s)
		}
		for net := range n.svc.Networks {
			for _, o := range sortedNames(nodes) {
				if _, ok := nodes[o].svc.Networks[net]; !ok {
					t.Errorf("service %s is on network %s, service %s is not", s, net, o)
				}
			}
		}
	}
}

func TestComposeBootstrapAndJoins(t *testing.T) {
	nodes := loadNodes(t, loadProject(t, nil))
	b, ok := nodes[bootstrap]
	if !ok {
		t.Fatalf("no service %s", bootstrap)
	}
	if j, ok := b.flags["join"]; ok {
		t.Errorf("%s bootstraps the cluster, but has -join %s", bootstrap, j)
	}
	published := false
	for _, p := range b.svc.Ports {
		if p.Published == hostP9Port && strconv.Itoa(int(p.Target)) == port(t, bootstrap, "9p", b.flags["9p"]) {
			published = true
			if p.HostIP != "" && p.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes 9P on %s:%s: want the loopback interface", bootstrap, p.HostIP, p.Published)
			}
			if p.Protocol != "" && p.Protocol != "tcp" {
				t.Errorf("%s publishes 9P over %s", bootstrap, p.Protocol)
			}
		}
	}
	if !published {
		t.Errorf("%s does not publish its 9P port on the host's %s: ports %+v", bootstrap, hostP9Port, b.svc.Ports)
	}

	hostPorts := map[string]string{}
	for _, s := range sortedNames(nodes) {
		n := nodes[s]
		for _, p := range n.svc.Ports {
			key := p.HostIP + ":" + p.Published + "/" + p.Protocol
			if other, dup := hostPorts[key]; dup {
				t.Errorf("services %s and %s both publish %s", other, s, key)
			}
			hostPorts[key] = s
		}
		if s == bootstrap {
			continue
		}
		join := n.flags["join"]
		if join == "" {
			t.Errorf("service %s: no -join (only %s bootstraps)", s, bootstrap)
			continue
		}
		for _, addr := range strings.Split(join, ",") {
			host, p, err := net.SplitHostPort(addr)
			if err != nil {
				t.Errorf("service %s: -join %q: %v", s, addr, err)
				continue
			}
			target, ok := nodes[host]
			if !ok {
				t.Errorf("service %s: -join %s: no service %s", s, addr, host)
				continue
			}
			if host == s {
				t.Errorf("service %s joins itself", s)
			}
			if g := port(t, host, "gossip", target.flags["gossip"]); p != g {
				t.Errorf("service %s: -join %s, but %s gossips on port %s", s, addr, host, g)
			}
			// Join fails when nobody answers: start after the member joined.
			if _, ok := n.svc.DependsOn[host]; !ok {
				t.Errorf("service %s joins %s but does not depend on it", s, host)
			}
		}
	}

	// Every node reaches the bootstrap node through joins.
	for _, s := range sortedNames(nodes) {
		seen := map[string]bool{}
		for cur := s; cur != bootstrap; {
			if seen[cur] {
				t.Errorf("service %s: its joins loop through %s and never reach %s", s, cur, bootstrap)
				break
			}
			seen[cur] = true
			j := nodes[cur].flags["join"]
			if j == "" {
				break
			}
			host, _, _ := net.SplitHostPort(strings.Split(j, ",")[0])
			if _, ok := nodes[host]; !ok {
				break
			}
			cur = host
		}
	}
}

func TestComposeVolumes(t *testing.T) {
	p := loadProject(t, nil)
	nodes := loadNodes(t, p)
	owner := map[string]string{}
	for _, s := range sortedNames(nodes) {
		n := nodes[s]
		data := n.flags["data"]
		if data == "" {
			t.Errorf("service %s: no -data", s)
			continue
		}
		found := false
		for _, v := range n.svc.Volumes {
			if v.Type != types.VolumeTypeVolume {
				continue
			}
			if _, ok := p.Volumes[v.Source]; !ok {
				t.Errorf("service %s: volume %s is not declared", s, v.Source)
			}
			if other, dup := owner[v.Source]; dup {
				t.Errorf("services %s and %s share the volume %s", other, s, v.Source)
			}
			owner[v.Source] = s
			rel, err := filepath.Rel(v.Target, data)
			if err == nil && !strings.HasPrefix(rel, "..") {
				found = true
				if v.ReadOnly {
					t.Errorf("service %s: its data volume %s is read-only", s, v.Source)
				}
			}
		}
		if !found {
			t.Errorf("service %s: -data %s is on no named volume of its own", s, data)
		}
	}
}

func TestComposeGossipKey(t *testing.T) {
	for _, key := range []string{"", "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ="} {
		env := map[string]string{}
		if key != "" {
			env[gossipKeyVar] = key
		}
		p := loadProject(t, env)
		for _, s := range sortedNames(loadNodes(t, p)) {
			v, ok := p.Services[s].Environment[gossipKeyVar]
			if !ok {
				t.Errorf("service %s: %s is not passed to the container", s, gossipKeyVar)
				continue
			}
			if got := ""; v != nil {
				got = *v
				if got != key {
					t.Errorf("service %s: %s=%q, want %q", s, gossipKeyVar, got, key)
				}
			} else if key != "" {
				t.Errorf("service %s: %s unset, want %q", s, gossipKeyVar, key)
			}
		}
	}
}

// TestComposeCapabilities checks that the hosts differ: some images are
// built with jq and some without, and each build's Dockerfile acts on the
// build argument.
func TestComposeCapabilities(t *testing.T) {
	p := loadProject(t, nil)
	nodes := loadNodes(t, p)
	withJQ, withoutJQ := 0, 0
	dockerfiles := map[string]bool{}
	for _, s := range sortedNames(nodes) {
		b := nodes[s].svc.Build
		if b == nil {
			t.Errorf("service %s: no build section (the image is not published anywhere)", s)
			continue
		}
		if v, ok := b.Args[jqBuildArg]; ok && v != nil && *v == "1" {
			withJQ++
		} else {
			withoutJQ++
		}
		df := b.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !filepath.IsAbs(df) {
			df = filepath.Join(b.Context, df)
		}
		dockerfiles[df] = true
	}
	if withJQ == 0 || withoutJQ == 0 {
		t.Errorf("%d services built with %s=1 and %d without: want both kinds", withJQ, jqBuildArg, withoutJQ)
	}
	for df := range dockerfiles {
		checkDockerfile(t, df)
	}

	// A host whose environment enables a variant: the tool that shows it is
	// in the image, and at least one node, not all, has the variable.
	meta, err := os.ReadFile("tools/site.meta")
	if err != nil {
		t.Fatal(err)
	}
	var site struct {
		Variants []struct {
			Match map[string]any `json:"match"`
		} `json:"variants"`
	}
	if err := json.Unmarshal(meta, &site); err != nil {
		t.Fatalf("tools/site.meta: %v", err)
	}
	if len(site.Variants) == 0 || site.Variants[0].Match["env"] == nil {
		t.Fatalf("tools/site.meta: want a variant that matches an env variable")
	}
	envVar, _ := site.Variants[0].Match["env"].(string)
	with := 0
	for _, svc := range p.Services {
		if v, ok := svc.Environment[envVar]; ok && v != nil && *v != "" {
			with++
		}
	}
	if with == 0 || with == len(p.Services) {
		t.Errorf("%d of %d services set %s: want some, not all", with, len(p.Services), envVar)
	}
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the Dockerfile of the build: %v", err)
	}
	defer f.Close()
	var (
		out   []instruction
		cur   strings.Builder
		start int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		more := strings.HasSuffix(line, "\\")
		cur.WriteString(strings.TrimSuffix(line, "\\"))
		cur.WriteString(" ")
		if more {
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkDockerfile(t *testing.T, path string) {
	t.Helper()
	ins := parseDockerfile(t, path)
	globalArgs := map[string]string{}
	var stages [][]instruction
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			stages = append(stages, []instruction{in})
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			globalArgs[k] = v
		case len(stages) > 0:
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("%s: %d stages, want a build stage and a runtime stage", path, len(stages))
	}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string { return globalArgs[k] })
	}
	from := func(st []instruction) string { return expand(strings.Fields(st[0].args)[0]) }
	if img := from(stages[0]); !regexp.MustCompile(`^golang:1\.26([.-]|$)`).MatchString(img) {
		t.Errorf("%s: the build stage is FROM %s, want a golang:1.26 image", path, img)
	}
	runtime := stages[len(stages)-1]
	if img := from(runtime); img != "debian:bookworm-slim" {
		t.Errorf("%s: the runtime stage is FROM %s, want debian:bookworm-slim", path, img)
	}

	built := false
	for _, in := range stages[0] {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") && strings.Contains(in.args, "./cmd/toolnode") {
			built = true
		}
	}
	if !built {
		t.Errorf("%s: the build stage does not go build ./cmd/toolnode", path)
	}

	ref := regexp.MustCompile(`\$\{?` + jqBuildArg + `\b`)
	installJQ := regexp.MustCompile(`install\b[^;&|]*\bjq\b`)
	var (
		declared, honoured, volume, entry bool
		user                              string
		copied                            []string
	)
	for _, in := range runtime {
		switch in.cmd {
		case "ARG":
			if k, _, _ := strings.Cut(in.args, "="); k == jqBuildArg {
				declared = true
			}
		case "RUN":
			// The install of jq comes after a test of the argument.
			if r, i := ref.FindStringIndex(in.args), installJQ.FindStringIndex(in.args); declared && r != nil && i != nil && r[0] < i[0] {
				honoured = true
			}
			if strings.Contains(in.args, "python3") && !strings.Contains(in.args, "command -v python3") {
				t.Errorf("%s:%d: the runtime stage seems to install python3", path, in.line)
			}
		case "USER":
			user = strings.Fields(in.args)[0]
		case "VOLUME":
			volume = true
		case "ENTRYPOINT":
			entry = true
		case "COPY", "ADD":
			f := strings.Fields(in.args)
			if len(f) < 2 || strings.HasPrefix(f[0], "--from=") {
				continue
			}
			for _, src := range f[:len(f)-1] {
				if strings.HasPrefix(src, "--") {
					continue
				}
				copied = append(copied, src)
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), src)); err != nil {
					t.Errorf("%s:%d: COPY %s: %v", path, in.line, src, err)
				}
			}
		}
	}
	if !declared {
		t.Errorf("%s: the runtime stage has no ARG %s", path, jqBuildArg)
	}
	if !honoured {
		t.Errorf("%s: no RUN of the runtime stage installs jq depending on $%s", path, jqBuildArg)
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("%s: the image runs as %q, want a non-root user", path, user)
	}
	if !volume {
		t.Errorf("%s: no VOLUME for the data", path)
	}
	if !entry {
		t.Errorf("%s: no ENTRYPOINT", path)
	}
	for _, want := range []string{"examples/tools", "examples/agents", "deploy/entrypoint.sh"} {
		if !slices.ContainsFunc(copied, func(s string) bool { return strings.TrimSuffix(s, "/") == want }) {
			t.Errorf("%s: the runtime stage does not COPY %s", path, want)
		}
	}
}

// TestComposeSecrets checks that the cluster runs with credentials made
// at the first start, each node seeing only its own: an init service makes
// the gossip key and a certificate for every node, each into a volume of
// that node's; every node waits for it and mounts its own volume, and only
// that one, read-only; no node mounts the CA's volume.
func TestComposeSecrets(t *testing.T) {
	for _, e := range secretsProblems(t, loadProject(t, nil)) {
		t.Error(e)
	}
}

// TestComposeSecretsControl shows that TestComposeSecrets sees a node
// that mounts another node's key, and one shared volume of every key.
func TestComposeSecretsControl(t *testing.T) {
	p := loadProject(t, nil)
	n2 := p.Services["node2"]
	n2.Volumes = append(n2.Volumes, types.ServiceVolumeConfig{Type: types.VolumeTypeVolume, Source: "node1-secrets", Target: "/mnt", ReadOnly: true})
	p.Services["node2"] = n2
	if got := secretsProblems(t, p); !slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, `mounted by ["node1" "node2"]`) }) {
		t.Errorf("node2 mounting node1's volume: %q", got)
	}

	p = loadProject(t, nil)
	init := p.Services[secretsService]
	init.Volumes = append(init.Volumes, types.ServiceVolumeConfig{Type: types.VolumeTypeVolume, Source: "all", Target: secretsDir})
	p.Services[secretsService] = init
	for s, svc := range p.Services {
		if s == secretsService {
			continue
		}
		for i, v := range svc.Volumes {
			if v.Target == secretsDir {
				svc.Volumes[i].Source = "all"
			}
		}
	}
	if got := secretsProblems(t, p); len(got) < len(p.Services)-1 {
		t.Errorf("one secrets volume shared by every node: %q", got)
	}
}

// secretsProblems says what in p breaks the promises of TestComposeSecrets.
func secretsProblems(t *testing.T, p *types.Project) []string {
	t.Helper()
	var probs []string
	bad := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	nodes := loadNodes(t, p)
	init, ok := p.Services[secretsService]
	if !ok {
		bad("no service %s", secretsService)
		return probs
	}
	if len(init.Command) == 0 || init.Command[0] != "secrets" {
		bad("service %s: command %q, want the entrypoint's secrets step", secretsService, init.Command)
		return probs
	}
	if v := init.Environment["TOOLNODE_SECRETS"]; v == nil || *v != secretsDir {
		bad("service %s: TOOLNODE_SECRETS = %v, want %s", secretsService, v, secretsDir)
	}
	// Docker makes a volume mounted where the image has no directory
	// owned by root: the init step writes them as root and hands each to
	// the user the nodes run as.
	if init.User != "0" && init.User != "0:0" && init.User != "root" {
		bad("service %s runs as %q: it cannot write the volumes Docker makes for root", secretsService, init.User)
	}
	imageUser := dockerfileUser(t, filepath.Join(repoRoot(t), "Dockerfile"))
	if v := init.Environment["TOOLNODE_SECRETS_OWNER"]; v == nil || strings.Split(*v, ":")[0] != imageUser {
		bad("service %s: TOOLNODE_SECRETS_OWNER = %v, want the image's user %s", secretsService, v, imageUser)
	}
	initMounts := map[string]types.ServiceVolumeConfig{} // volume → the init's mount
	for _, v := range init.Volumes {
		if v.Type == types.VolumeTypeVolume {
			initMounts[v.Source] = v
			if v.ReadOnly {
				bad("service %s: volume %s is read-only", secretsService, v.Source)
			}
		}
	}
	if _, ok := initMounts[caVolume]; !ok {
		bad("service %s does not keep the CA in volume %s", secretsService, caVolume)
	}
	mountedBy := map[string][]string{} // an init volume → the nodes that mount it
	for _, s := range sortedNames(nodes) {
		n := nodes[s]
		name := n.flags["name"]
		if !slices.Contains(init.Command[1:], name) {
			bad("service %s: %s makes no certificate for node %s", s, secretsService, name)
		}
		if d, ok := n.svc.DependsOn[secretsService]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			bad("service %s: does not wait for %s to complete (%+v)", s, secretsService, d)
		}
		own := ""
		for _, v := range n.svc.Volumes {
			if v.Type != types.VolumeTypeVolume {
				continue
			}
			im, fromInit := initMounts[v.Source]
			if !fromInit {
				continue
			}
			mountedBy[v.Source] = append(mountedBy[v.Source], s)
			switch {
			case v.Source == caVolume:
				bad("service %s mounts the CA's key (volume %s)", s, caVolume)
			case im.Target != secretsDir+"/"+name:
				bad("service %s mounts volume %s, where %s writes %s, not node %s's secrets", s, v.Source, secretsService, im.Target, name)
			case v.Target != secretsDir || !v.ReadOnly:
				bad("service %s: volume %s at %s (read-only %v), want it read-only at %s", s, v.Source, v.Target, v.ReadOnly, secretsDir)
			default:
				own = v.Source
			}
		}
		if own == "" {
			bad("service %s: no volume of %s's %s/%s mounted at %s", s, secretsService, secretsDir, name, secretsDir)
		}
		env := n.svc.Environment
		if v := env["TOOLNODE_SECRETS"]; v == nil || *v != secretsDir {
			bad("service %s: TOOLNODE_SECRETS = %v, want %s", s, v, secretsDir)
		}
		if v := env["TOOLNODE_CA"]; v == nil || *v != secretsDir+"/toolnode-ca.pem" {
			bad("service %s: TOOLNODE_CA = %v, want the secrets' CA (for a 9P client in the container)", s, v)
		}
		// The credentials come from the entrypoint, not the command line.
		for _, f := range []string{"encrypt", "tls-cert", "insecure"} {
			if _, ok := n.flags[f]; ok {
				bad("service %s: -%s in the command", s, f)
			}
		}
	}
	for vol, by := range mountedBy {
		if len(by) > 1 {
			bad("volume %s of %s is mounted by %q: each node sees only its own key", vol, secretsService, by)
		}
	}
	return probs
}

// dockerfileUser is the user of the Dockerfile's last USER instruction.
func dockerfileUser(t *testing.T, path string) string {
	t.Helper()
	user := ""
	for _, in := range parseDockerfile(t, path) {
		if in.cmd == "USER" {
			user = strings.Fields(in.args)[0]
		}
	}
	return user
}

// TestClusterScript checks that scripts/cluster.sh parses and runs the
// compose file's services.
func TestClusterScript(t *testing.T) {
	path := filepath.Join(repoRoot(t), "scripts", "cluster.sh")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("bash -n scripts/cluster.sh: %v\n%s", err, out)
		}
	}
	m := regexp.MustCompile(`(?m)^NODES="([^"]*)"`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`scripts/cluster.sh: no NODES="..." line`)
	}
	var compose []string
	for s := range loadProject(t, nil).Services {
		if s != secretsService {
			compose = append(compose, s)
		}
	}
	slices.Sort(compose)
	script := strings.Fields(string(m[1]))
	if !slices.Equal(script, compose) {
		t.Errorf("scripts/cluster.sh runs %q, docker-compose.yml has %q", script, compose)
	}

	// The same roles: the voters, the clients (the nodes that start once
	// others are ready) and what each passes to its tools.
	nodes := loadNodes(t, loadProject(t, nil))
	if v := regexp.MustCompile(`(?m)^VOTERS=(\d*)`).FindSubmatch(b); v == nil || string(v[1]) != strconv.Itoa(composeVoters(t, nodes)) {
		t.Errorf("scripts/cluster.sh: no VOTERS=%d line, the -voters of docker-compose.yml", composeVoters(t, nodes))
	}
	var clients []string
	for _, s := range sortedNames(nodes) {
		for _, d := range nodes[s].svc.DependsOn {
			if d.Condition == types.ServiceConditionHealthy && !slices.Contains(clients, s) {
				clients = append(clients, s)
			}
		}
	}
	if c := regexp.MustCompile(`(?m)^CLIENTS="([^"]*)"`).FindSubmatch(b); c == nil || !slices.Equal(strings.Fields(string(c[1])), clients) {
		t.Errorf("scripts/cluster.sh: no CLIENTS=\"%s\" line: docker-compose.yml starts them once others are ready", strings.Join(clients, " "))
	}
	toolEnv := map[string]string{}
	if body := regexp.MustCompile(`(?s)\ntool_env\(\) \{(.*?)\n\}`).FindSubmatch(b); body != nil {
		for _, m := range regexp.MustCompile(`(?m)^\s*(\S+)\) echo (\S+) ;;`).FindAllSubmatch(body[1], -1) {
			toolEnv[string(m[1])] = string(m[2])
		}
	}
	for _, s := range sortedNames(nodes) {
		if got, want := toolEnv[s], nodes[s].flags["tool-env"]; got != want {
			t.Errorf("scripts/cluster.sh: %s gets -tool-env %q, docker-compose.yml %q", s, got, want)
		}
	}
}
