package fleettest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// History is everything a fleet run did that the checker judges, from
// outside the nodes: etcd's revision history of the fleet's keys, the
// agents' ENS records as the chains hold them, what each node's proxies
// saw it write, and what its hooks logged.
type History struct {
	// Leases are each node's lease spans: from the put of its node key
	// with a lease to the key's deletion (the lease expired or was
	// revoked) or another lease taking it over.
	Leases []LeaseSpan
	// Owners are the ownerships of every agent, from the owner key's
	// creation to its deletion.
	Owners []Ownership
	// Heads are the puts of the agents' fleet heads, in revision order.
	Heads []HeadWrite
	// Records are the writes of the agents' ENS records, in chain order
	// per chain.
	Records []RecordWrite
	// Writes are what the nodes' proxies saw them send: Walrus stores and
	// chain transactions.
	Writes []Write
	// Hooks are the runs of the nodes' on_acquire and on_release hooks.
	Hooks []HookRun
	// Deaths are when a node's process ended or stopped answering for
	// good (kill -9): a node's hooks hold nothing after it.
	Deaths []Death
	// Lineage returns value and the snapshots it descends from, newest
	// first (value itself first).
	Lineage func(agent, value string) ([]string, error)
	// Slack is the tolerance between the moments the test observed (etcd
	// watch events, process ends) and those the proxies stamped: the
	// delivery delay of a watch event.
	Slack time.Duration
	// End is when the run was read (open spans end there).
	End time.Time
}

// LeaseSpan is one node lease, as etcd held it.
type LeaseSpan struct {
	Node     string
	Lease    int64
	From, To time.Time // To zero: held at the end of the run
	FromRev  int64
	ToRev    int64 // 0: held at the end
}

// Ownership is one owner key's life.
type Ownership struct {
	Agent, Node string
	Token       int64 // the owner key's create revision
	EndRev      int64 // its deletion's revision; 0: owned at the end
	From, To    time.Time
}

// HeadWrite is one put of an agent's fleet head.
type HeadWrite struct {
	Agent, Node, Value string
	Token              int64 // the ownership the writer claimed
	Rev                int64
	At                 time.Time
}

// RecordWrite is one write of an agent's ENS record.
type RecordWrite struct {
	Agent, Value string
	Chain        string // "l1" or "l2"
	Block        uint64
	Index        uint // the log's index in its block
	TxHash       string
	// Node sent the transaction (its proxy saw it) at Sent; "" when no
	// node's proxy saw it.
	Node string
	Sent time.Time
}

// Write is one write a node sent out.
type Write struct {
	Node string
	Kind string // "walrus store", "L1 transaction", "L2 transaction"
	At   time.Time
}

// HookRun is one run of a hook. End is zero when it never returned.
type HookRun struct {
	Node, Agent string
	Event       string // "acquire" or "release"
	Start, End  time.Time
}

// Death is a node process's end.
type Death struct {
	Node string
	At   time.Time
}

// Violation is one thing that must not happen and did.
type Violation struct {
	Kind   string // fork, rollback, head-by-non-owner, write-without-lease, record-by-non-owner, …
	Agent  string
	Node   string
	Detail string
}

func (v Violation) String() string {
	s := v.Kind
	if v.Agent != "" {
		s += " agent=" + v.Agent
	}
	if v.Node != "" {
		s += " node=" + v.Node
	}
	return s + ": " + v.Detail
}

// Check judges the run and returns what went wrong, in a stable order.
func (h *History) Check() []Violation {
	var out []Violation
	out = append(out, h.checkOwners()...)
	out = append(out, h.checkHeads()...)
	out = append(out, h.checkLineage()...)
	out = append(out, h.checkWrites()...)
	out = append(out, h.checkRecords()...)
	out = append(out, h.checkHooks()...)
	return out
}

func (h *History) end(t time.Time) time.Time {
	if t.IsZero() {
		return h.End
	}
	return t
}

// checkOwners: no two ownerships of one agent overlap in etcd's order.
func (h *History) checkOwners() []Violation {
	var out []Violation
	by := map[string][]Ownership{}
	for _, o := range h.Owners {
		by[o.Agent] = append(by[o.Agent], o)
	}
	for _, a := range sortedKeys(by) {
		os := by[a]
		slices.SortFunc(os, func(x, y Ownership) int { return cmp.Compare(x.Token, y.Token) })
		for i := 1; i < len(os); i++ {
			if prev := os[i-1]; prev.EndRev == 0 || prev.EndRev > os[i].Token {
				out = append(out, Violation{"double-owner", a, os[i].Node, fmt.Sprintf("owned by %s (token %d) from revision %d while %s (token %d) still owned it", os[i].Node, os[i].Token, os[i].Token, prev.Node, prev.Token)})
			}
		}
	}
	return out
}

