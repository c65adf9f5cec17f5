package fleettest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The fleet's keys below /hermesd/<fleet>/ (docs/fleet.md): nodes/<node>
// (bound to the node's lease), owners/<agent> (bound to the owner's lease;
// its create revision is the ownership token), heads/<agent> (no lease).
// The values are read only for the fields the checker needs.
const (
	nodesDir  = "nodes/"
	ownersDir = "owners/"
	headsDir  = "heads/"
)

// Prefix is the etcd key prefix of a fleet.
func Prefix(fleet string) string { return "/hermesd/" + fleet + "/" }

type ownerValue struct {
	Node string `json:"node"`
}

type headValue struct {
	Value      string `json:"value"`
	BundleHash string `json:"bundleHash"`
	Node       string `json:"node"`
	Token      int64  `json:"token"`
}

// Event is one change of a fleet key, as etcd's history holds it, with
// the moment the recorder saw it.
type Event struct {
	Rev       int64
	Delete    bool
	Key       string
	Value     []byte // a put's value
	Lease     int64
	CreateRev int64
	At        time.Time
}

// recorder watches a fleet's keys from revision 1 (etcd's whole history:
// the test members never compact) and keeps every event with the moment
// it arrived. Its goroutine ends with Close.
type recorder struct {
	prefix string
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	events  []Event
	err     error
	changed chan struct{} // closed and replaced on every batch of events
}

func startRecorder(cl *clientv3.Client, prefix string) *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{prefix: prefix, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	go r.run(clientv3.WithRequireLeader(ctx), cl)
	return r
}

func (r *recorder) run(ctx context.Context, cl *clientv3.Client) {
	defer close(r.done)
	next := int64(1)
	for ctx.Err() == nil {
		// A watch ends when its member goes away (WithRequireLeader: also
		// when it loses its leader); it starts again from the next
		// revision, so nothing is seen twice or missed.
		for resp := range cl.Watch(ctx, r.prefix, clientv3.WithPrefix(), clientv3.WithRev(next)) {
			if err := resp.Err(); err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				break
			}
			now := time.Now()
			r.mu.Lock()
			for _, ev := range resp.Events {
				e := Event{Rev: ev.Kv.ModRevision, Delete: ev.Type == clientv3.EventTypeDelete, Key: string(ev.Kv.Key),
					Lease: ev.Kv.Lease, CreateRev: ev.Kv.CreateRevision, At: now}
				if !e.Delete {
					e.Value = ev.Kv.Value
				}
				r.events = append(r.events, e)
				next = e.Rev + 1
			}
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // a member down: try the others
		}
	}
}

// snapshot returns the events so far and a channel closed on the next.
func (r *recorder) snapshot() ([]Event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...), r.changed
}

func (r *recorder) close() {
	r.cancel()
	<-r.done
}

// fleetState is what the events say about the fleet at their end.
type fleetState struct {
	Nodes  map[string]int64  // live node → its lease
	Owners map[string]string // agent → owner
	Heads  map[string]headValue
}

// replay folds events into the checker's histories and the state at
// their end; open spans stay open (To zero).
func replay(prefix string, evs []Event) (leases []LeaseSpan, owners []Ownership, heads []HeadWrite, st fleetState, err error) {
	st = fleetState{Nodes: map[string]int64{}, Owners: map[string]string{}, Heads: map[string]headValue{}}
	openLease := map[string]int{} // node → index in leases
	openOwner := map[string]int{} // agent → index in owners
	for _, e := range evs {
		rest, ok := strings.CutPrefix(e.Key, prefix)
		if !ok {
			continue
		}
		dir, name, ok := strings.Cut(rest, "/")
		if !ok || name == "" || strings.Contains(name, "/") {
			continue
		}
		switch dir + "/" {
		case nodesDir:
			if i, ok := openLease[name]; ok && (e.Delete || leases[i].Lease != e.Lease) {
				leases[i].To, leases[i].ToRev = e.At, e.Rev
				delete(openLease, name)
				delete(st.Nodes, name)
			}
			if !e.Delete {
				if _, ok := openLease[name]; !ok {
					leases = append(leases, LeaseSpan{Node: name, Lease: e.Lease, From: e.At, FromRev: e.Rev})
					openLease[name] = len(leases) - 1
				}
				st.Nodes[name] = e.Lease
			}
		case ownersDir:
			if e.Delete {
				if i, ok := openOwner[name]; ok {
					owners[i].To, owners[i].EndRev = e.At, e.Rev
					delete(openOwner, name)
				}
				delete(st.Owners, name)
				continue
			}
			var v ownerValue
			if err := json.Unmarshal(e.Value, &v); err != nil || v.Node == "" {
				return nil, nil, nil, st, fmt.Errorf("revision %d: %s: not an owner (%v): %.200q", e.Rev, e.Key, err, e.Value)
			}
			if i, ok := openOwner[name]; ok && owners[i].Token == e.CreateRev {
				owners[i].Node = v.Node // an update of the same ownership
			} else {
				owners = append(owners, Ownership{Agent: name, Node: v.Node, Token: e.CreateRev, From: e.At})
				openOwner[name] = len(owners) - 1
			}
			st.Owners[name] = v.Node
		case headsDir:
			if e.Delete {
				continue
			}
			var v headValue
			if err := json.Unmarshal(e.Value, &v); err != nil || v.Value == "" {
				return nil, nil, nil, st, fmt.Errorf("revision %d: %s: not a head (%v): %.200q", e.Rev, e.Key, err, e.Value)
			}
			heads = append(heads, HeadWrite{Agent: name, Node: v.Node, Value: v.Value, Token: v.Token, Rev: e.Rev, At: e.At})
			st.Heads[name] = v
		}
	}
	return leases, owners, heads, st, nil
}
