package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Cluster puts this hermesd in a fleet: nodes that share their agents
// through etcd (docs/design.md §12). Each agent runs on exactly one node
// at a time, owned through an etcd key bound to the node's lease; agents
// move between nodes by hand-off. Without it hermesd runs every
// configured agent itself (the single-node default, like LiteFS's static
// lease).
type Cluster struct {
	// Endpoints are the etcd client URLs (http:// or https://).
	Endpoints []string `yaml:"endpoints"`
	// Fleet names the fleet: the key prefix /hermesd/<fleet>/ in etcd.
	// Nodes of one fleet must share the same agents and keys.
	Fleet string `yaml:"fleet"`
	// Node is this node's name in the fleet (default: the host name,
	// lower-cased). Two live processes may not share one.
	Node string `yaml:"node"`
	// LeaseTTL is the life of the node's etcd lease. A node that cannot
	// renew it stops writing after LeaseTTL/2 of silence (it fences
	// itself); another node may take its agents only after LeaseTTL.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// TLS configures the connection to etcd.
	TLS ClusterTLS `yaml:"tls"`
	// Username and Password authenticate to etcd (both or neither).
	Username string    `yaml:"username"`
	Password SecretRef `yaml:"password"`
	// HandoffTimeout bounds one hand-off by the giver: its on_release
	// hook, the last snapshot, the fleet head. Past it the hand-off is
	// abandoned (the agent keeps running here) and tried again later;
	// nothing is lost.
	HandoffTimeout Duration `yaml:"handoff_timeout"`
	// Hooks are the commands that start and stop an agent's runtime
	// where hermesd owns the agent (agents[].hooks overrides them).
	Hooks Hooks `yaml:"hooks"`
}

// ClusterTLS is the client side of TLS to etcd: the CA that signed the
// members' certificates, and a client certificate when etcd asks for one.
type ClusterTLS struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	// KeyFile is the client certificate's private key: a secret file,
	// under the same rule as every secret file.
	KeyFile string `yaml:"key_file"`
}

// IsZero reports whether no TLS setting is given.
func (t ClusterTLS) IsZero() bool { return t == ClusterTLS{} }

// Hooks are commands run as an agent's ownership changes, as argv lists
// (no shell): on_acquire once this node owns the agent and its brain is
// in place, before hermesd watches it; on_release when ownership ends (a
// hand-off, before the last snapshot; a stop; a lost lease), and it must
// have stopped the runtime's writes by the time it returns. Each argument
// may hold {agent}, {brain_dir}, {node} and {fleet}, replaced by their
// values; the same values are in the environment as HERMESD_AGENT,
// HERMESD_BRAIN_DIR, HERMESD_NODE, HERMESD_FLEET, with HERMESD_EVENT
// (acquire or release) and HERMESD_ENS_NAME.
type Hooks struct {
	OnAcquire []string `yaml:"on_acquire"`
	OnRelease []string `yaml:"on_release"`
	// Timeout bounds one run of a hook; a hook still running then is
	// killed (its process group), and the transition goes on.
	Timeout Duration `yaml:"timeout"`
}