// checkHeads: every head was written by the agent's owner, under its own
// token, while it owned the agent (in etcd's revision order, exact).
func (h *History) checkHeads() []Violation {
	var out []Violation
	for _, w := range h.Heads {
		ok := false
		for _, o := range h.Owners {
			if o.Agent == w.Agent && o.Node == w.Node && o.Token == w.Token && w.Rev > o.Token && (o.EndRev == 0 || w.Rev < o.EndRev) {
				ok = true
				break
			}
		}
		if !ok {
			out = append(out, Violation{"head-by-non-owner", w.Agent, w.Node, fmt.Sprintf("head %s at revision %d (token %d) written without owning the agent", w.Value, w.Rev, w.Token)})
		}
	}
	return out
}

// checkLineage: per agent, the heads in revision order and the records in
// chain order each descend from the one before, and every value is in the
// lineage of the newest: one sequence, no fork, no rollback.
func (h *History) checkLineage() []Violation {
	var out []Violation
	heads, records := map[string][]string{}, map[string][]string{}
	for _, w := range slices.SortedFunc(slices.Values(h.Heads), func(x, y HeadWrite) int { return cmp.Compare(x.Rev, y.Rev) }) {
		heads[w.Agent] = append(heads[w.Agent], w.Value)
	}
	recs := slices.Clone(h.Records)
	slices.SortStableFunc(recs, func(x, y RecordWrite) int {
		return cmp.Or(cmp.Compare(x.Chain, y.Chain), cmp.Compare(x.Block, y.Block), cmp.Compare(x.Index, y.Index))
	})
	for _, r := range recs {
		records[r.Agent] = append(records[r.Agent], r.Value)
	}
	agents := map[string]bool{}
	for a := range heads {
		agents[a] = true
	}
	for a := range records {
		agents[a] = true
	}
	for _, a := range sortedKeys(agents) {
		lin := func(v string) ([]string, bool) {
			l, err := h.Lineage(a, v)
			if err != nil {
				out = append(out, Violation{"unreadable", a, "", fmt.Sprintf("the lineage of %s: %v", v, err)})
				return nil, false
			}
			return l, true
		}
		seq := func(what string, vals []string) {
			for i := 1; i < len(vals); i++ {
				prev, cur := vals[i-1], vals[i]
				if prev == cur {
					continue
				}
				lc, ok := lin(cur)
				if !ok {
					return
				}
				if slices.Contains(lc, prev) {
					continue
				}
				kind := "fork"
				if lp, ok := lin(prev); ok && slices.Contains(lp, cur) {
					kind = "rollback"
				}
				out = append(out, Violation{kind, a, "", fmt.Sprintf("%s %d: %s does not descend from %s", what, i, cur, prev)})
			}
		}
		seq("head", heads[a])
		seq("record", records[a])
		// The newest of the two sequences' last values must hold both.
		var last []string
		if n := len(heads[a]); n > 0 {
			last = append(last, heads[a][n-1])
		}
		if n := len(records[a]); n > 0 {
			last = append(last, records[a][n-1])
		}
		newest := last[0]
		if len(last) == 2 && last[0] != last[1] {
			l0, ok0 := lin(last[0])
			l1, ok1 := lin(last[1])
			switch {
			case !ok0 || !ok1:
				continue
			case slices.Contains(l1, last[0]):
				newest = last[1]
			case !slices.Contains(l0, last[1]):
				out = append(out, Violation{"fork", a, "", fmt.Sprintf("the fleet head %s and the ENS record %s are on different lineages", last[0], last[1])})
				continue
			}
		}
		ln, ok := lin(newest)
		if !ok {
			continue
		}
		for _, v := range slices.Concat(heads[a], records[a]) {
			if !slices.Contains(ln, v) {
				out = append(out, Violation{"fork", a, "", fmt.Sprintf("%s is not in the lineage of the newest snapshot %s", v, newest)})
				break
			}
		}
	}
	return out
}

// checkWrites: a node writes only while it holds a lease.
func (h *History) checkWrites() []Violation {
	var out []Violation
	for _, w := range h.Writes {
		if !h.leased(w.Node, w.At) {
			out = append(out, Violation{"write-without-lease", "", w.Node, fmt.Sprintf("%s at %s, outside every lease of the node%s", w.Kind, stamp(w.At), h.leaseHint(w.Node, w.At))})
		}
	}
	return out
}

func (h *History) leased(node string, at time.Time) bool {
	for _, s := range h.Leases {
		if s.Node == node && !at.Before(s.From.Add(-h.Slack)) && !at.After(h.end(s.To).Add(h.Slack)) {
			return true
		}
	}
	return false
}

