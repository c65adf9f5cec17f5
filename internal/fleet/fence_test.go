package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/wait"
)

// counter counts what a node reports.
type counter struct {
	nopObserver
	mu       sync.Mutex
	refused  map[string]int
	renewals int
	lost     int
	handoffs int
	taken    int // acquisitions not resumed
}

func newCounter() *counter { return &counter{refused: map[string]int{}} }

func (c *counter) Refused(kind string) {
	c.mu.Lock()
	c.refused[kind]++
	c.mu.Unlock()
}

func (c *counter) Renewed(_ time.Duration, err error) {
	if err == nil {
		c.mu.Lock()
		c.renewals++
		c.mu.Unlock()
	}
}

func (c *counter) LeaseLost() {
	c.mu.Lock()
	c.lost++
	c.mu.Unlock()
}

func (c *counter) HandedOff(string, time.Duration, error) {
	c.mu.Lock()
	c.handoffs++
	c.mu.Unlock()
}

func (c *counter) Acquired(_ string, o Ownership, _ time.Duration, err error) {
	if err == nil && !o.Resumed {
		c.mu.Lock()
		c.taken++
		c.mu.Unlock()
	}
}

func (c *counter) get(f func(*counter) int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(c)
}

// tokens reads every owner key: agent → create revision.
func tokens(t *testing.T, cli *clientv3.Client) map[string]int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), Prefix("test")+ownersDir, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		out[name(Prefix("test"), ownersDir, string(kv.Key))] = kv.CreateRevision
	}
	return out
}