// Cluster defaults and bounds.
const (
	// DefaultLeaseTTL is LiteFS's Consul lease TTL. It fences a node
	// after 5 s of silence, which rides out an etcd leader election
	// (about a second at etcd's defaults) and a long GC pause, and lets
	// a dead node's agents run elsewhere 10 s after its last renewal.
	DefaultLeaseTTL = 10 * time.Second
	// MinLeaseTTL and MaxLeaseTTL bound lease_ttl: etcd grants leases in
	// whole seconds, and below 2 s a renewal every TTL/5 would fence a
	// node on a scheduling hiccup.
	MinLeaseTTL = 2 * time.Second
	MaxLeaseTTL = 5 * time.Minute
	// DefaultHandoffTimeout bounds a hand-off: the runtime's stop, one
	// incremental snapshot (its small packs stored at once rather than
	// after walrus.batch_window), one etcd write.
	DefaultHandoffTimeout = 2 * time.Minute
	// DefaultHookTimeout bounds one run of a hook.
	DefaultHookTimeout = 30 * time.Second
	// MaxHookTimeout bounds hooks.timeout.
	MaxHookTimeout = 10 * time.Minute
	// DefaultFleetPointerInterval is defaults.pointer_interval when
	// cluster is set and the file does not say: the fleet head in etcd
	// carries every verified snapshot to the next owner, so the ENS
	// record is what only a machine outside the fleet, or a fleet that
	// lost etcd, restores from (docs/cost.md#in-a-fleet).
	DefaultFleetPointerInterval = time.Hour
	// maxEndpoints bounds cluster.endpoints.
	maxEndpoints = 32
	// maxHookArgs bounds a hook's argv.
	maxHookArgs = 64
)

// nodeNameRe is a fleet or node name: a key component in etcd, a label in
// metrics.
var nodeNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// fillClusterDefaults gives a cluster section the defaults of the fields
// it leaves out, and, when the file does not set
// defaults.pointer_interval, the fleet's pointer interval.
func (c *Config) fillClusterDefaults(doc *yaml.Node) {
	cl := c.Cluster
	if cl == nil {
		return
	}
	if cl.LeaseTTL == 0 {
		cl.LeaseTTL = Duration(DefaultLeaseTTL)
	}
	if cl.HandoffTimeout == 0 {
		cl.HandoffTimeout = Duration(DefaultHandoffTimeout)
	}
	if cl.Hooks.Timeout == 0 {
		cl.Hooks.Timeout = Duration(DefaultHookTimeout)
	}
	if !hasKey(doc, "defaults", "pointer_interval") {
		c.Defaults.PointerInterval = Duration(DefaultFleetPointerInterval)
	}
}

// fillNodeName names the node after the host when cluster.node is not
// set (lower-cased; validation refuses a host name that is no node name).
func (c *Config) fillNodeName() {
	if c.Cluster == nil || c.Cluster.Node != "" {
		return
	}
	if h, err := os.Hostname(); err == nil {
		c.Cluster.Node = strings.ToLower(h)
	}
}

// hasKey reports whether the mapping at path in doc has the key.
func hasKey(doc *yaml.Node, path ...string) bool {
	n := doc
	if n != nil && n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return false
		}
		n = n.Content[0]
	}
	for _, k := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return false
		}
		n = next
	}
	return true
}

// HooksOf are the hooks of agent a: its own where it sets them, else the
// cluster's (none without a cluster).
func (c *Config) HooksOf(a *Agent) Hooks {
	var h Hooks
	if c.Cluster != nil {
		h = c.Cluster.Hooks
	}
	if a.Hooks == nil {
		return h
	}
	if a.Hooks.OnAcquire != nil {
		h.OnAcquire = a.Hooks.OnAcquire
	}
	if a.Hooks.OnRelease != nil {
		h.OnRelease = a.Hooks.OnRelease
	}
	if a.Hooks.Timeout != 0 {
		h.Timeout = a.Hooks.Timeout
	}
	return h
}

