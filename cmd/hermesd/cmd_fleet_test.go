package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devetcd"
	"github.com/hermesd/hermesd/internal/fleet"
)

// fleet status shows what etcd holds (nodes, owners, heads, keys a node
// lacks); fleet drain marks a node, bound to its lease.
func TestFleetCommands(t *testing.T) {
	t.Setenv(config.EnvPath, "")
	etcd, err := devetcd.Start(devetcd.Options{Dir: t.TempDir(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hermesd.yml")
	body := fmt.Sprintf(`state_dir: %s
http:
  listen: ""
walrus:
  publishers: ["http://127.0.0.1:1"]
  aggregators: ["http://127.0.0.1:1"]
encryption:
  key: {file: ./snapshot.key}
cluster:
  endpoints: [%s]
  fleet: ops
  node: n1
agents:
  - id: a1
    brain_dir: ./a1
`, filepath.Join(dir, "state"), etcd.Endpoints()[0])
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "snapshot.key"), []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Two nodes' records, as their daemons write them: n2 lacks a1's key.
	cli, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx := t.Context()
	put := func(node string, info fleet.NodeInfo) clientv3.LeaseID {
		g, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(info)
		if _, err := cli.Put(ctx, fleet.Prefix("ops")+"nodes/"+node, string(b), clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
		return g.ID
	}
	l1 := put("n1", fleet.NodeInfo{Node: "n1", Agents: []string{"a1"}, Started: time.Now()})
	put("n2", fleet.NodeInfo{Node: "n2", Agents: []string{}, Missing: map[string]string{"a1": "agents[0].key: no such file"}, Started: time.Now()})
	owner, _ := json.Marshal(fleet.Owner{Node: "n1", Lease: int64(l1)})
	if _, err := cli.Put(ctx, fleet.Prefix("ops")+"owners/a1", string(owner), clientv3.WithLease(l1)); err != nil {
		t.Fatal(err)
	}
	head, _ := json.Marshal(fleet.Head{Value: "blob-a1-7", Version: 7, Node: "n1"})
	if _, err := cli.Put(ctx, fleet.Prefix("ops")+"heads/a1", string(head)); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runCmd(t, "fleet", "status", "-config", cfg)
	if code != exitOK {
		t.Fatalf("fleet status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"fleet ops", "n1", "n2", "blob-a1-7", "n2 lacks its key (agents[0].key: no such file)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("fleet status does not say %q:\n%s", want, stdout)
		}
	}
	stdout, stderr, code = runCmd(t, "fleet", "status", "-config", cfg, "--json")
	var st fleet.Status
	if code != exitOK || json.Unmarshal([]byte(stdout), &st) != nil {
		t.Fatalf("fleet status --json: exit %d: %s %s", code, stdout, stderr)
	}
	if len(st.Nodes) != 2 || len(st.Agents) != 1 || st.Agents[0].Owner != "n1" || st.Agents[0].Head == nil || st.Agents[0].Head.Version != 7 {
		t.Fatalf("fleet status --json: %+v", st)
	}

	if _, stderr, code := runCmd(t, "fleet", "drain", "-config", cfg, "n1"); code != exitOK {
		t.Fatalf("fleet drain: exit %d: %s", code, stderr)
	}
	resp, err := cli.Get(ctx, fleet.Prefix("ops")+"drain/n1")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease != int64(l1) {
		t.Fatalf("drain key: %v %+v", err, resp)
	}
	if _, _, code := runCmd(t, "fleet", "drain", "-config", cfg, "n9"); code == exitOK {
		t.Fatal("draining a node that is not registered succeeded")
	}
	if _, _, code := runCmd(t, "fleet", "drain", "-config", cfg, "n1", "n2"); code != exitUsage {
		t.Fatalf("fleet drain of two nodes: exit %d", code)
	}

	// Without NODE: this node (cluster.node n1), and a wait until it owns
	// nothing — bounded, naming what is left.
	stdout, stderr, code = runCmd(t, "fleet", "drain", "-config", cfg, "-timeout", "1s")
	if code != exitFailure || !strings.Contains(stdout, "node n1 owns 1 agents") || !strings.Contains(stderr, "still owns 1 agents after 1s: a1") {
		t.Fatalf("drain of a node that keeps its agent: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := cli.Delete(ctx, fleet.Prefix("ops")+"owners/a1"); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCmd(t, "fleet", "drain", "-config", cfg)
	if code != exitOK || !strings.Contains(stdout, "node n1 owns no agent") {
		t.Fatalf("drain of a node that owns nothing: exit %d\n%s%s", code, stdout, stderr)
	}
}
