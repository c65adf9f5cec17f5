package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermesd/hermesd/internal/fleettest"
	"github.com/hermesd/hermesd/internal/systemdunit"
)

// manifest is a multi-document Kubernetes file, by kind and name.
type manifest map[string]map[string]any

func readManifest(t *testing.T, path string) manifest {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := manifest{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d == nil {
			continue
		}
		k := fmt.Sprintf("%v/%v", d["kind"], get(d, "metadata", "name"))
		if _, dup := out[k]; dup {
			t.Fatalf("%s: two %s", path, k)
		}
		out[k] = d
	}
	return out
}

func (m manifest) must(t *testing.T, kind string) map[string]any {
	t.Helper()
	d, ok := m[kind]
	if !ok {
		t.Fatalf("no %s", kind)
	}
	return d
}

// get walks nested YAML maps and lists (an int indexes a list).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func container(spec any, name string) map[string]any {
	for _, c := range get(spec, "containers").([]any) {
		if get(c, "name") == name {
			return c.(map[string]any)
		}
	}
	return nil
}

// nodeConfig loads the nodes' configuration the ConfigMap carries, its
// cluster section checked strictly against the fleet's schema.
func nodeConfig(t *testing.T, m manifest) (cfgText string, cs fleettest.ClusterSection, shutdown, handoff time.Duration) {
	t.Helper()
	text, _ := get(m.must(t, "ConfigMap/hermesd"), "data", "hermesd.yml").(string)
	p := filepath.Join(t.TempDir(), "hermesd.yml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WALRUS_PUBLISHER_URL", "http://walrus-publisher.walrus.svc:31415")
	t.Setenv("MAINNET_RPC_URL", "https://mainnet.example.invalid/v3/test")
	c, cs := fleettest.LoadNodeConfig(t, p)
	handoff = 2 * time.Minute // hermesd's default
	if cs.HandoffTimeout != "" {
		handoff, _ = time.ParseDuration(cs.HandoffTimeout)
	}
	return text, cs, c.ShutdownTimeout.D(), handoff
}

// TestNodes checks the nodes' manifest: the configuration loads; the pod
// drains on preStop with time for it; readiness is /readyz on the port
// hermesd listens on; every key the configuration names is in the mounted
// key Secret; a disruption budget covers the pods; the etcd endpoints are
// etcd.yaml's members.
func TestNodes(t *testing.T) {
	m := readManifest(t, "kubernetes/hermesd.yaml")
	text, cs, shutdown, handoff := nodeConfig(t, m)
	if cs.Node != "" {
		t.Errorf("cluster.node is %q: the pods share one configuration, so each must take its own name (the host name)", cs.Node)
	}
	dep := m.must(t, "Deployment/hermesd")
	spec := get(dep, "spec", "template", "spec")
	labels := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	h := container(spec, "hermesd")
	if h == nil {
		t.Fatal("no hermesd container")
	}
	if args := fmt.Sprint(h["args"]); !strings.HasPrefix(args, "[run ") {
		t.Errorf("hermesd container runs %s", args)
	}
	pre := fmt.Sprint(get(h, "lifecycle", "preStop", "exec", "command"))
	if !strings.Contains(pre, " fleet drain ") || !strings.HasSuffix(pre, " -config /etc/hermesd/hermesd.yml]") {
		t.Errorf("preStop runs %s, want hermesd fleet drain of this node (no NODE: it waits until the node owns nothing)", pre)
	}
	grace, _ := get(spec, "terminationGracePeriodSeconds").(int)
	if need := handoff + shutdown; time.Duration(grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d leaves no room for a hand-off (%v) and the shutdown (%v)", grace, handoff, shutdown)
	}
	// Readiness: /readyz on the port of http.listen, which must then
	// listen beyond loopback.
	if p := get(h, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe %v, want /readyz", p)
	}
	var port any
	for _, p := range get(h, "ports").([]any) {
		if get(p, "name") == get(h, "readinessProbe", "httpGet", "port") {
			port = get(p, "containerPort")
		}
	}
	if !strings.Contains(text, fmt.Sprintf(`listen: "0.0.0.0:%v"`, port)) || !strings.Contains(text, "allow_remote: true") {
		t.Errorf("the probe's port %v is not http.listen on the pod's address", port)
	}
	// Keys: every file under /etc/hermesd/keys the configuration names
	// comes from the Secret mounted there.
	mounts := map[string]string{}
	for _, vm := range get(h, "volumeMounts").([]any) {
		mounts[fmt.Sprint(get(vm, "mountPath"))] = fmt.Sprint(get(vm, "name"))
	}
	secrets := map[string]string{}
	for _, v := range get(spec, "volumes").([]any) {
		if s := get(v, "secret", "secretName"); s != nil {
			secrets[fmt.Sprint(get(v, "name"))] = fmt.Sprint(s)
			if mode, _ := get(v, "secret", "defaultMode").(int); mode&0o037 != 0 {
				t.Errorf("secret volume %v: mode %04o, which hermesd refuses for a key", get(v, "name"), mode)
			}
		}
	}
	files := regexp.MustCompile(`file: (/[^ }]+)`).FindAllStringSubmatch(text, -1)
	for _, f := range append(files, []string{"", cs.TLS["ca_file"]}, []string{"", cs.TLS["cert_file"]}, []string{"", cs.TLS["key_file"]}) {
		dir := filepath.Dir(f[1])
		if secrets[mounts[dir]] == "" {
			t.Errorf("%s: %s is no mounted Secret", f[1], dir)
		}
	}
	if secrets[mounts["/etc/hermesd/keys"]] != "hermesd-keys" {
		t.Errorf("/etc/hermesd/keys is %q, want the Secret hermesd-keys", secrets[mounts["/etc/hermesd/keys"]])
	}
	if get(spec, "securityContext", "fsGroup") == nil {
		t.Error("no fsGroup: the non-root hermesd could not read the keys")
	}
	pdb := m.must(t, "PodDisruptionBudget/hermesd")
	if !sameLabels(get(pdb, "spec", "selector", "matchLabels"), labels) {
		t.Errorf("the disruption budget selects %v, the pods are %v", get(pdb, "spec", "selector", "matchLabels"), labels)
	}
	if get(pdb, "spec", "maxUnavailable") != 1 {
		t.Errorf("disruption budget %v, want maxUnavailable 1", get(pdb, "spec"))
	}
	// The endpoints are etcd.yaml's members, over TLS.
	e := readManifest(t, "kubernetes/etcd.yaml")
	sts := e.must(t, "StatefulSet/etcd")
	n, _ := get(sts, "spec", "replicas").(int)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("https://etcd-%d.etcd.hermesd.svc:2379", i))
	}
	if !slices.Equal(cs.Endpoints, want) {
		t.Errorf("cluster.endpoints %v, want etcd.yaml's members %v", cs.Endpoints, want)
	}
	if !sameLabels(get(m.must(t, "NetworkPolicy/hermesd"), "spec", "podSelector", "matchLabels"), labels) {
		t.Error("no network policy covers the nodes' HTTP port")
	}
}

