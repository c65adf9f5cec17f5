package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

const clusterBase = "state_dir: /var/lib/h\nwalrus: {publishers: [http://127.0.0.1:1], aggregators: [http://127.0.0.1:1]}\nencryption: {key: {file: /k}}\nagents:\n  - id: a\n    brain_dir: /srv/a\n"

func TestClusterDefaults(t *testing.T) {
	c, err := Parse(strings.NewReader(clusterBase+"cluster:\n  endpoints: [http://127.0.0.1:2379]\n  fleet: prod\n  node: n1\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cl := c.Cluster
	if cl.LeaseTTL.D() != 10*time.Second || cl.HandoffTimeout.D() != 2*time.Minute || cl.Hooks.Timeout.D() != 30*time.Second {
		t.Errorf("defaults: ttl %s handoff %s hooks %s", cl.LeaseTTL, cl.HandoffTimeout, cl.Hooks.Timeout)
	}
	if got := c.PointerIntervalOf(&c.Agents[0]); got != DefaultFleetPointerInterval {
		t.Errorf("pointer interval in a fleet = %s, want %s", got, DefaultFleetPointerInterval)
	}
	// A pointer_interval the file sets wins.
	c, err = Parse(strings.NewReader(clusterBase+"defaults: {pointer_interval: 5m}\ncluster: {endpoints: [http://e:2379], fleet: f}\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PointerIntervalOf(&c.Agents[0]); got != 5*time.Minute {
		t.Errorf("pointer interval set in the file = %s", got)
	}
	// Without a cluster nothing changes.
	c, err = Parse(strings.NewReader(clusterBase), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster != nil || c.PointerIntervalOf(&c.Agents[0]) != 10*time.Minute {
		t.Errorf("static mode: cluster %v, pointer interval %s", c.Cluster, c.PointerIntervalOf(&c.Agents[0]))
	}
}

func TestClusterNodeDefaultsToHostName(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/h.yml"
	body := strings.Replace(clusterBase, "/var/lib/h", dir+"/state", 1) + "cluster: {endpoints: [http://e:2379], fleet: f}\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	c, err := Load(p)
	if err != nil {
		if nodeNameRe.MatchString(strings.ToLower(host)) {
			t.Fatal(err)
		}
		return
	}
	if c.Cluster.Node != strings.ToLower(host) {
		t.Errorf("node = %q, want the host name %q", c.Cluster.Node, host)
	}
}

func TestClusterHooksOf(t *testing.T) {
	body := clusterBase + "    hooks: {on_release: [/bin/stop, '{agent}'], timeout: 5s}\n  - id: b\n    brain_dir: /srv/b\n" +
		"cluster:\n  endpoints: [http://e:2379]\n  fleet: f\n  hooks: {on_acquire: [/bin/start, '{agent}'], on_release: [/bin/halt]}\n"
	c, err := Parse(strings.NewReader(body), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	a, b := c.HooksOf(&c.Agents[0]), c.HooksOf(&c.Agents[1])
	if strings.Join(a.OnAcquire, " ") != "/bin/start {agent}" || strings.Join(a.OnRelease, " ") != "/bin/stop {agent}" || a.Timeout.D() != 5*time.Second {
		t.Errorf("agent a's hooks: %+v", a)
	}
	if strings.Join(b.OnRelease, " ") != "/bin/halt" || b.Timeout.D() != DefaultHookTimeout {
		t.Errorf("agent b's hooks: %+v", b)
	}
}

func TestClusterValidation(t *testing.T) {
	for _, tc := range []struct{ name, cluster, want string }{
		{"no endpoints", "{fleet: f}", "cluster.endpoints: required"},
		{"bad endpoint", "{endpoints: ['etcd:2379'], fleet: f}", "cluster.endpoints[0]: want an http:// or https:// URL"},
		{"credentials in URL", "{endpoints: ['http://u:p@e:2379'], fleet: f}", "credentials do not belong in the URL"},
		{"path", "{endpoints: ['http://e:2379/x'], fleet: f}", "want scheme://host:port only"},
		{"mixed", "{endpoints: ['http://e:2379', 'https://f:2379'], fleet: f}", "mixes http and https"},
		{"tls on http", "{endpoints: ['http://e:2379'], fleet: f, tls: {ca_file: /ca}}", "cluster.tls: set, but the endpoints are http://"},
		{"no fleet", "{endpoints: ['http://e:2379']}", "cluster.fleet"},
		{"bad fleet", "{endpoints: ['http://e:2379'], fleet: 'Prod/x'}", "is not a fleet name"},
		{"bad node", "{endpoints: ['http://e:2379'], fleet: f, node: 'a b'}", "is not a node name"},
		{"short ttl", "{endpoints: ['http://e:2379'], fleet: f, lease_ttl: 1s}", "cluster.lease_ttl: 1s is outside 2s..5m0s"},
		{"fractional ttl", "{endpoints: ['http://e:2379'], fleet: f, lease_ttl: 2500ms}", "not whole seconds"},
		{"user without password", "{endpoints: ['http://e:2379'], fleet: f, username: u}", "username and password go together"},
		{"cert without key", "{endpoints: ['https://e:2379'], fleet: f, tls: {cert_file: /c}}", "cert_file and key_file go together"},
		{"relative hook", "{endpoints: ['http://e:2379'], fleet: f, hooks: {on_acquire: [systemctl, start]}}", "must be an absolute path"},
		{"empty hook", "{endpoints: ['http://e:2379'], fleet: f, hooks: {on_release: []}}", "want a command and its arguments"},
		{"hook timeout", "{endpoints: ['http://e:2379'], fleet: f, hooks: {timeout: 1h}}", "cluster.hooks.timeout: 1h0m0s is outside"},
		{"short handoff", "{endpoints: ['http://e:2379'], fleet: f, handoff_timeout: 10ms}", "cluster.handoff_timeout: must be at least 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(clusterBase+"cluster: "+tc.cluster+"\n"), os.LookupEnv)
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	// Agent hooks without a cluster.
	c, err := Parse(strings.NewReader(clusterBase+"    hooks: {on_acquire: [/bin/x]}\n"), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "agents[0].hooks: only used with cluster") {
		t.Errorf("agent hooks without a cluster: %v", err)
	}
	// A password is a secret reference, never a value.
	if _, err := Parse(strings.NewReader(clusterBase+"cluster: {endpoints: ['http://e:2379'], fleet: f, username: u, password: hunter2}\n"), os.LookupEnv); err == nil ||
		!strings.Contains(err.Error(), "a secret is never written in the configuration") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("password as a value: %v", err)
	}
}
