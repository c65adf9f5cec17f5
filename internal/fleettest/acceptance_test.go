//go:build fleetcore

// The fleet's acceptance tests (issue 35), on the harness: real etcd
// members, the devnet, real hermesd processes. They need the fleet core
// (the daemon's cluster mode, hermesd fleet drain); until it is merged
// they build only with -tags fleetcore (go vet -tags fleetcore keeps
// them compiling). Merging the core removes the tag.

package fleettest

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// restoreBound is how long a take-over may take beyond the lease TTL:
// restoring the agents from their fleet heads on a loaded 2-core machine.
const restoreBound = 30 * time.Second

// editAll changes every agent's brain on its owner and waits until every
// change is in its fleet head; it returns each brain's tree as written.
func editAll(t *testing.T, c *Cluster, agents []string, round int) map[string]map[string]string {
	t.Helper()
	want := map[string]map[string]string{}
	hashes := map[string]string{}
	c.WaitRunning(2*time.Minute, agents...)
	for _, a := range agents {
		hashes[a] = c.Edit(a, "memory/log.md", fmt.Sprintf("round %d for %s\n", round, a))
		want[a] = Tree(t, c.Owner(a).Brain(a))
	}
	for _, a := range agents {
		c.WaitHead(a, hashes[a], 2*time.Minute)
	}
	return want
}

// sameBrains checks that every agent's brain on its owner is want's.
func sameBrains(t *testing.T, c *Cluster, want map[string]map[string]string) {
	t.Helper()
	for _, a := range slices.Sorted(maps.Keys(want)) {
		n := c.Owner(a)
		if n == nil {
			t.Errorf("%s: no owner", a)
			continue
		}
		if d := Diff(want[a], Tree(t, n.Brain(a))); len(d) > 0 {
			t.Errorf("%s on %s differs from its last upload: %v", a, n.Name, d)
		}
	}
}

// waitRestored waits until each agent's brain on its owner has the
// bundle hash of heads[agent] (owned is not yet restored).
func waitRestored(t *testing.T, c *Cluster, agents []string, heads map[string]Head, limit time.Duration) {
	t.Helper()
	for _, a := range agents {
		c.WaitState(limit, a+" restored from its fleet head", func(st State) bool {
			n := c.Owner(a)
			return n != nil && BundleHash(t, n.Brain(a)) == heads[a].BundleHash
		})
	}
}

// balance is max/min agents per live node.
func balance(t *testing.T, c *Cluster, nodes int) float64 {
	t.Helper()
	per := c.PerNode()
	if len(per) != nodes {
		t.Fatalf("agents on %d nodes, want %d: %v", len(per), nodes, per)
	}
	lo, hi := 1<<30, 0
	for _, k := range per {
		lo, hi = min(lo, k), max(hi, k)
	}
	return float64(hi) / float64(lo)
}

// TestFleetOwnsAndBalances: 3 nodes, 300 agents: every agent owned by
// exactly one node within 30 s of the start, max/min ≤ 1.5 per node.
func TestFleetOwnsAndBalances(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 300, BrainBytes: 1 << 10})
	// Within 30 s of the nodes' start, not of this call.
	c.WaitOwned(time.Until(c.start.Add(30 * time.Second)))
	took := time.Since(c.start)
	if b := balance(t, c, 3); b > 1.5 {
		t.Errorf("balance max/min = %.2f (%v), want ≤ 1.5", b, c.PerNode())
	}
	t.Logf("300 agents owned %v after the nodes started; per node %v", took, c.PerNode())
	c.Check()
}

