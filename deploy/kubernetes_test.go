package deploy

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// k8sObjects are the decoded documents of deploy/kubernetes.
type k8sObjects struct {
	secrets  map[string]*corev1.Secret
	services map[string]*corev1.Service
	sets     []*appsv1.StatefulSet
	daemons  []*appsv1.DaemonSet
	pdbs     []*policyv1.PodDisruptionBudget
}

// loadK8s decodes every document of every manifest strictly into its
// k8s.io/api type: an unknown or misspelt field fails.
func loadK8s(t *testing.T) *k8sObjects {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	o := &k8sObjects{secrets: map[string]*corev1.Secret{}, services: map[string]*corev1.Service{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(b, []byte("\n---\n")) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "v1 Secret":
				s := &corev1.Secret{}
				obj = s
				defer func() { o.secrets[s.Name] = s }()
			case "v1 Service":
				s := &corev1.Service{}
				obj = s
				defer func() { o.services[s.Name] = s }()
			case "apps/v1 StatefulSet":
				s := &appsv1.StatefulSet{}
				obj = s
				o.sets = append(o.sets, s)
			case "apps/v1 DaemonSet":
				s := &appsv1.DaemonSet{}
				obj = s
				o.daemons = append(o.daemons, s)
			case "policy/v1 PodDisruptionBudget":
				s := &policyv1.PodDisruptionBudget{}
				obj = s
				o.pdbs = append(o.pdbs, s)
			default:
				t.Fatalf("%s, document %d: unexpected %s %s", f, i+1, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s, document %d (%s): %v", f, i+1, head.Kind, err)
			}
		}
	}
	return o
}

// serveFlags are the flag names cmd/toolnode's serve defines, read from
// its source so that a renamed flag fails here.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "cmd", "toolnode", "serve.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Var") || len(call.Args) < 2 {
			return true
		}
		if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			name, _ := strconv.Unquote(lit.Value)
			flags[name] = true
		}
		return true
	})
	if !flags["9p"] || !flags["join"] {
		t.Fatalf("read no serve flags from serve.go: %v", flags)
	}
	return flags
}

// podFlags parses a container's args (serve and its flags) into a map,
// refusing any flag serve does not define.
func podFlags(t *testing.T, where string, c corev1.Container, known map[string]bool) map[string]string {
	t.Helper()
	args := c.Args
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("%s: args do not run serve: %q", where, args)
	}
	out := map[string]string{}
	for i := 1; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "-")
		if !ok || !known[name] {
			t.Fatalf("%s: %q is not a flag of toolnode serve", where, args[i])
		}
		if i+1 >= len(args) {
			t.Fatalf("%s: flag -%s has no value", where, name)
		}
		out[name] = args[i+1]
		i++
	}
	return out
}

func addrPort(t *testing.T, where, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, addr, err)
	}
	return int32(n)
}

