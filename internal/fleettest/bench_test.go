package fleettest

import (
	"fmt"
	"testing"
	"time"
)

// The fleet's figures (BENCH_ONLY=fleet scripts/bench.sh), each on a real
// fleet of 3 nodes with a 3-member etcd: take-over time against the
// number of agents and the brain size, hand-off time, and etcd requests
// per agent-minute. Run with -benchtime 1x: one fleet per figure.

// BenchmarkFleetTakeover kills -9 the node that owns agent-001 and
// reports how long its agents took to be owned elsewhere (takeover-s,
// bounded below by the lease TTL) and to be restored from their fleet
// heads (restored-s), with the lease TTL for reference, and the
// restores' throughput: the moved brains' bytes over the time from
// their take-over to the last one restored (restore-MB/s).
func BenchmarkFleetTakeover(b *testing.B) {
	for _, tc := range []struct{ agents, brain int }{
		{100, 4 << 10}, {300, 4 << 10}, {1000, 4 << 10},
		{100, 256 << 10}, {100, 4 << 20}, {12, 64 << 20},
	} {
		b.Run(fmt.Sprintf("agents=%d/brain=%dKiB", tc.agents, tc.brain>>10), func(b *testing.B) {
			for b.Loop() {
				takeover(b, tc.agents, tc.brain)
			}
		})
	}
}

func takeover(b *testing.B, agents, brain int) {
	o := Options{Nodes: 3, Agents: agents, BrainBytes: brain, L2Every: -1}
	if brain > 512<<10 {
		o.Shards = 100 // packs of a few MiB: a 10-shard Walrus stores blobs of 1 MiB at most
	}
	c := Start(b, o)
	c.WaitOwned(5 * time.Minute)
	c.WaitState(10*time.Minute, "every agent's first fleet head", func(st State) bool { return len(st.Heads) == agents })
	victim := c.Owner("agent-001")
	st := c.State()
	var its []string
	for a, o := range st.Owners {
		if o == victim.Name {
			its = append(its, a)
		}
	}
	killed := time.Now()
	victim.Kill9()
	owned := c.WaitState(10*time.Minute, "the dead node's agents owned elsewhere", func(st State) bool {
		for _, a := range its {
			if o := st.Owners[a]; o == "" || o == victim.Name {
				return false
			}
		}
		return true
	})
	for _, a := range its {
		n := c.Owner(a)
		c.WaitState(10*time.Minute, a+" restored", func(State) bool {
			return BundleHash(b, n.Brain(a)) == st.Heads[a].BundleHash
		})
	}
	restored := time.Since(killed)
	b.ReportMetric(owned.Seconds(), "takeover-s")
	b.ReportMetric(restored.Seconds(), "restored-s")
	if d := restored - owned; d > 0 {
		b.ReportMetric(float64(len(its)*brain)/1e6/d.Seconds(), "restore-MB/s")
	}
	b.ReportMetric(float64(len(its)), "agents-moved")
	b.ReportMetric(c.opts.LeaseTTL.Seconds(), "lease-ttl-s")
}

// BenchmarkFleetHandoff drains one node of three and reports how long it
// took until every agent it owned was owned by another (drain-s) and
// that time per agent moved.
func BenchmarkFleetHandoff(b *testing.B) {
	for b.Loop() {
		c := Start(b, Options{Nodes: 3, Agents: 30, L2Every: -1})
		c.WaitOwned(5 * time.Minute)
		c.WaitState(10*time.Minute, "every agent's first fleet head", func(st State) bool { return len(st.Heads) == 30 })
		n := c.Node(1)
		moved := c.PerNode()[n.Name]
		start := time.Now()
		n.Drain()
		c.WaitOwned(10*time.Minute, "node-2", "node-3")
		took := time.Since(start)
		b.ReportMetric(took.Seconds(), "drain-s")
		b.ReportMetric(took.Seconds()/float64(max(moved, 1)), "s/agent")
		b.ReportMetric(float64(moved), "agents-moved")
	}
}

// BenchmarkFleetEtcdRequests counts the requests the fleet sends etcd
// over two minutes (lease renewals, ownership, fleet heads, watches) with
// every agent's brain changed once a minute, per agent-minute.
func BenchmarkFleetEtcdRequests(b *testing.B) {
	const agents = 60
	for b.Loop() {
		c := Start(b, Options{Nodes: 3, Agents: agents, L2Every: -1})
		c.WaitOwned(5 * time.Minute)
		c.WaitState(10*time.Minute, "every agent's first fleet head", func(st State) bool { return len(st.Heads) == agents })
		before, err := EtcdRequests()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for minute := range 2 {
			hashes := map[string]string{}
			for _, a := range c.Agents() {
				hashes[a] = c.Edit(a, "memory/log.md", fmt.Sprintf("minute %d\n", minute))
			}
			for _, a := range c.Agents() {
				c.WaitHead(a, hashes[a], 5*time.Minute)
			}
			<-time.After(time.Until(start.Add(time.Duration(minute+1) * time.Minute)))
		}
		window := time.Since(start)
		after, err := EtcdRequests()
		if err != nil {
			b.Fatal(err)
		}
		total := 0.0
		for svc, v := range after {
			d := v - before[svc]
			total += d
			b.ReportMetric(d/(agents*window.Minutes()), svc+"-req/agent-min")
		}
		b.ReportMetric(total/(agents*window.Minutes()), "req/agent-min")
	}
}