// TestFleetNodes: each node runs on its own DIR/node-K.yml; an agent's
// owner logs "snapshot uploaded and verified … agent=ID" as a single
// daemon does, and `hermesd pointer get -config node-K.yml NAME` reads the
// same record from every node.
func TestFleetNodes(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 6})
	c.WaitOwned(time.Minute)
	editAll(t, c, c.Agents(), 1)
	for _, a := range c.Agents() {
		n := c.Owner(a)
		c.WaitState(time.Minute, a+"'s upload logged on "+n.Name, func(State) bool {
			for l := range strings.Lines(n.Log()) {
				if strings.Contains(l, "snapshot uploaded and verified") && strings.Contains(l, "agent="+a) {
					return true
				}
			}
			return false
		})
	}
	ac, err := c.Devnet.Config.Agent("agent-001")
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, n := range c.Nodes() {
		out, err := exec.Command(c.bin, "pointer", "get", "-config", n.Config.ConfigPath, ac.ENSName).CombinedOutput()
		if err != nil {
			t.Fatalf("hermesd pointer get on %s: %v\n%s", n.Name, err, out)
		}
		values = append(values, strings.TrimSpace(string(out)))
	}
	if len(slices.Compact(slices.Clone(values))) != 1 || values[0] == "" {
		t.Errorf("pointer get from the three nodes: %q", values)
	}
}

// TestFleetKill9: a node killed -9: its agents run elsewhere within the
// lease TTL plus their restore, each restored from its fleet head (newer
// than its ENS record, which pointer_interval holds back), byte-identical
// to the dead node's last upload; nothing uploaded is lost.
func TestFleetKill9(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 12, PointerInterval: time.Hour})
	c.WaitOwned(time.Minute)
	editAll(t, c, c.Agents(), 1) // published: the first write of each record goes at once
	want := editAll(t, c, c.Agents(), 2)
	victim := c.Owner("agent-001")
	var its []string
	for a, o := range c.State().Owners {
		if o == victim.Name {
			its = append(its, a)
		}
	}
	heads := c.State().Heads
	killed := time.Now()
	victim.Kill9()
	took := c.WaitState(c.opts.LeaseTTL+restoreBound, "the dead node's agents owned elsewhere", func(st State) bool {
		for _, a := range its {
			if o := st.Owners[a]; o == "" || o == victim.Name {
				return false
			}
		}
		return true
	})
	waitRestored(t, c, its, heads, restoreBound)
	t.Logf("%d agents of %s taken over in %v (+ restore); lease TTL %v", len(its), victim.Name, took, c.opts.LeaseTTL)
	h := c.History()
	for _, a := range its {
		if d := Diff(want[a], Tree(t, c.Owner(a).Brain(a))); len(d) > 0 {
			t.Errorf("%s differs from the dead node's last upload: %v", a, d)
		}
		for _, r := range h.Records {
			// (The taker publishes the head it restored: only a record
			// written before the kill counts.)
			if r.Agent == a && r.Value == heads[a].Value && r.Sent.Before(killed) {
				t.Errorf("%s: the ENS record named the head before the kill; the test shows nothing about the fleet head", a)
			}
		}
	}
	if vs := h.Check(); len(vs) > 0 {
		t.Errorf("%s", Report(vs))
	}
}

