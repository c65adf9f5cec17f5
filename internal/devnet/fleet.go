package devnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermesd/hermesd/internal/devetcd"
)

// The fleet layout (docs/fleet.md): with Options.Nodes the devnet also
// runs etcd and writes one configuration per node, Dir/node-K.yml, each
// naming the same agents, keys, chain and Walrus, with its own state
// directory (Dir/node-K/state), brain directories (Dir/node-K/brains/ID),
// HTTP address and node name, and a cluster section that joins the fleet.

// DefaultFleet is the fleet name (etcd key prefix) of the devnet's nodes.
const DefaultFleet = "devnet"

// ClusterOptions configure the devnet's fleet.
type ClusterOptions struct {
	// Endpoints are the etcd client URLs the nodes use; empty starts one
	// embedded etcd member (a real one) on 127.0.0.1:EtcdPort with its
	// data in Dir/etcd.
	Endpoints []string
	// EtcdPort is the embedded member's client port (its peer port is the
	// next one); 0 picks free ports.
	EtcdPort int
	// EtcdLog receives the embedded member's warnings (nil: none).
	EtcdLog io.Writer
	// Fleet is cluster.fleet (default DefaultFleet).
	Fleet string
	// LeaseTTL and HandoffTimeout go into cluster.lease_ttl and
	// cluster.handoff_timeout when set (else hermesd's defaults apply).
	LeaseTTL, HandoffTimeout time.Duration
	// Hooks are cluster.hooks when set.
	Hooks *Hooks
}

// Hooks are the commands a node runs when it takes or gives up an agent.
type Hooks struct {
	OnAcquire, OnRelease []string
	Timeout              time.Duration
}

// Node is one node's configuration, as written.
type Node struct {
	Name       string // node-K
	ConfigPath string // Dir/node-K.yml (or where WriteNodeConfig put it)
	StateDir   string
	BrainRoot  string // the node's brain_dir of agent ID is BrainRoot/ID
	HTTP       string // http.listen ("" = off)
}

// NodeOptions say how one node reaches the world; "" keeps the devnet's
// own address. Tests put a proxy of their own in front of each node.
type NodeOptions struct {
	// Index is K of node-K (1-based).
	Index int
	// Dir holds the node's state and brains (default Dir/node-K); Path is
	// its configuration (default Dir/node-K.yml).
	Dir, Path string
	// Walrus is the publisher and aggregator, RPC the L1 chain, L2RPC the
	// L2's chain.
	Walrus, RPC, L2RPC string
	// HTTP is its http.listen (default: the devnet's HTTP port + K − 1, or
	// off when the devnet's is).
	HTTP *string
	// Hooks replace the cluster's hooks for this node.
	Hooks *Hooks
}

// startEtcd starts the embedded member when the nodes need one.
func (d *Devnet) startEtcd(o Options) error {
	if o.Nodes == 0 || len(o.Cluster.Endpoints) > 0 {
		return nil
	}
	var err error
	d.Etcd, err = devetcd.Start(devetcd.Options{
		Dir:        filepath.Join(d.Dir, "etcd"),
		ClientPort: o.Cluster.EtcdPort,
		Token:      "hermesd-devnet",
		Log:        o.Cluster.EtcdLog,
	})
	if err != nil {
		return fmt.Errorf("devnet etcd: %w", err)
	}
	return nil
}

// EtcdEndpoints are the etcd client URLs the nodes' configurations name.
func (d *Devnet) EtcdEndpoints() []string {
	if len(d.cluster.Endpoints) > 0 {
		return d.cluster.Endpoints
	}
	if d.Etcd != nil {
		return d.Etcd.Endpoints()
	}
	return nil
}

// NodeName is the name of node K.
func NodeName(k int) string { return "node-" + strconv.Itoa(k) }

// writeNodes writes Dir/node-1.yml … Dir/node-N.yml.
func (d *Devnet) writeNodes(o Options) error {
	for k := 1; k <= o.Nodes; k++ {
		n, err := d.WriteNodeConfig(NodeOptions{Index: k})
		if err != nil {
			return err
		}
		d.Nodes = append(d.Nodes, n)
	}
	return nil
}

// WriteNodeConfig writes the configuration of one node of the devnet's
// fleet.
func (d *Devnet) WriteNodeConfig(n NodeOptions) (Node, error) {
	if d.opts.Nodes == 0 && len(d.cluster.Endpoints) == 0 && d.Etcd == nil {
		return Node{}, errors.New("devnet: no fleet (Options.Nodes is 0 and no etcd endpoints are configured)")
	}
	if n.Index < 1 {
		return Node{}, fmt.Errorf("devnet: node index %d", n.Index)
	}
	name := NodeName(n.Index)
	if n.Dir == "" {
		n.Dir = filepath.Join(d.Dir, name)
	}
	if n.Path == "" {
		n.Path = filepath.Join(d.Dir, name+".yml")
	}
	node := Node{Name: name, ConfigPath: n.Path, StateDir: filepath.Join(n.Dir, "state"), BrainRoot: filepath.Join(n.Dir, "brains")}
	switch {
	case n.HTTP != nil:
		node.HTTP = *n.HTTP
	case d.opts.HTTPListen != "":
		host, port, err := net.SplitHostPort(d.opts.HTTPListen)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			return Node{}, fmt.Errorf("devnet: http address %q", d.opts.HTTPListen)
		}
		if p != 0 {
			p += n.Index - 1
		}
		node.HTTP = net.JoinHostPort(host, strconv.Itoa(p))
	}
	for _, sub := range []string{node.StateDir, node.BrainRoot} {
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return Node{}, fmt.Errorf("devnet: %w", err)
		}
	}
	hooks := d.cluster.Hooks
	if n.Hooks != nil {
		hooks = n.Hooks
	}
	cluster := map[string]any{
		"Endpoints":      d.EtcdEndpoints(),
		"Fleet":          d.cluster.Fleet,
		"Node":           name,
		"LeaseTTL":       d.cluster.LeaseTTL,
		"HandoffTimeout": d.cluster.HandoffTimeout,
		"Hooks":          hooks,
	}
	v := d.view(d.opts)
	v.StateDir, v.HTTP, v.Cluster = node.StateDir, node.HTTP, cluster
	for i := range v.Agents {
		v.Agents[i].BrainDir = filepath.Join(node.BrainRoot, v.Agents[i].ID)
	}
	if n.Walrus != "" {
		v.Walrus = n.Walrus
	}
	if n.RPC != "" {
		v.RPC = n.RPC
	}
	if n.L2RPC != "" && v.L2 != nil {
		v.L2["RPC"] = n.L2RPC
	}
	if err := d.render(v, node.ConfigPath); err != nil {
		return Node{}, err
	}
	return node, nil
}

// Fleet is cluster.fleet of the node configurations.
func (d *Devnet) Fleet() string { return d.cluster.Fleet }
