package fleet

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// view is what a node knows of the fleet: the keys that decide
// ownership, as of revision rev, kept current by a watch (the fleet
// heads are not in it: they change with every snapshot, and no decision
// reads them).
type view struct {
	rev      int64
	nodes    map[string]nodeEntry
	owners   map[string]ownerEntry
	drain    map[string]bool
	handoffs map[string]Handoff
}

type nodeEntry struct {
	info  NodeInfo
	lease int64
	seen  time.Time // when this node first saw it registered (settling)
	bad   string    // the record could not be read
}

type ownerEntry struct {
	Owner
	token int64 // the key's create revision
	lease int64 // the key's lease
}

func newView() view {
	return view{nodes: map[string]nodeEntry{}, owners: map[string]ownerEntry{}, drain: map[string]bool{}, handoffs: map[string]Handoff{}}
}

// The two key ranges a node watches: drain/ and handoffs/, then nodes/
// and owners/ (heads/ sorts between them).
func (n *Node) ranges() [][2]string {
	p := n.prefix
	return [][2]string{{p + drainDir, p + headsDir}, {p + nodesDir, p + "owners0"}}
}

// load reads the watched ranges at one revision into a fresh view.
func (n *Node) load(ctx context.Context) (view, error) {
	v := newView()
	now := time.Now()
	for i, r := range n.ranges() {
		opts := []clientv3.OpOption{clientv3.WithRange(r[1])}
		if i > 0 {
			opts = append(opts, clientv3.WithRev(v.rev))
		}
		resp, err := n.cli.Get(ctx, r[0], opts...)
		if err != nil {
			return view{}, fmt.Errorf("read the fleet: %w", err)
		}
		if i == 0 {
			v.rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			n.apply(&v, kv, false, now)
		}
	}
	n.mu.Lock()
	// Keep when each node was first seen.
	for name, e := range v.nodes {
		if old, ok := n.view.nodes[name]; ok && old.lease == e.lease {
			e.seen = old.seen
			v.nodes[name] = e
		}
	}
	n.mu.Unlock()
	return v, nil
}

// apply applies one key's new value (or its deletion) to v.
func (n *Node) apply(v *view, kv *mvccpb.KeyValue, deleted bool, now time.Time) {
	key := string(kv.Key)
	p := n.prefix
	if id := name(p, ownersDir, key); id != "" {
		if deleted {
			delete(v.owners, id)
			return
		}
		var o Owner
		if err := decode(kv.Value, &o); err != nil {
			o = Owner{Node: "?"}
		}
		v.owners[id] = ownerEntry{Owner: o, token: kv.CreateRevision, lease: kv.Lease}
		return
	}
	if nd := name(p, nodesDir, key); nd != "" {
		if deleted {
			delete(v.nodes, nd)
			return
		}
		e := nodeEntry{lease: kv.Lease, seen: now}
		if old, ok := v.nodes[nd]; ok && old.lease == kv.Lease {
			e.seen = old.seen
		}
		if err := decode(kv.Value, &e.info); err != nil {
			e.bad = err.Error()
		}
		e.info.Node = nd
		v.nodes[nd] = e
		return
	}
	if nd := name(p, drainDir, key); nd != "" {
		if deleted {
			delete(v.drain, nd)
		} else {
			v.drain[nd] = true
		}
		return
	}
	if id := name(p, handoffsDir, key); id != "" {
		if deleted {
			delete(v.handoffs, id)
			return
		}
		var h Handoff
		if decode(kv.Value, &h) == nil {
			v.handoffs[id] = h
		}
	}
}

// watch keeps the view current until ctx ends: it loads the view, then
// applies what the watches deliver, loading again after a watch fails
// (a compacted revision, a lost connection).
func (n *Node) watch(ctx context.Context) {
	for ctx.Err() == nil {
		v, err := n.load(ctx)
		if err != nil {
			n.log.Debug("fleet view not loaded; retrying", "error", err)
			if !sleep(ctx, n.cfg.TTL/5) {
				return
			}
			continue
		}
		n.setView(v)
		n.follow(ctx, v.rev)
	}
}

// follow applies watch events after rev until a watch fails or ctx ends.
func (n *Node) follow(ctx context.Context, rev int64) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	rs := n.ranges()
	chans := make([]clientv3.WatchChan, len(rs))
	for i, r := range rs {
		chans[i] = n.cli.Watch(wctx, r[0], clientv3.WithRange(r[1]), clientv3.WithRev(rev+1))
	}
	merged := make(chan clientv3.WatchResponse)
	for _, ch := range chans {
		go func() {
			for resp := range ch {
				select {
				case merged <- resp:
				case <-wctx.Done():
					return
				}
			}
			select {
			case merged <- clientv3.WatchResponse{Canceled: true}:
			case <-wctx.Done():
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case resp := <-merged:
			if resp.Canceled || resp.Err() != nil {
				return
			}
			n.mu.Lock()
			now := time.Now()
			for _, ev := range resp.Events {
				n.apply(&n.view, ev.Kv, ev.Type == clientv3.EventTypeDelete, now)
			}
			if resp.Header.Revision > n.view.rev {
				n.view.rev = resp.Header.Revision
			}
			n.changedLocked()
			n.mu.Unlock()
			n.Kick()
		}
	}
}

// setView replaces the view.
func (n *Node) setView(v view) {
	n.mu.Lock()
	n.view = v
	n.changedLocked()
	n.mu.Unlock()
	n.Kick()
}

// changedLocked wakes whoever waits for the view to change.
func (n *Node) changedLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