// TestFleetSIGSTOP: a node frozen for 3 × TTL writes nothing after its
// lease expired (Walrus stores, chain transactions, etcd writes), its
// agents run elsewhere meanwhile, and thawed it rejoins cleanly.
func TestFleetSIGSTOP(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 9})
	c.WaitOwned(time.Minute)
	want := editAll(t, c, c.Agents(), 1)
	n := c.Node(2)
	n.Pause()
	frozen := time.Now()
	c.WaitState(c.opts.LeaseTTL+restoreBound, n.Name+"'s lease expired and its agents owned elsewhere", func(st State) bool {
		if _, live := st.Nodes[n.Name]; live {
			return false
		}
		for _, o := range st.Owners {
			if o == n.Name {
				return false
			}
		}
		return len(st.Owners) == len(c.agents)
	})
	// The fault: frozen for three lease TTLs in all.
	<-time.After(time.Until(frozen.Add(3 * c.opts.LeaseTTL)))
	thawed := time.Now()
	n.Resume()
	c.WaitState(time.Minute, n.Name+" registered again", func(st State) bool { _, ok := st.Nodes[n.Name]; return ok })
	c.WaitOwned(time.Minute)
	// Wherever each agent is now (moved off the frozen node, perhaps back
	// to it since), its brain is the one last uploaded.
	waitRestored(t, c, c.Agents(), c.State().Heads, restoreBound)
	sameBrains(t, c, want)
	editAll(t, c, c.Agents(), 2)
	h := c.Check() // no write outside its leases, no record or head by a non-owner
	var expiry time.Time
	for _, s := range h.Leases {
		if s.Node == n.Name && !s.To.IsZero() && s.To.After(frozen) {
			expiry = s.To
			break
		}
	}
	if expiry.IsZero() {
		t.Fatal("no lease of the frozen node ended")
	}
	rejoined := thawed
	for _, s := range h.Leases {
		if s.Node == n.Name && s.From.After(expiry) {
			rejoined = s.From
			break
		}
	}
	for _, w := range h.Writes {
		if w.Node == n.Name && w.At.After(expiry.Add(h.Slack)) && w.At.Before(rejoined) {
			t.Errorf("%s wrote after its lease expired: %s at %s", n.Name, w.Kind, stamp(w.At))
		}
	}
	for _, hw := range h.Heads {
		if hw.Node == n.Name && hw.At.After(expiry) && hw.At.Before(rejoined) {
			t.Errorf("%s wrote a fleet head after its lease expired: %s", n.Name, hw.Value)
		}
	}
	t.Logf("%s frozen %v; lease expired %v after the freeze; rejoined %v after the thaw; writes by it: %v",
		n.Name, thawed.Sub(frozen).Round(time.Millisecond), expiry.Sub(frozen).Round(time.Millisecond),
		rejoined.Sub(thawed).Round(time.Millisecond), n.Writes(frozen))
}

// TestFleetEtcdMemberLoss: one of three etcd members down (the leader):
// no agent changes owner, edits go on.
func TestFleetEtcdMemberLoss(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 9})
	c.WaitOwned(time.Minute)
	before := c.State().Tokens
	leader := 0
	for i, m := range c.Etcd.Members() {
		if m.IsLeader() {
			leader = i
		}
	}
	c.Etcd.Stop(leader)
	want := editAll(t, c, c.Agents(), 1) // heads still written through the other two
	// The fault lasts three lease TTLs: any renewal that failed for it
	// would have cost its node the lease by then.
	<-time.After(3 * c.opts.LeaseTTL)
	if after := c.State().Tokens; !maps.Equal(before, after) {
		t.Errorf("owners changed with one member of three down: %v → %v", before, after)
	}
	if err := c.Etcd.Restart(leader); err != nil {
		t.Fatal(err)
	}
	sameBrains(t, c, want)
	c.Check()
}

// majorityLoss is how long the majority is lost (the acceptance bar:
// 60 s, twenty lease TTLs).
const majorityLoss = 60 * time.Second

// TestFleetEtcdMajorityLoss: two of three members down for 60 s: no
// hand-off, no double ownership, nothing published that could not be
// fenced; changes made meanwhile are snapshotted and published once etcd
// is back.
func TestFleetEtcdMajorityLoss(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 9})
	c.WaitOwned(time.Minute)
	editAll(t, c, c.Agents(), 1)
	before := c.State().Tokens
	owners := c.State().Owners
	c.Etcd.Stop(0)
	c.Etcd.Stop(1)
	lost := time.Now()
	hashes := map[string]string{}
	for _, a := range c.Agents() {
		hashes[a] = c.Edit(a, "memory/log.md", "during the outage\n")
	}
	<-time.After(time.Until(lost.Add(majorityLoss)))
	back := time.Now()
	for _, i := range []int{0, 1} {
		if err := c.Etcd.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Etcd.WaitReady(); err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Agents() {
		c.WaitHead(a, hashes[a], 2*time.Minute)
	}
	if after := c.State().Tokens; !maps.Equal(before, after) {
		t.Errorf("owners changed across the outage: %v → %v (owners before %v)", before, after, owners)
	}
	for _, n := range c.Nodes() {
		c.WaitState(time.Minute, n.Name+" ready again", func(State) bool { return n.Ready() })
	}
	h := c.Check()
	// Fenced from half a TTL of silence until etcd came back: no store, no
	// transaction (the changes made meanwhile wait on the local disk).
	fenced := lost.Add(c.opts.LeaseTTL/2 + h.Slack)
	for _, w := range h.Writes {
		if w.At.After(fenced) && w.At.Before(back) {
			t.Errorf("%s wrote while etcd had no majority: %s at %s", w.Node, w.Kind, stamp(w.At))
		}
	}
}

