package fleet

import (
	"fmt"
	"testing"
)

func agentsOn(nAgents int, nodes ...string) map[string][]string {
	out := map[string][]string{}
	for i := range nAgents {
		out[fmt.Sprintf("agent-%03d", i)] = nodes
	}
	return out
}

func loads(a map[string]string) map[string]int {
	l := map[string]int{}
	for _, n := range a {
		l[n]++
	}
	return l
}

// TestAssignBalances: 300 agents on 3 nodes are spread within the bound
// (max/min ≤ 1.5), whatever the nodes are called.
func TestAssignBalances(t *testing.T) {
	for _, names := range [][]string{{"node-1", "node-2", "node-3"}, {"a", "b", "c"}, {"hermesd-0", "hermesd-1", "hermesd-2"}} {
		l := loads(Assign(agentsOn(300, names...)))
		lo, hi := 1<<30, 0
		for _, n := range names {
			lo, hi = min(lo, l[n]), max(hi, l[n])
		}
		if lo == 0 || float64(hi)/float64(lo) > 1.5 || hi > 110 {
			t.Errorf("%v: loads %v (max/min %.2f)", names, l, float64(hi)/float64(lo))
		}
	}
}

// TestAssignMovesLittle: a node joining takes about its share and moves
// little else; one leaving gives up only its own agents' worth.
func TestAssignMovesLittle(t *testing.T) {
	before := Assign(agentsOn(300, "n1", "n2", "n3"))
	after := Assign(agentsOn(300, "n1", "n2", "n3", "n4"))
	moved, toNew := 0, 0
	for a, n := range before {
		if after[a] != n {
			moved++
			if after[a] == "n4" {
				toNew++
			}
		}
	}
	if toNew < 60 || moved > toNew+30 {
		t.Errorf("join: %d moved, %d of them to the new node", moved, toNew)
	}
	gone := Assign(agentsOn(300, "n1", "n2"))
	moved = 0
	for a, n := range before {
		if n != "n3" && gone[a] != n {
			moved++
		}
	}
	if moved > 30 {
		t.Errorf("leave: %d agents of the remaining nodes moved", moved)
	}
}

// TestAssignEligibility: an agent goes only to a node that can open it,
// even past that node's share; one no node can open goes nowhere.
func TestAssignEligibility(t *testing.T) {
	e := agentsOn(30, "a", "b", "c")
	for i := range 20 {
		e[fmt.Sprintf("only-a-%d", i)] = []string{"a"}
	}
	e["nobody"] = nil
	got := Assign(e)
	for i := range 20 {
		if n := got[fmt.Sprintf("only-a-%d", i)]; n != "a" {
			t.Errorf("only-a-%d on %q", i, n)
		}
	}
	if n, ok := got["nobody"]; ok {
		t.Errorf("an agent no node can open went to %q", n)
	}
	// Deterministic.
	again := Assign(e)
	for a, n := range got {
		if again[a] != n {
			t.Fatalf("%s: %s then %s", a, n, again[a])
		}
	}
}