func containerPort(c corev1.Container, name string) (corev1.ContainerPort, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

func envVar(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// TestKubernetesManifests decodes deploy/kubernetes strictly and checks
// that what the pods run agrees with toolnode's flags and with each
// other: the flags exist; the listen ports are the container's and the
// Service's; the join address names the headless Service and its gossip
// port; the gossip key and certificates come from the Secrets the
// manifests define, with the keys they define; the probes hit /readyz and
// /healthz on -metrics; every port that leaves the pod has its credential.
func TestKubernetesManifests(t *testing.T) {
	o := loadK8s(t)
	known := serveFlags(t)
	if len(o.sets) != 1 || len(o.daemons) != 1 || len(o.pdbs) != 1 {
		t.Fatalf("want one StatefulSet (servers), one DaemonSet (a node per machine) and one PodDisruptionBudget; have %d, %d, %d", len(o.sets), len(o.daemons), len(o.pdbs))
	}
	sts := o.sets[0]
	svc := o.services[sts.Spec.ServiceName]
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("the StatefulSet's service %q is not a headless Service of the manifests", sts.Spec.ServiceName)
	}
	for k, v := range svc.Spec.Selector {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the servers' pods do not carry", svc.Name, k, v)
		}
	}
	svcPorts := map[string]int32{}
	for _, p := range svc.Spec.Ports {
		svcPorts[fmt.Sprintf("%s/%s", p.Protocol, p.Name)] = p.Port
	}
	pdb := o.pdbs[0]
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%s, which the servers' pods do not carry", k, v)
		}
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("the PodDisruptionBudget should let one server go at a time")
	}

	pods := []struct {
		where string
		spec  corev1.PodSpec
	}{
		{"StatefulSet " + sts.Name, sts.Spec.Template.Spec},
		{"DaemonSet " + o.daemons[0].Name, o.daemons[0].Spec.Template.Spec},
	}
	for _, pod := range pods {
		if len(pod.spec.Containers) != 1 {
			t.Fatalf("%s: want one container", pod.where)
		}
		c := pod.spec.Containers[0]
		fl := podFlags(t, pod.where, c, known)
		mounts := map[string]string{} // mount path → volume
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		vols := map[string]corev1.Volume{}
		for _, v := range pod.spec.Volumes {
			vols[v.Name] = v
		}

		// Ports: flags, container ports and the Service agree.
		for _, p := range []struct{ flag, name, proto string }{
			{"9p", "ninep", "TCP"}, {"gossip", "gossip-tcp", "TCP"}, {"gossip", "gossip-udp", "UDP"},
			{"cluster", "cluster", "TCP"}, {"metrics", "metrics", "TCP"},
		} {
			addr, ok := fl[p.flag]
			if !ok {
				t.Errorf("%s: no -%s", pod.where, p.flag)
				continue
			}
			want := addrPort(t, pod.where, addr)
			cp, ok := containerPort(c, p.name)
			if !ok || cp.ContainerPort != want || string(cp.Protocol) != p.proto {
				t.Errorf("%s: container port %s is %+v, want %d/%s from -%s %s", pod.where, p.name, cp, want, p.proto, p.flag, addr)
			}
			if p.flag != "metrics" {
				if sp, ok := svcPorts[p.proto+"/"+p.name]; !ok || sp != want {
					t.Errorf("Service %s: port %s/%s is %d, want %d", svc.Name, p.proto, p.name, sp, want)
				}
			}
		}
		// A server advertises its stable name (TestKubernetesServers); a
		// node per machine has none, and advertises its IP.
		if pod.where != pods[0].where && fl["advertise"] != "$(POD_IP)" {
			t.Errorf("%s: -advertise %q, want $(POD_IP)", pod.where, fl["advertise"])
		}
		for _, ref := range []string{"POD_IP", "POD_NAME", "POD_NAMESPACE", "NODE_NAME"} {
			used := false
			for _, a := range c.Args {
				used = used || strings.Contains(a, "$("+ref+")")
			}
			for _, e := range c.Env {
				used = used || strings.Contains(e.Value, "$("+ref+")")
			}
			if _, ok := envVar(c, ref); used && !ok {
				t.Errorf("%s: $(%s) is used but not defined", pod.where, ref)
			}
		}

		// Joining: by the headless Service's DNS, on its gossip port.
		join, ok := envVar(c, "TOOLNODE_JOIN")
		if !ok {
			t.Errorf("%s: no TOOLNODE_JOIN", pod.where)
		} else {
			host, jp, err := net.SplitHostPort(join.Value)
			if err != nil {
				t.Errorf("%s: TOOLNODE_JOIN %q: %v", pod.where, join.Value, err)
			} else {
				wantHost := sts.Name + "-0." + svc.Name + ".$(POD_NAMESPACE).svc.cluster.local"
				if host != wantHost || jp != strconv.Itoa(int(svcPorts["TCP/gossip-tcp"])) {
					t.Errorf("%s: TOOLNODE_JOIN %q, want %s:%d (the first server through the headless Service)", pod.where, join.Value, wantHost, svcPorts["TCP/gossip-tcp"])
				}
			}
		}
		if pod.where == pods[0].where {
			bp, ok := envVar(c, "TOOLNODE_BOOTSTRAP_POD")
			if !ok || bp.Value != sts.Name+"-0" {
				t.Errorf("%s: TOOLNODE_BOOTSTRAP_POD %q, want %s-0", pod.where, bp.Value, sts.Name)
			}
		}

		// The gossip key: from a Secret and key the manifests define.
		key, ok := envVar(c, "TOOLNODE_GOSSIP_KEY")
		if !ok || key.ValueFrom == nil || key.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: TOOLNODE_GOSSIP_KEY does not come from a Secret", pod.where)
		} else if ref := key.ValueFrom.SecretKeyRef; !secretHas(o, ref.Name, ref.Key) {
			t.Errorf("%s: TOOLNODE_GOSSIP_KEY from secret %s key %s, which the manifests do not define", pod.where, ref.Name, ref.Key)
		}

		// Certificates: every file flag names a key of a mounted Secret.
		for _, f := range []string{"tls-cert", "tls-key", "tls-ca", "9p-tls-cert", "9p-tls-key"} {
			path, ok := fl[f]
			if !ok {
				t.Errorf("%s: no -%s: a port that leaves the pod needs its credential", pod.where, f)
				continue
			}
			dir, file := filepath.Split(path)
			vol, ok := vols[mounts[strings.TrimSuffix(dir, "/")]]
			if !ok || vol.Secret == nil {
				t.Errorf("%s: -%s %s is not in a mounted Secret", pod.where, f, path)
				continue
			}
			if !secretHas(o, vol.Secret.SecretName, file) {
				t.Errorf("%s: -%s %s: secret %s has no key %s", pod.where, f, path, vol.Secret.SecretName, file)
			}
		}
		if _, ok := fl["data"]; !ok || mounts[fl["data"]] == "" {
			t.Errorf("%s: -data %q is not a mounted volume", pod.where, fl["data"])
		}

		// Probes: on the metrics port.
		for name, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[name]
			if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != want || pr.HTTPGet.Port.String() != "metrics" {
				t.Errorf("%s: %s probe should GET %s on the metrics port", pod.where, name, want)
			}
		}
		if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: the container should run with no privilege escalation and a read-only root", pod.where)
		}
	}
}

