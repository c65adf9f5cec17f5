package fleet

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is the fleet as one node (or one read of etcd) sees it: the
// shape of /v1/fleet and `hermesd fleet status --json`.
type Status struct {
	Fleet string `json:"fleet"`
	// Node is the node that answers ("" for a read of etcd).
	Node     string `json:"node,omitempty"`
	Revision int64  `json:"revision"`
	// Fenced, Lease: the answering node's.
	Fenced bool         `json:"fenced,omitempty"`
	Lease  string       `json:"lease,omitempty"`
	Nodes  []NodeStatus `json:"nodes"`
	Agents []AgentState `json:"agents"`
}

// NodeStatus is one registered node.
type NodeStatus struct {
	NodeInfo
	Lease string `json:"lease"`
	// Owns counts the agents it owns.
	Owns int `json:"owns"`
	// Drained: `hermesd fleet drain` asked it to hand everything off.
	Drained bool   `json:"drained,omitempty"`
	Error   string `json:"error,omitempty"`
}

// AgentState is one agent.
type AgentState struct {
	ID    string `json:"id"`
	Owner string `json:"owner,omitempty"`
	// Token is the owner key's create revision.
	Token int64     `json:"token,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// Desired is the node the assignment gives it ("" when no live node
	// can open it).
	Desired string   `json:"desired,omitempty"`
	Handoff *Handoff `json:"handoff,omitempty"`
	Head    *Head    `json:"head,omitempty"`
	// State is the answering node's view of its own agents (acquiring,
	// owned, handing-off).
	State State `json:"state,omitempty"`
	// Lacking lists the live nodes that cannot open it, with why.
	Lacking map[string]string `json:"lacking,omitempty"`
}

// Status is what this node knows (no heads: Read has them).
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := statusOf(n.cfg.Fleet, n.view)
	st.Node = n.cfg.Node
	st.Fenced = n.fenceLocked(time.Now()) != nil
	if n.lease != 0 {
		st.Lease = fmt.Sprintf("%x", int64(n.lease))
	}
	for i := range st.Agents {
		if o := n.own[st.Agents[i].ID]; o != nil {
			st.Agents[i].State = o.state
		}
	}
	return st
}

// statusOf lays a view out.
func statusOf(fleet string, v view) Status {
	st := Status{Fleet: fleet, Revision: v.rev, Nodes: []NodeStatus{}, Agents: []AgentState{}}
	owns := map[string]int{}
	for _, o := range v.owners {
		owns[o.Node]++
	}
	for _, name := range slices.Sorted(maps.Keys(v.nodes)) {
		e := v.nodes[name]
		st.Nodes = append(st.Nodes, NodeStatus{NodeInfo: e.info, Lease: fmt.Sprintf("%x", e.lease), Owns: owns[name],
			Drained: v.drain[name], Error: e.bad})
	}
	n := &Node{view: v}
	n.cfg.Fleet = fleet
	desired := Assign(n.eligibleLocked())
	ids := map[string]bool{}
	for _, e := range v.nodes {
		for _, a := range e.info.Agents {
			ids[a] = true
		}
		for a := range e.info.Missing {
			ids[a] = true
		}
	}
	for a := range v.owners {
		ids[a] = true
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		as := AgentState{ID: id, Desired: desired[id]}
		if o, ok := v.owners[id]; ok {
			as.Owner, as.Token, as.Since = o.Node, o.token, o.Since
		}
		if h, ok := v.handoffs[id]; ok {
			as.Handoff = &h
		}
		for name, e := range v.nodes {
			if why, ok := e.info.Missing[id]; ok {
				if as.Lacking == nil {
					as.Lacking = map[string]string{}
				}
				as.Lacking[name] = why
			}
		}
		st.Agents = append(st.Agents, as)
	}
	return st
}

// Changed returns a channel closed when the view changes after revision
// rev (at once when it is past rev already), for long polls.
func (n *Node) Changed(rev int64) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.view.rev > rev {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.changed
}

// Read reads fleet's whole state from etcd, heads included (`hermesd
// fleet status`).
func Read(ctx context.Context, cli *clientv3.Client, fleet string) (Status, error) {
	n := &Node{cli: cli, prefix: Prefix(fleet), view: newView()}
	n.cfg.Fleet = fleet
	v, err := n.load(ctx)
	if err != nil {
		return Status{}, err
	}
	st := statusOf(fleet, v)
	resp, err := cli.Get(ctx, n.key(headsDir, ""), clientv3.WithPrefix(), clientv3.WithRev(v.rev))
	if err != nil {
		return Status{}, fmt.Errorf("read the fleet heads: %w", err)
	}
	heads := map[string]*Head{}
	for _, kv := range resp.Kvs {
		id := name(n.prefix, headsDir, string(kv.Key))
		var h Head
		if id != "" && decode(kv.Value, &h) == nil {
			heads[id] = &h
		}
	}
	for i := range st.Agents {
		st.Agents[i].Head = heads[st.Agents[i].ID]
		delete(heads, st.Agents[i].ID)
	}
	for _, id := range slices.Sorted(maps.Keys(heads)) {
		st.Agents = append(st.Agents, AgentState{ID: id, Head: heads[id]})
	}
	return st, nil
}

// Drain asks node to hand every agent off and take none: a key bound to
// the node's own lease, so it ends with the node's registration (a
// restart, a lost lease) or Undrain.
func Drain(ctx context.Context, cli *clientv3.Client, fleet, node string) error {
	p := Prefix(fleet)
	resp, err := cli.Get(ctx, p+nodesDir+node)
	if err != nil {
		return fmt.Errorf("read node %s: %w", node, err)
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("node %s is not registered in fleet %s", node, fleet)
	}
	lease := resp.Kvs[0].Lease
	if _, err := cli.Put(ctx, p+drainDir+node, "", clientv3.WithLease(clientv3.LeaseID(lease))); err != nil {
		return fmt.Errorf("drain node %s: %w", node, err)
	}
	return nil
}

// Undrain lets node take agents again.
func Undrain(ctx context.Context, cli *clientv3.Client, fleet, node string) error {
	if _, err := cli.Delete(ctx, Prefix(fleet)+drainDir+node); err != nil {
		return fmt.Errorf("undrain node %s: %w", node, err)
	}
	return nil
}