func (c *Config) validateCluster(v *validator) {
	cl := c.Cluster
	if cl == nil {
		for i := range c.Agents {
			if c.Agents[i].Hooks != nil {
				v.add(fmt.Sprintf("agents[%d].hooks", i), "only used with cluster (a fleet of nodes)")
			}
		}
		return
	}
	switch n := len(cl.Endpoints); {
	case n == 0:
		v.add("cluster.endpoints", "required: the etcd client URLs")
	case n > maxEndpoints:
		v.add("cluster.endpoints", "%d endpoints; at most %d", n, maxEndpoints)
	}
	schemes := map[string]bool{}
	for i, e := range cl.Endpoints {
		f := fmt.Sprintf("cluster.endpoints[%d]", i)
		u, err := url.Parse(e)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			v.add(f, "want an http:// or https:// URL of an etcd member, such as https://etcd-0:2379")
			continue
		case u.User != nil:
			v.add(f, "credentials do not belong in the URL (use cluster.username and cluster.password)")
		case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
			v.add(f, "want scheme://host:port only")
		}
		schemes[u.Scheme] = true
	}
	if len(schemes) > 1 {
		v.add("cluster.endpoints", "mixes http and https")
	}
	if schemes["http"] && !cl.TLS.IsZero() {
		v.add("cluster.tls", "set, but the endpoints are http://")
	}
	if !nodeNameRe.MatchString(cl.Fleet) {
		v.add("cluster.fleet", "%s is not a fleet name: 1-63 of a-z 0-9 . _ -, starting with a letter or digit", shown(cl.Fleet))
	}
	if cl.Node != "" && !nodeNameRe.MatchString(cl.Node) {
		v.add("cluster.node", "%s is not a node name: 1-63 of a-z 0-9 . _ -, starting with a letter or digit (the host name is the default)", shown(cl.Node))
	}
	switch ttl := cl.LeaseTTL.D(); {
	case ttl < MinLeaseTTL || ttl > MaxLeaseTTL:
		v.add("cluster.lease_ttl", "%s is outside %s..%s", ttl, MinLeaseTTL, MaxLeaseTTL)
	case ttl%time.Second != 0:
		v.add("cluster.lease_ttl", "%s is not whole seconds (etcd grants leases in seconds)", ttl)
	}
	if cl.HandoffTimeout.D() < time.Second {
		v.add("cluster.handoff_timeout", "must be at least 1s")
	}
	if (cl.Username == "") != cl.Password.IsZero() {
		v.add("cluster.username", "username and password go together")
	}
	if cl.Password.Keystore != "" {
		v.add("cluster.password.keystore", "not supported here; use file or env")
	}
	for _, f := range []struct{ name, path string }{
		{"ca_file", cl.TLS.CAFile}, {"cert_file", cl.TLS.CertFile}, {"key_file", cl.TLS.KeyFile},
	} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			v.add("cluster.tls."+f.name, "must be an absolute path")
		}
	}
	if (cl.TLS.CertFile == "") != (cl.TLS.KeyFile == "") {
		v.add("cluster.tls.cert_file", "cert_file and key_file go together")
	}
	checkHooks(v, "cluster.hooks", cl.Hooks)
	for i := range c.Agents {
		if h := c.Agents[i].Hooks; h != nil {
			checkHooks(v, fmt.Sprintf("agents[%d].hooks", i), *h)
		}
	}
}

// checkHooks checks one hooks section.
func checkHooks(v *validator, field string, h Hooks) {
	for _, hk := range []struct {
		name string
		argv []string
	}{{"on_acquire", h.OnAcquire}, {"on_release", h.OnRelease}} {
		f := field + "." + hk.name
		switch {
		case hk.argv == nil:
			continue
		case len(hk.argv) > maxHookArgs:
			v.add(f, "%d arguments; at most %d", len(hk.argv), maxHookArgs)
		case len(hk.argv) == 0 || hk.argv[0] == "":
			v.add(f, "want a command and its arguments, such as [/usr/bin/systemctl, start, agent@{agent}]")
		case !filepath.IsAbs(hk.argv[0]):
			v.add(f, "%s: the command must be an absolute path (hooks run without a shell and without $PATH)", shown(hk.argv[0]))
		}
		for j, a := range hk.argv {
			if strings.ContainsRune(a, 0) {
				v.add(fmt.Sprintf("%s[%d]", f, j), "contains a NUL byte")
			}
		}
	}
	if t := h.Timeout.D(); t != 0 && (t < time.Second || t > MaxHookTimeout) {
		v.add(field+".timeout", "%s is outside 1s..%s", t, MaxHookTimeout)
	}
}
