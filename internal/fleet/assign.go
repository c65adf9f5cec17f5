package fleet

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// slackPercent is how far above an even share a node's load may go
// before an agent goes to its next choice: with 300 agents on 3 nodes no
// node gets more than 110, so none fewer than 80 (max/min ≤ 1.375).
const slackPercent = 10

// score is the rendezvous weight of node n for agent a.
func score(a, n string) uint64 {
	h := sha256.New()
	h.Write([]byte(a))
	h.Write([]byte{0})
	h.Write([]byte(n))
	var sum [32]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// Assign decides which node each agent should run on: rendezvous
// (highest random weight) hashing over the nodes eligible for it, with
// bounded loads — an agent whose first choice already holds its share
// (plus slack) goes to its next. Every node computes it from the same
// etcd state, so every node reaches the same answer; a node joining or
// leaving moves few agents besides its own share. eligible lists, for
// each agent, the nodes that may own it (they loaded its key and are not
// draining); an agent without one is not in the result.
func Assign(eligible map[string][]string) map[string]string {
	agents := make([]string, 0, len(eligible))
	nodes := map[string]bool{}
	for a, ns := range eligible {
		if len(ns) == 0 {
			continue
		}
		agents = append(agents, a)
		for _, n := range ns {
			nodes[n] = true
		}
	}
	if len(agents) == 0 {
		return map[string]string{}
	}
	// A fixed order that favours no agent: by hash.
	order := make(map[string]uint64, len(agents))
	for _, a := range agents {
		order[a] = score(a, "")
	}
	slices.SortFunc(agents, func(x, y string) int {
		if c := cmp.Compare(order[x], order[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	// ⌈agents·(1+slack)/nodes⌉, in integers.
	capacity := (len(agents)*(100+slackPercent) + 100*len(nodes) - 1) / (100 * len(nodes))
	load := map[string]int{}
	out := make(map[string]string, len(agents))
	for _, a := range agents {
		ns := slices.Clone(eligible[a])
		slices.SortFunc(ns, func(x, y string) int {
			if c := cmp.Compare(score(a, y), score(a, x)); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
		pick := ns[0]
		for _, n := range ns {
			if load[n] < capacity {
				pick = n
				break
			}
		}
		load[pick]++
		out[a] = pick
	}
	return out
}