func sameTokens(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestFenceWhenEtcdStops: a node whose etcd stops answering fences
// itself (every write refused and counted) after half its TTL, drops its
// agents without writing after a whole TTL, and when etcd comes back with
// its lease alive resumes them: same owner keys, no hand-off.
func TestFenceWhenEtcdStops(t *testing.T) {
	c := startEtcd(t, 1)
	obs := newCounter()
	// (A member stops as a crash: it expires no lease as it goes.)
	n := newNodeTTL(t, c.Client(t), "a", agentList(5), 3*time.Second, obs).run(t)
	wait.For(t, "5 agents owned", func() bool { return len(n.host.running()) == 5 })
	if err := n.Check("walrus"); err != nil {
		t.Fatalf("an unfenced node refuses: %v", err)
	}
	before := tokens(t, c.Client(t))
	// A member's stop waits seconds for its clients' requests; the node
	// is watched meanwhile.
	go c.Stop(0)
	wait.For(t, "the node fenced", n.Fenced)
	if len(n.host.running()) != 5 {
		t.Errorf("agents dropped at the fence already: %v", n.host.running())
	}
	for _, kind := range []string{"walrus", "chain", "state"} {
		if err := n.Check(kind); !errors.Is(err, ErrFenced) {
			t.Errorf("%s write while fenced: %v", kind, err)
		}
	}
	if err := n.PutHead(context.Background(), "a000", Head{Value: "x"}); !errors.Is(err, ErrFenced) {
		t.Errorf("fleet head while fenced: %v", err)
	}
	if got := obs.get(func(c *counter) int { return c.refused["walrus"] + c.refused["fleet_head"] }); got < 2 {
		t.Errorf("refusals counted: %v", obs.refused)
	}
	wait.For(t, "the agents dropped after a whole TTL of silence", func() bool { return len(n.host.running()) == 0 })
	if n.host.count("final") != 0 {
		t.Errorf("a dropped agent took a last snapshot")
	}
	c.Restart(0)
	wait.For(t, "the agents resumed", func() bool { return len(n.host.running()) == 5 && !n.Fenced() })
	if after := tokens(t, c.Client(t)); !sameTokens(before, after) {
		t.Errorf("owner keys changed: %v -> %v", before, after)
	}
	if got := obs.get(func(c *counter) int { return c.taken }); got != 5 {
		t.Errorf("%d acquisitions; want the 5 first ones only (the rest resumed)", got)
	}
	for id, o := range n.host.open {
		if !o.Resumed {
			t.Errorf("%s reopened as a take-over, not resumed", id)
		}
	}
}

// TestKillOneMemberChangesNoOwner: stopping one member of three (the
// leader) changes no owner and drops nothing.
func TestKillOneMemberChangesNoOwner(t *testing.T) {
	c := startEtcd(t, 3)
	ttl := 6 * time.Second
	ag := agentList(20)
	oa, ob := newCounter(), newCounter()
	a := newNodeTTL(t, c.Client(t), "a", ag, ttl, oa).run(t)
	b := newNodeTTL(t, c.Client(t), "b", ag, ttl, ob).run(t)
	cli := c.Client(t)
	wait.For(t, "20 agents owned by two nodes", func() bool {
		return len(a.host.running())+len(b.host.running()) == 20 && len(a.host.running()) > 0 && len(b.host.running()) > 0 &&
			len(tokens(t, cli)) == 20
	})
	before := tokens(t, cli)
	opens := a.host.count("open") + b.host.count("open")
	// The leader: the harder case (a new one is elected meanwhile).
	leader := 0
	for i, m := range c.Members() {
		if m.IsLeader() {
			leader = i
		}
	}
	c.Stop(leader)
	ra, rb := oa.get(func(c *counter) int { return c.renewals }), ob.get(func(c *counter) int { return c.renewals })
	wait.For(t, "both nodes renewing again", func() bool {
		return oa.get(func(c *counter) int { return c.renewals }) > ra+5 && ob.get(func(c *counter) int { return c.renewals }) > rb+5
	})
	c.Restart(leader)
	if after := tokens(t, cli); !sameTokens(before, after) {
		t.Errorf("owners changed: %v -> %v", before, after)
	}
	if got := a.host.count("open") + b.host.count("open"); got != opens || a.host.count("close")+b.host.count("close") != 0 {
		t.Errorf("agents reopened (%d opens, was %d) or closed", got, opens)
	}
	if oa.get(func(c *counter) int { return c.lost })+ob.get(func(c *counter) int { return c.lost }) != 0 {
		t.Errorf("a lease was lost")
	}
}

// TestMajorityLoss: with two members of three down for longer than the
// TTL, every node fences itself and drops its agents, no agent changes
// owner and none is handed off; when the members come back the leases
// have survived and every agent resumes on its owner.
func TestMajorityLoss(t *testing.T) {
	c := startEtcd(t, 3)
	ttl := 3 * time.Second
	ag := agentList(12)
	oa, ob := newCounter(), newCounter()
	a := newNodeTTL(t, c.Client(t), "a", ag, ttl, oa).run(t)
	b := newNodeTTL(t, c.Client(t), "b", ag, ttl, ob).run(t)
	cli := c.Client(t)
	wait.For(t, "12 agents owned by two nodes", func() bool {
		return len(a.host.running())+len(b.host.running()) == 12 && len(a.host.running()) > 0 && len(b.host.running()) > 0 &&
			len(tokens(t, cli)) == 12
	})
	before := tokens(t, cli)
	c.Stop(1)
	c.Stop(2)
	wait.For(t, "both nodes fenced", func() bool { return a.Fenced() && b.Fenced() })
	wait.For(t, "both nodes dropped their agents", func() bool { return len(a.host.running())+len(b.host.running()) == 0 })
	c.RestartAll(1, 2)
	wait.For(t, "every agent running again", func() bool {
		return len(a.host.running())+len(b.host.running()) == 12 && !a.Fenced() && !b.Fenced()
	})
	if after := tokens(t, cli); !sameTokens(before, after) {
		t.Errorf("owners changed: %v -> %v", before, after)
	}
	if h := oa.get(func(c *counter) int { return c.handoffs }) + ob.get(func(c *counter) int { return c.handoffs }); h != 0 {
		t.Errorf("%d hand-offs", h)
	}
	if got := oa.get(func(c *counter) int { return c.taken }) + ob.get(func(c *counter) int { return c.taken }); got != 12 {
		t.Errorf("%d take-overs; want 12 (the first ones; the rest resumed)", got)
	}
}

// TestLeaseLostDropsAndRejoins: a lease etcd no longer has (revoked
// behind the node's back, as an expiry would) drops every agent without
// writing; the node registers again and takes its agents back.
func TestLeaseLostDropsAndRejoins(t *testing.T) {
	c := startEtcd(t, 1)
	obs := newCounter()
	n := newNodeTTL(t, c.Client(t), "a", agentList(3), testTTL, obs).run(t)
	wait.For(t, "3 agents owned", func() bool { return len(n.host.running()) == 3 })
	lease := n.registered()
	if _, err := c.Client(t).Revoke(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the lease loss seen", func() bool { return obs.get(func(c *counter) int { return c.lost }) == 1 })
	wait.For(t, "3 agents owned under a new lease", func() bool {
		return len(n.host.running()) == 3 && n.registered() != 0 && n.registered() != lease
	})
	if n.host.count("final") != 0 {
		t.Errorf("an agent took a last snapshot after its lease was lost")
	}
	if n.host.count("close") != 3 {
		t.Errorf("closes: %d", n.host.count("close"))
	}
}