// TestEtcd: three members, one per machine, a budget that keeps the
// majority, client certificates required, the release hermesd's client
// is built against, and only the nodes let in.
func TestEtcd(t *testing.T) {
	m := readManifest(t, "kubernetes/etcd.yaml")
	sts := m.must(t, "StatefulSet/etcd")
	n, _ := get(sts, "spec", "replicas").(int)
	if n != 3 {
		t.Errorf("%d members, want 3", n)
	}
	if min, _ := get(m.must(t, "PodDisruptionBudget/etcd"), "spec", "minAvailable").(int); min != n/2+1 {
		t.Errorf("etcd disruption budget minAvailable %d, want the majority %d", min, n/2+1)
	}
	spec := get(sts, "spec", "template", "spec")
	c := container(spec, "etcd")
	cmd := fmt.Sprint(c["command"])
	for _, flag := range []string{"--client-cert-auth=true", "--peer-client-cert-auth=true", "--listen-client-urls=https://"} {
		if !strings.Contains(cmd, flag) {
			t.Errorf("etcd runs without %s", flag)
		}
	}
	var members []string
	for i := range n {
		members = append(members, fmt.Sprintf("etcd-%d=https://etcd-%d.etcd.$(NAMESPACE).svc:2380", i, i))
	}
	if !strings.Contains(cmd, "--initial-cluster="+strings.Join(members, ",")) {
		t.Errorf("--initial-cluster does not list the %d members", n)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`go\.etcd\.io/etcd/client/v3 (v\S+)`).FindSubmatch(mod)
	if v == nil || !strings.HasSuffix(fmt.Sprint(c["image"]), ":"+string(v[1])) {
		t.Errorf("etcd image %v, want the client's release %s", c["image"], v)
	}
	if get(spec, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution") == nil {
		t.Error("members may share a machine")
	}
	from := fmt.Sprint(get(m.must(t, "NetworkPolicy/etcd"), "spec", "ingress"))
	if !strings.Contains(from, "app:hermesd") {
		t.Errorf("the nodes may not reach etcd: %s", from)
	}
}

// unit is a systemd unit: every value of every key (keys repeat).
type unit systemdunit.Unit

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	u, err := systemdunit.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return unit(u)
}

// TestSystemdUnit: the node's unit is the single-node unit (its sandbox
// and restart policy, key for key) with a drain before the stop and a
// stop timeout that covers it.
func TestSystemdUnit(t *testing.T) {
	fleet, single := readUnit(t, "systemd/hermesd.service"), readUnit(t, "../configs/hermesd.service")
	changed := []string{"Description", "ExecStop", "TimeoutStopSec"}
	for k, v := range single {
		if !slices.Contains(changed, k) && !slices.Equal(fleet[k], v) {
			t.Errorf("%s=%v, the single-node unit says %v", k, fleet[k], v)
		}
	}
	for k := range fleet {
		if _, ok := single[k]; !ok && !slices.Contains(changed, k) {
			t.Errorf("%s is not in the single-node unit", k)
		}
	}
	stop := fleet["ExecStop"]
	if len(stop) != 1 || stop[0] != "-/usr/local/bin/hermesd fleet drain -config /etc/hermesd/hermesd.yml" {
		t.Errorf("ExecStop=%v, want one hermesd fleet drain of this node (it waits) whose failure does not stop the stop", stop)
	}
	if len(fleet["TimeoutStopSec"]) != 1 {
		t.Fatalf("TimeoutStopSec %v", fleet["TimeoutStopSec"])
	}
	d, err := time.ParseDuration(fleet["TimeoutStopSec"][0])
	if err != nil {
		t.Fatal(err)
	}
	_, _, shutdown, handoff := nodeConfig(t, readManifest(t, "kubernetes/hermesd.yaml"))
	if d <= handoff+shutdown {
		t.Errorf("TimeoutStopSec=%v leaves no room for a hand-off (%v) and the shutdown (%v)", d, handoff, shutdown)
	}
}

func sameLabels(a any, b map[string]any) bool {
	am, ok := a.(map[string]any)
	if !ok || len(am) == 0 {
		return false
	}
	for k, v := range am {
		if b[k] != v {
			return false
		}
	}
	return true
}
