package devnet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/fleettest"
)

// TestFleetLayout: with Nodes the devnet runs an etcd member and writes
// DIR/node-1.yml … node-N.yml: the same agents, keys, chains and Walrus,
// each node with its own state directory, brain directories
// (DIR/node-K/brains/ID), HTTP port and node name, and a cluster section
// naming the member. A devnet started again on its directory keeps
// etcd's data.
func TestFleetLayout(t *testing.T) {
	dir := t.TempDir()
	opts := devnet.Options{
		Dir:          dir,
		ChainDataDir: filepath.Join(dir, "chain"),
		HTTPListen:   "127.0.0.1:19797",
		Agents: []devnet.Agent{
			{ID: "auditor", ENSName: "auditor.hermes.eth"},
			{ID: "scout", ENSName: "scout.l2.hermes.eth", OnL2: true},
			{ID: "quiet"},
		},
		L2:      &devnet.L2Options{DataDir: filepath.Join(dir, "chain-l2")},
		Nodes:   3,
		Cluster: devnet.ClusterOptions{LeaseTTL: 3 * time.Second, Hooks: &devnet.Hooks{OnAcquire: []string{"/bin/true", "acquire"}, Timeout: 5 * time.Second}},
	}
	d, err := devnet.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	single := d.Config
	if len(d.Nodes) != 3 {
		t.Fatalf("%d nodes", len(d.Nodes))
	}
	var states, https []string
	for k, n := range d.Nodes {
		name := fmt.Sprintf("node-%d", k+1)
		if n.Name != name || n.ConfigPath != filepath.Join(dir, name+".yml") {
			t.Fatalf("node %d: %+v", k+1, n)
		}
		c, cs := fleettest.LoadNodeConfig(t, n.ConfigPath)
		if cs.Node != name || cs.Fleet != devnet.DefaultFleet || !slices.Equal(cs.Endpoints, d.EtcdEndpoints()) || cs.LeaseTTL != "3s" ||
			!slices.Equal(cs.Hooks.OnAcquire, []string{"/bin/true", "acquire"}) || cs.Hooks.OnRelease != nil || cs.Hooks.Timeout != "5s" {
			t.Errorf("%s: cluster %+v", name, cs)
		}
		if c.StateDir != filepath.Join(dir, name, "state") || c.StateDir != n.StateDir {
			t.Errorf("%s: state_dir %s", name, c.StateDir)
		}
		states, https = append(states, c.StateDir), append(https, c.HTTP.Listen)
		if want := fmt.Sprintf("127.0.0.1:%d", 19797+k); c.HTTP.Listen != want {
			t.Errorf("%s: http.listen %s, want %s", name, c.HTTP.Listen, want)
		}
		if len(c.Agents) != len(single.Agents) {
			t.Fatalf("%s: %d agents, want %d", name, len(c.Agents), len(single.Agents))
		}
		for i, a := range c.Agents {
			s := single.Agents[i]
			if a.ID != s.ID || a.ENSName != s.ENSName || a.BrainDir != filepath.Join(dir, name, "brains", a.ID) ||
				(c.RecordsOf(&a) == nil) != (single.RecordsOf(&s) == nil) {
				t.Errorf("%s: agent %+v, single daemon's %+v", name, a, s)
			}
		}
		if c.Encryption.Key != single.Encryption.Key || c.Chain.Signer != single.Chain.Signer || c.Chain.RPC != single.Chain.RPC ||
			!slices.Equal(c.Walrus.Publishers, single.Walrus.Publishers) {
			t.Errorf("%s: keys or endpoints differ from the single daemon's", name)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(states)))) != 3 || len(slices.Compact(slices.Sorted(slices.Values(https)))) != 3 {
		t.Errorf("nodes share a state directory or an HTTP address: %v %v", states, https)
	}

	put := func(d *devnet.Devnet, v string) string {
		t.Helper()
		cl, err := clientv3.New(clientv3.Config{Endpoints: d.EtcdEndpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		r, err := cl.Get(ctx, "/test/kept")
		if err != nil {
			t.Fatal(err)
		}
		if v != "" {
			if _, err := cl.Put(ctx, "/test/kept", v); err != nil {
				t.Fatal(err)
			}
		}
		if len(r.Kvs) == 0 {
			return ""
		}
		return string(r.Kvs[0].Value)
	}
	put(d, "one")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(d.Nodes[1].ConfigPath); err != nil {
		t.Fatal(err)
	}
	if d, err = devnet.Start(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := put(d, ""); got != "one" {
		t.Errorf("etcd after a restart: %q, want one", got)
	}
	if _, err := os.Stat(d.Nodes[1].ConfigPath); err != nil {
		t.Errorf("a restart did not write node-2's configuration again: %v", err)
	}
}

// TestNoFleetByDefault: without Nodes nothing of the fleet exists.
func TestNoFleetByDefault(t *testing.T) {
	dir := t.TempDir()
	d, err := devnet.Start(t.Context(), devnet.Options{Dir: dir, Agents: []devnet.Agent{{ID: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Etcd != nil || len(d.Nodes) != 0 || len(d.EtcdEndpoints()) != 0 {
		t.Fatalf("a fleet without Nodes: etcd %v, nodes %v", d.Etcd, d.Nodes)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "node-*")); len(m) > 0 {
		t.Fatalf("wrote %v", m)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd")); !os.IsNotExist(err) {
		t.Fatalf("an etcd directory: %v", err)
	}
	if _, err := d.WriteNodeConfig(devnet.NodeOptions{Index: 1}); err == nil {
		t.Fatal("WriteNodeConfig without a fleet succeeded")
	}
}