// TestFleetRollingRestart: every node drained (hermesd fleet drain, what
// preStop runs), stopped and started again in turn, with edits between:
// no change lost, every brain byte-identical at the end.
func TestFleetRollingRestart(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 3, Agents: 12})
	c.WaitOwned(time.Minute)
	want := editAll(t, c, c.Agents(), 0)
	for i, n := range c.Nodes() {
		n.Drain()
		var others []string
		for _, o := range c.Nodes() {
			if o != n {
				others = append(others, o.Name)
			}
		}
		c.WaitOwned(2*time.Minute, others...)
		n.Stop()
		n.Start()
		c.WaitOwned(2 * time.Minute)
		want = editAll(t, c, c.Agents(), i+1)
	}
	sameBrains(t, c, want)
	c.Check()
}

// TestFleetScale: 1 → 3 → 1 nodes, editing throughout: every agent moves
// by hand-off, no change lost, byte-identical at the end.
func TestFleetScale(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 1, Agents: 12})
	c.WaitOwned(time.Minute)
	editAll(t, c, c.Agents(), 0)
	c.AddNode()
	c.AddNode()
	c.WaitState(2*time.Minute, "agents on all three nodes", func(st State) bool {
		per := c.perNode(st)
		return len(per) == 3 && len(st.Owners) == len(c.agents)
	})
	want := editAll(t, c, c.Agents(), 1)
	if b := balance(t, c, 3); b > 2 {
		t.Errorf("balance after scaling up: %.2f (%v)", b, c.PerNode())
	}
	for _, n := range c.Nodes()[1:] {
		n.Drain()
		n.Stop()
	}
	c.WaitOwned(2*time.Minute, "node-1")
	sameBrains(t, c, want)
	want = editAll(t, c, c.Agents(), 2)
	sameBrains(t, c, want)
	c.Check()
}

// TestFleetHooks: at the end of a run with hand-offs, each agent's
// on_acquire has run, last, on its owner and nowhere else; Check proves
// the order of every hand-off (the giver's on_release returned before the
// taker's on_acquire started).
func TestFleetHooks(t *testing.T) {
	t.Parallel()
	c := Start(t, Options{Nodes: 2, Agents: 6})
	c.WaitOwned(time.Minute)
	c.AddNode()
	c.WaitState(2*time.Minute, "agents on node-3", func(st State) bool { return c.perNode(st)["node-3"] > 0 && len(st.Owners) == len(c.agents) })
	c.Node(1).Drain()
	c.WaitOwned(2*time.Minute, "node-2", "node-3")
	h := c.Check()
	st := c.State()
	holder := map[string]string{}
	for _, r := range slices.SortedFunc(slices.Values(h.Hooks), func(x, y HookRun) int { return x.Start.Compare(y.Start) }) {
		switch r.Event {
		case "acquire":
			holder[r.Agent] = r.Node
		case "release":
			if holder[r.Agent] == r.Node {
				delete(holder, r.Agent)
			}
		}
	}
	for _, a := range c.Agents() {
		if holder[a] != st.Owners[a] {
			t.Errorf("%s: hooks say %q holds it, etcd says %q owns it", a, holder[a], st.Owners[a])
		}
	}
}
