package fleettest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// t0 is the synthetic run's start.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// parents is a synthetic lineage: value → its parent.
type parents map[string]string

func (p parents) lineage(_, v string) ([]string, error) {
	var out []string
	for ; v != ""; v = p[v] {
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("a cycle at %s", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// cleanRun is a run with no fault: agent a on node-1, handed off to
// node-2 at 10 s (node-1's on_release returned before node-2's on_acquire
// started), then node-2 killed -9 at 20 s and a taken over by node-3
// after node-2's lease expired at 23 s. Heads s1 → s2 (node-1), s3
// (node-2), s4 (node-3); the ENS record lags: s1, then s3.
func cleanRun() *History {
	return &History{
		Leases: []LeaseSpan{
			{Node: "node-1", Lease: 1, From: at(0), FromRev: 2},
			{Node: "node-2", Lease: 2, From: at(0.1), To: at(23), FromRev: 3, ToRev: 40},
			{Node: "node-3", Lease: 3, From: at(0.2), FromRev: 4},
		},
		Owners: []Ownership{
			{Agent: "a", Node: "node-1", Token: 10, EndRev: 20, From: at(1), To: at(10)},
			{Agent: "a", Node: "node-2", Token: 21, EndRev: 40, From: at(10.1), To: at(23)},
			{Agent: "a", Node: "node-3", Token: 41, From: at(23.1)},
		},
		Heads: []HeadWrite{
			{Agent: "a", Node: "node-1", Value: "s1", Token: 10, Rev: 11, At: at(2)},
			{Agent: "a", Node: "node-1", Value: "s2", Token: 10, Rev: 15, At: at(9)},
			{Agent: "a", Node: "node-2", Value: "s3", Token: 21, Rev: 25, At: at(15)},
			{Agent: "a", Node: "node-3", Value: "s4", Token: 41, Rev: 45, At: at(25)},
		},
		Records: []RecordWrite{
			{Agent: "a", Value: "s1", Chain: "l1", Block: 5, Node: "node-1", Sent: at(3), TxHash: "0x1"},
			{Agent: "a", Value: "s3", Chain: "l1", Block: 9, Node: "node-2", Sent: at(16), TxHash: "0x2"},
		},
		Writes: []Write{
			{Node: "node-1", Kind: "walrus store", At: at(1.5)},
			{Node: "node-2", Kind: "walrus store", At: at(14)},
			{Node: "node-2", Kind: "L1 transaction", At: at(16)},
			{Node: "node-3", Kind: "walrus store", At: at(24)},
		},
		Hooks: []HookRun{
			{Node: "node-1", Agent: "a", Event: "acquire", Start: at(1.1), End: at(1.2)},
			{Node: "node-1", Agent: "a", Event: "release", Start: at(8), End: at(8.5)},
			{Node: "node-2", Agent: "a", Event: "acquire", Start: at(10.2), End: at(10.3)},
			{Node: "node-3", Agent: "a", Event: "acquire", Start: at(23.2), End: at(23.3)},
		},
		Deaths:  []Death{{Node: "node-2", At: at(20)}},
		Lineage: parents{"s2": "s1", "s3": "s2", "s4": "s3", "x": "s1"}.lineage,
		Slack:   50 * time.Millisecond,
		End:     at(30),
	}
}

// TestCheckCleanRun: a run with hand-offs and a take-over passes.
func TestCheckCleanRun(t *testing.T) {
	if vs := cleanRun().Check(); len(vs) > 0 {
		t.Fatalf("a clean run: %s", Report(vs))
	}
}

// TestCheckCatches: each planted fault is caught, named, and is the only
// thing reported.
func TestCheckCatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(h *History)
		kind  string
		node  string
	}{
		{"a forked head", func(h *History) {
			// node-2 writes x, a sibling of s2 (both children of s1).
			h.Heads[2].Value = "x"
		}, "fork", ""},
		{"a rolled-back head", func(h *History) {
			h.Heads = append(h.Heads, HeadWrite{Agent: "a", Node: "node-3", Value: "s2", Token: 41, Rev: 50, At: at(26)})
		}, "rollback", ""},
		{"a forked record", func(h *History) {
			h.Records[1].Value = "x"
		}, "fork", ""},
		{"a head under a stale token", func(h *History) {
			// node-1 writes after its ownership ended (revision 20).
			h.Heads = append(h.Heads, HeadWrite{Agent: "a", Node: "node-1", Value: "s3", Token: 10, Rev: 30, At: at(16)})
			h.Heads[2], h.Heads[4] = h.Heads[4], h.Heads[2]
		}, "head-by-non-owner", "node-1"},
		{"a store after the lease expired", func(h *History) {
			// node-2, SIGSTOPped, wakes at 26 s and stores.
			h.Deaths = nil
			h.Writes = append(h.Writes, Write{Node: "node-2", Kind: "walrus store", At: at(26)})
		}, "write-without-lease", "node-2"},
		{"a transaction after the lease expired", func(h *History) {
			h.Writes = append(h.Writes, Write{Node: "node-2", Kind: "L2 transaction", At: at(23.2)})
		}, "write-without-lease", "node-2"},
		{"a record by a node that no longer owns", func(h *History) {
			h.Records = append(h.Records, RecordWrite{Agent: "a", Value: "s3", Chain: "l2", Block: 3, Node: "node-1", Sent: at(17), TxHash: "0x3"})
		}, "record-by-non-owner", "node-1"},
		{"a record no node sent", func(h *History) {
			h.Records[1].Node = ""
		}, "unattributed-record", ""},
		{"a taker's on_acquire before the giver's on_release returned", func(h *History) {
			h.Hooks[1].End = at(10.25) // node-2's acquire started at 10.2
		}, "hooks-overlap", "node-2"},
		{"an on_release that never ran on a live node", func(h *History) {
			h.Hooks = slices.Delete(h.Hooks, 1, 2)
		}, "hooks-overlap", "node-2"},
		{"on_acquire without ownership", func(h *History) {
			h.Hooks = append(h.Hooks, HookRun{Node: "node-1", Agent: "a", Event: "acquire", Start: at(28), End: at(28.1)})
		}, "hook-without-ownership", "node-1"},
		{"two owners at once", func(h *History) {
			h.Owners[1].EndRev = 0
		}, "double-owner", "node-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanRun()
			tc.plant(h)
			vs := h.Check()
			// A planted fault may be seen by more than one check (a
			// missing on_release overlaps every later holder); one
			// violation must be the planted kind, naming the node.
			found := false
			for _, v := range vs {
				found = found || v.Kind == tc.kind && (tc.node == "" || v.Node == tc.node)
			}
			if !found {
				t.Fatalf("want %s by %q, got:\n%s", tc.kind, tc.node, Report(vs))
			}
			if s := Report(vs); !strings.Contains(s, tc.kind) {
				t.Errorf("report: %s", s)
			}
		})
	}
}

// TestCheckDeadNodeHoldsNothing: a node killed while holding an agent
// (its on_release never runs) does not hold it after its death, so the
// taker's on_acquire after the lease expiry is not an overlap, while the
// same acquire before the death is.
func TestCheckDeadNodeHoldsNothing(t *testing.T) {
	h := cleanRun()
	if vs := h.Check(); len(vs) != 0 {
		t.Fatalf("%s", Report(vs))
	}
	h.Deaths = nil
	h.Leases[1].To = time.Time{} // node-2 never died and kept its lease
	h.Owners[1].EndRev, h.Owners[1].To = 0, time.Time{}
	h.Owners = h.Owners[:2]
	h.Hooks[3].Node = "node-3"
	vs := h.Check()
	found := false
	for _, v := range vs {
		found = found || v.Kind == "hooks-overlap"
	}
	if !found {
		t.Fatalf("a live holder was ignored: %s", Report(vs))
	}
}