func secretHas(o *k8sObjects, name, key string) bool {
	s := o.secrets[name]
	if s == nil {
		return false
	}
	if _, ok := s.StringData[key]; ok {
		return true
	}
	_, ok := s.Data[key]
	return ok
}

// TestKubernetesStrictDecodeRefusesUnknownFields is the control of the
// test above: a misspelt field is an error, not silently dropped.
func TestKubernetesStrictDecodeRefusesUnknownFields(t *testing.T) {
	doc := []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  template:\n    spec:\n      containers:\n        - name: toolnode\n          imagePullPolice: Always\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.DaemonSet{}); err == nil || !strings.Contains(err.Error(), "imagePullPolice") {
		t.Fatalf("a misspelt field decoded without error: %v", err)
	}
}

// serverProblems says what in the servers' StatefulSet breaks the promise
// that a deleted pod comes back under its stable name with its state: an
// odd number of voters, all of them servers; the pod named by its stable
// name, advertising its stable DNS name through a headless Service that
// publishes pods before they are ready; its -data on a claim of its own;
// and no pod holding the key of the other role's pods.
func serverProblems(t *testing.T, o *k8sObjects) []string {
	t.Helper()
	var probs []string
	bad := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	known := serveFlags(t)
	sts := o.sets[0]
	where := "StatefulSet " + sts.Name
	svc := o.services[sts.Spec.ServiceName]
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		bad("%s: its Service %q is not headless: its pods get no stable DNS names", where, sts.Spec.ServiceName)
		return probs
	}
	if !svc.Spec.PublishNotReadyAddresses {
		bad("Service %s does not publish not-ready pods: peers cannot resolve a server before the cluster is ready", svc.Name)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	fl := podFlags(t, where, c, known)
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	voters, err := strconv.Atoi(fl["voters"])
	switch {
	case err != nil:
		bad("%s: -voters %q: %v", where, fl["voters"], err)
	case voters%2 == 0 || voters < 3:
		bad("%s: -voters %d, want an odd number, at least 3", where, voters)
	case int32(voters) != replicas:
		bad("%s: -voters %d and %d replicas: every voter a server pod", where, voters, replicas)
	}
	for _, d := range o.daemons {
		if dfl := podFlags(t, "DaemonSet "+d.Name, d.Spec.Template.Spec.Containers[0], known); dfl["voters"] != fl["voters"] {
			bad("DaemonSet %s: -voters %q, the servers %q: the leader follows its own", d.Name, dfl["voters"], fl["voters"])
		}
	}
	if e, ok := envVar(c, "POD_NAME"); !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		bad("%s: POD_NAME is not the pod's metadata.name", where)
	}
	if fl["name"] != "$(POD_NAME)" {
		bad("%s: -name %q, want $(POD_NAME), the pod's stable name", where, fl["name"])
	}
	if want := "$(POD_NAME)." + svc.Name + ".$(POD_NAMESPACE).svc.cluster.local"; fl["advertise"] != want {
		bad("%s: -advertise %q, want %s, the pod's stable DNS name", where, fl["advertise"], want)
	}
	claims := map[string]bool{}
	for _, pvc := range sts.Spec.VolumeClaimTemplates {
		claims[pvc.Name] = true
	}
	onClaim := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == fl["data"] && claims[m.Name] {
			onClaim = true
		}
	}
	if !onClaim {
		bad("%s: -data %q is not on a volume claim of the pod's own", where, fl["data"])
	}
	// Keys: the Secrets with a tls.key each role mounts.
	keys := func(spec corev1.PodSpec) []string {
		var out []string
		for _, v := range spec.Volumes {
			if v.Secret != nil && secretHas(o, v.Secret.SecretName, "tls.key") {
				out = append(out, v.Secret.SecretName)
			}
		}
		return out
	}
	server := keys(sts.Spec.Template.Spec)
	for _, d := range o.daemons {
		for _, k := range keys(d.Spec.Template.Spec) {
			if slices.Contains(server, k) {
				bad("DaemonSet %s and the servers both mount the key of Secret %s", d.Name, k)
			}
		}
	}
	return probs
}