// leaseHint says how far a moment is from the node's nearest lease.
func (h *History) leaseHint(node string, at time.Time) string {
	var best time.Duration = -1
	for _, s := range h.Leases {
		if s.Node != node || s.To.IsZero() {
			continue
		}
		if d := at.Sub(s.To); d > 0 && (best < 0 || d < best) {
			best = d
		}
	}
	if best < 0 {
		return ""
	}
	return fmt.Sprintf(" (%v after a lease of it ended)", best.Round(time.Millisecond))
}

// checkRecords: every ENS write was sent by a node that owned the agent
// at that moment.
func (h *History) checkRecords() []Violation {
	var out []Violation
	for _, r := range h.Records {
		if r.Node == "" {
			out = append(out, Violation{"unattributed-record", r.Agent, "", fmt.Sprintf("%s record %s (tx %s) was sent by no node's proxy", r.Chain, r.Value, r.TxHash)})
			continue
		}
		if !h.owned(r.Agent, r.Node, r.Sent) {
			out = append(out, Violation{"record-by-non-owner", r.Agent, r.Node, fmt.Sprintf("%s record %s sent at %s while the node did not own the agent", r.Chain, r.Value, stamp(r.Sent))})
		}
	}
	return out
}

func (h *History) owned(agent, node string, at time.Time) bool {
	for _, o := range h.Owners {
		if o.Agent == agent && o.Node == node && !at.Before(o.From.Add(-h.Slack)) && !at.After(h.end(o.To).Add(h.Slack)) {
			return true
		}
	}
	return false
}

// holding is a node's hold on an agent by its hooks: from on_acquire's
// start to on_release's return, cut short by the node's death or the end
// of the lease it acquired under (a node whose lease expired is not live).
type holding struct {
	node       string
	start, end time.Time
	released   bool
}

// checkHooks: at every moment at most one live node holds each agent,
// and a taker's on_acquire starts only after the giver's on_release
// returned; on_acquire runs only on an owner.
func (h *History) checkHooks() []Violation {
	var out []Violation
	runs := slices.Clone(h.Hooks)
	slices.SortStableFunc(runs, func(x, y HookRun) int { return x.Start.Compare(y.Start) })
	by := map[string][]holding{}
	open := map[[2]string]int{} // (agent, node) → index of the open holding in by[agent]
	for _, r := range runs {
		k := [2]string{r.Agent, r.Node}
		switch r.Event {
		case "acquire":
			if !h.owned(r.Agent, r.Node, r.Start) {
				out = append(out, Violation{"hook-without-ownership", r.Agent, r.Node, fmt.Sprintf("on_acquire started at %s while the node did not own the agent", stamp(r.Start))})
			}
			by[r.Agent] = append(by[r.Agent], holding{node: r.Node, start: r.Start, end: h.liveUntil(r.Node, r.Start)})
			open[k] = len(by[r.Agent]) - 1
		case "release":
			i, ok := open[k]
			if !ok {
				continue // a release without an acquire holds nothing
			}
			hd := &by[r.Agent][i]
			end := h.end(r.End)
			if end.Before(hd.end) {
				hd.end = end
			}
			hd.released = !r.End.IsZero()
			delete(open, k)
		}
	}
	for _, a := range sortedKeys(by) {
		hs := by[a]
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				x, y := hs[i], hs[j]
				if x.node == y.node || !y.start.Before(x.end) || !x.start.Before(y.end) {
					continue
				}
				why := "before it released it"
				if x.released {
					why = fmt.Sprintf("%v before its on_release returned", x.end.Sub(y.start).Round(time.Millisecond))
				}
				out = append(out, Violation{"hooks-overlap", a, y.node, fmt.Sprintf("on_acquire started at %s while %s held the agent (%s)", stamp(y.start), x.node, why)})
			}
		}
	}
	return out
}

// liveUntil is when a node that acquired at t stops being live: its death
// or the end of the lease span holding t, whichever is first.
func (h *History) liveUntil(node string, t time.Time) time.Time {
	end := h.End
	for _, s := range h.Leases {
		if s.Node == node && !t.Before(s.From.Add(-h.Slack)) && !t.After(h.end(s.To)) && !s.To.IsZero() && s.To.Before(end) {
			end = s.To
		}
	}
	for _, d := range h.Deaths {
		if d.Node == node && d.At.After(t) && d.At.Before(end) {
			end = d.At
		}
	}
	return end
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Report is the violations as one message.
func Report(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		b.WriteString(v.String() + "\n")
	}
	return b.String()
}
