package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devetcd"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/fleet"
	"github.com/hermesd/hermesd/internal/wait"
)

// fleetConfig is the devnet's configuration as node name of a fleet on
// etcd: its own state directory and brains.
func fleetConfig(t *testing.T, w *world, etcd *devetcd.Cluster, name string) *config.Config {
	t.Helper()
	c := *w.dn.Config
	dir := filepath.Join(t.TempDir(), name)
	c.StateDir = filepath.Join(dir, "state")
	c.Agents = append([]config.Agent(nil), c.Agents...)
	for i := range c.Agents {
		c.Agents[i].BrainDir = filepath.Join(dir, "brains", c.Agents[i].ID)
	}
	c.Cluster = &config.Cluster{Endpoints: etcd.Endpoints(), Fleet: "test", Node: name,
		LeaseTTL: config.Duration(2 * time.Second), HandoffTimeout: config.Duration(time.Minute)}
	// The record is written at once, then not again for an hour: the
	// fleet head alone carries the later snapshots.
	c.Defaults.PointerInterval = config.Duration(time.Hour)
	c.HTTP.Socket = ""
	return &c
}

// startEtcd runs one etcd member until the test ends.
func startEtcd(t *testing.T) *devetcd.Cluster {
	t.Helper()
	c, err := devetcd.Start(devetcd.Options{Dir: t.TempDir(), NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// etcdClient is a client of c, closed when the test ends.
func etcdClient(t *testing.T, c *devetcd.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func startNode(t *testing.T, cfg *config.Config) *Daemon {
	t.Helper()
	d, err := New(t.Context(), cfg, testLogger(t), compose.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Start(context.Background())
	t.Cleanup(func() { closeAtCleanup(d) })
	return d
}

func runs(d *Daemon, id string) bool {
	for _, a := range d.owned() {
		if a.ID() == id {
			return true
		}
	}
	return false
}

func fleetHead(t *testing.T, etcd *devetcd.Cluster, id string) *fleet.Head {
	t.Helper()
	st, err := fleet.Read(t.Context(), etcdClient(t, etcd), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Agents {
		if a.ID == id {
			return a.Head
		}
	}
	return nil
}

// An agent runs on one node of a fleet; its fleet head follows every
// verified snapshot while the ENS record waits out pointer_interval; a
// drained node hands it off (last snapshot, fleet head, release) and the
// taker restores the fleet head — the newest snapshot, not the older
// record — byte for byte. A node whose etcd goes silent fences itself:
// it stores nothing, says it is not ready, counts the refusals, and
// catches up once etcd answers.
func TestFleetHandOffAndFence(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	etcd := startEtcd(t)
	cfgA, cfgB := fleetConfig(t, w, etcd, "node-a"), fleetConfig(t, w, etcd, "node-b")
	brainA, brainB := cfgA.Agents[0].BrainDir, cfgB.Agents[0].BrainDir
	seedBrain(t, brainA)
	token := withToken(t, cfgA)
	// Both nodes' hooks append to one log, with the time: the hand-off's
	// order is read from it.
	hookLog := filepath.Join(t.TempDir(), "hooks.log")
	hook := filepath.Join(t.TempDir(), "hook.sh")
	writeFile(t, hook, "#!/bin/sh\necho \"$(date +%s%N) $1 start $2\" >> "+hookLog+"\necho \"$(date +%s%N) $1 end $2\" >> "+hookLog+"\n", 0o755)
	for _, c := range []*config.Config{cfgA, cfgB} {
		c.Cluster.Hooks = config.Hooks{OnAcquire: []string{hook, "acquire", "{node}"}, OnRelease: []string{hook, "release", "{node}"},
			Timeout: config.Duration(30 * time.Second)}
	}

	a := startNode(t, cfgA)
	wait.For(t, "node-a runs alpha", func() bool { return runs(a, "alpha") })
	agA, _ := a.Agent("alpha")
	first := published(t, a, "alpha")
	wait.For(t, "the fleet head names the first snapshot", func() bool {
		h := fleetHead(t, etcd, "alpha")
		return h != nil && h.Value == first
	})

	// A second snapshot: the fleet head names it, the record does not.
	writeFile(t, filepath.Join(brainA, "memory", "later.md"), "learnt after the record was written\n", 0o644)
	var second string
	wait.For(t, "a second snapshot in the fleet head", func() bool {
		s := agA.Status()
		if s.Last == nil || s.Last.BlobID == first {
			return false
		}
		h := fleetHead(t, etcd, "alpha")
		second = s.Last.BlobID
		return h != nil && h.Value == second && h.Published == first
	})
	if got := readPointer(t, w, "alpha.hermes.eth"); got != first {
		t.Fatalf("the record holds %s, want the first snapshot %s (pointer_interval)", got, first)
	}
	want := tree(t, brainA)

	// /v1/fleet says who owns it.
	resp, err := http.Get("http://" + a.Addr() + "/v1/fleet")
	if err != nil {
		t.Fatal(err)
	}
	var st fleet.Status
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if resp.StatusCode != 200 || st.Node != "node-a" || len(st.Agents) != 1 || st.Agents[0].Owner != "node-a" {
		t.Fatalf("/v1/fleet: %d %+v", resp.StatusCode, st)
	}
	if len(st.Nodes) != 1 || st.Nodes[0].Version != "dev" {
		t.Fatalf("/v1/fleet: the node's registration does not say its version: %+v", st.Nodes)
	}

	// node-b joins; node-a is drained: alpha moves, by hand-off.
	b := startNode(t, cfgB)
	if err := fleet.Drain(t.Context(), etcdClient(t, etcd), "test", "node-a"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "node-b runs alpha", func() bool { return runs(b, "alpha") && !runs(a, "alpha") })
	agB, _ := b.Agent("alpha")
	wait.For(t, "alpha ready on node-b", func() bool { ok, _ := healthy(agB.Status()); return ok })
	if s := agB.Status(); s.Last == nil || s.Last.BlobID != second {
		t.Fatalf("node-b's last snapshot %+v, want the fleet head %s", s.Last, second)
	}
	if got := tree(t, brainB); !maps.Equal(got, want) {
		t.Fatalf("node-b's brain differs from node-a's last upload:\n got %v\nwant %v", keys(got), keys(want))
	}
	if n := testutil.ToFloat64(a.fleet.obs.handoffs.WithLabelValues("ok")); n != 1 {
		t.Fatalf("node-a counted %v hand-offs", n)
	}
	// The giver's on_release returned before the taker's on_acquire began.
	var hooks string
	wait.For(t, "node-b's on_acquire", func() bool {
		hb, _ := os.ReadFile(hookLog)
		hooks = string(hb)
		return strings.Contains(hooks, " acquire end node-b\n")
	})
	released := strings.Index(hooks, " release end node-a\n")
	acquired := strings.Index(hooks, " acquire start node-b\n")
	if released < 0 || acquired < 0 || released > acquired {
		t.Fatalf("hooks ran out of order:\n%s", hooks)
	}
	// Receipts for alpha sent to node-a, which no longer runs it, are
	// refused, naming the owner: a log written there would fork alpha's.
	ans := do(t, a, call{path: "/v1/agents/alpha/receipts", body: strings.NewReader("{}\n"), ctype: "application/x-ndjson", auth: "Bearer " + token})
	if ans.code != http.StatusConflict || !strings.Contains(string(ans.body), "owned by node node-b") {
		t.Fatalf("receipts POSTed to a node that does not run the agent: %d %s", ans.code, ans.body)
	}

	// etcd goes silent: node-b fences itself at half the TTL, then, a
	// whole TTL silent, drops the agent without writing.
	etcd.Stop(0)
	wait.For(t, "node-b fenced", func() bool { return b.fleet.node.Fenced() })
	if b.Ready() {
		t.Fatal("a fenced node says it is ready")
	}
	wait.For(t, "node-b drops alpha", func() bool { return !runs(b, "alpha") })
	before := stores(t, w)
	writeFile(t, filepath.Join(brainB, "memory", "fenced.md"), "written while fenced\n", 0o644)
	if err := b.fleet.gate.Check(compose.WriteWalrus); err == nil {
		t.Fatal("the fence lets a store through")
	}
	if n := testutil.ToFloat64(b.fleet.obs.refused.WithLabelValues(compose.WriteWalrus)); n < 1 {
		t.Fatalf("refused stores counted: %v", n)
	}
	if after := stores(t, w); after != before {
		t.Fatalf("a fenced node stored %d blobs", after-before)
	}

	// etcd answers again, the lease alive: node-b resumes alpha, stores
	// the change and writes the fleet head.
	if err := etcd.RestartAll(0); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "node-b resumes alpha", func() bool { return runs(b, "alpha") })
	wait.For(t, "the change made while fenced in the fleet head", func() bool {
		s := agB.Status()
		if s.Last == nil || s.Last.BlobID == second {
			return false
		}
		h := fleetHead(t, etcd, "alpha")
		return h != nil && h.Value == s.Last.BlobID && h.Node == "node-b"
	})
	if _, err := os.Stat(filepath.Join(brainA, "memory", "fenced.md")); err == nil {
		t.Fatal("node-a's brain changed")
	}
}

func keys(m map[string]fileInfo) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s(%d)", k, len(v.content)))
	}
	return out
}