// TestKubernetesServers checks the servers' promises (serverProblems).
func TestKubernetesServers(t *testing.T) {
	for _, e := range serverProblems(t, loadK8s(t)) {
		t.Error(e)
	}
}

// TestKubernetesServersControl breaks each promise in memory and sees the
// check fail: a pod IP advertised (a new pod comes back at an address the
// others do not know), not-ready pods unpublished, four voters, the
// servers' key shared with every machine.
func TestKubernetesServersControl(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		change     func(o *k8sObjects)
	}{
		{"pod IP", "stable DNS name", func(o *k8sObjects) {
			args := o.sets[0].Spec.Template.Spec.Containers[0].Args
			args[slices.Index(args, "-advertise")+1] = "$(POD_IP)"
		}},
		{"not-ready pods unpublished", "not-ready", func(o *k8sObjects) {
			o.services[o.sets[0].Spec.ServiceName].Spec.PublishNotReadyAddresses = false
		}},
		{"four voters", "odd number", func(o *k8sObjects) {
			args := o.sets[0].Spec.Template.Spec.Containers[0].Args
			args[slices.Index(args, "-voters")+1] = "4"
		}},
		{"one key for all", "both mount", func(o *k8sObjects) {
			vols := o.daemons[0].Spec.Template.Spec.Volumes
			for i := range vols {
				if vols[i].Secret != nil {
					vols[i].Secret.SecretName = o.sets[0].Spec.Template.Spec.Volumes[0].Secret.SecretName
				}
			}
		}},
	} {
		o := loadK8s(t)
		tc.change(o)
		if got := serverProblems(t, o); !slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, tc.want) }) {
			t.Errorf("%s: the check says %q", tc.name, got)
		}
	}
}
