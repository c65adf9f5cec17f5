package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/backoff"
)

// ReconcileOnce compares what etcd says with what this node runs and
// starts the transitions that bring them together, each in a goroutine
// of the node (bounded; Wait waits for them):
//
//   - an agent unowned whose desired node (Assign) is this one: acquire;
//   - an agent this node owns whose desired node is another, registered
//     for at least the settle time: hand off;
//   - an agent owned under this node's lease that it does not run (it
//     dropped it during an etcd outage the lease survived): resume;
//   - an agent this node runs that etcd says it does not own: drop.
//
// Nothing is decided while the node is fenced, so an etcd outage moves
// no agent.
func (n *Node) ReconcileOnce(ctx context.Context) {
	now := time.Now()
	n.mu.Lock()
	if n.fenceLocked(now) != nil {
		n.mu.Unlock()
		return
	}
	me, lease := n.cfg.Node, int64(n.lease)
	settledSelf := now.Sub(n.registeredAt) >= n.settle
	desired := Assign(n.eligibleLocked())
	type todo struct {
		id, to string
		kind   string
		token  int64
	}
	var work []todo
	var drop []string
	for _, id := range n.ids {
		o, held := n.view.owners[id]
		loc := n.own[id]
		want := desired[id]
		if at, ok := n.retryAt[id]; ok && now.Before(at) {
			continue
		}
		if loc != nil && loc.token > n.view.rev {
			continue // the view has not seen this node's acquisition yet
		}
		switch {
		case held && o.lease == lease:
			switch {
			case loc == nil && n.released[id] == o.token:
				// Released by this node; the view has not seen it yet.
			case loc == nil && !n.leaving:
				work = append(work, todo{id: id, kind: "resume", token: o.token})
			case loc == nil:
			case loc.state == Owned && want != "" && want != me && n.settledLocked(want, now):
				work = append(work, todo{id: id, to: want, kind: "handoff"})
			case loc.state == Owned && n.leaving:
				work = append(work, todo{id: id, kind: "handoff"})
			}
		case held:
			if loc != nil && loc.state != Acquiring {
				drop = append(drop, id)
			}
		default:
			if loc != nil && (loc.state == Owned || loc.state == HandingOff) {
				drop = append(drop, id)
			} else if loc == nil && want == me && settledSelf && !n.leaving && n.agents[id].Missing == "" {
				work = append(work, todo{id: id, kind: "acquire"})
			}
		}
	}
	// Mark before starting, so the next round does not start them again.
	for _, w := range work {
		switch w.kind {
		case "acquire", "resume":
			n.own[w.id] = n.newOwned(Acquiring, w.token)
		case "handoff":
			n.own[w.id].state, n.own[w.id].to = HandingOff, w.to
		}
	}
	n.mu.Unlock()
	for _, id := range drop {
		n.log.Error("etcd says another node owns this agent (or none does): dropping it without writing", "agent", id)
		n.drop(id, "not the owner any more")
	}
	// Acquisitions take their owner keys together, in a few
	// transactions, before any agent is opened: ownership is settled in
	// moments however many agents there are, and opening each (restores,
	// record reads, first snapshots) follows, bounded.
	var take []string
	for _, w := range work {
		if w.kind == "acquire" {
			take = append(take, w.id)
		}
	}
	if len(take) > 0 {
		n.work.Add(1)
		go func() {
			defer n.work.Done()
			n.acquireAll(ctx, take)
		}()
	}
	for _, w := range work {
		if w.kind == "acquire" {
			continue
		}
		n.work.Add(1)
		go func() {
			defer n.work.Done()
			if !n.slot(ctx, w.id) {
				return
			}
			defer func() { <-n.sem }()
			var err error
			switch w.kind {
			case "resume":
				err = n.resume(ctx, w.id, w.token)
			case "handoff":
				err = n.handOff(ctx, w.id, w.to)
			}
			if err != nil && ctx.Err() == nil {
				n.log.Warn("fleet transition failed; will retry", "agent", w.id, "transition", w.kind, "error", err)
			}
		}()
	}
}

// slot waits for room among the transitions in flight; false (the
// transition forgotten) when ctx ends first.
func (n *Node) slot(ctx context.Context, id string) bool {
	select {
	case n.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		n.abandon(id)
		return false
	}
}

// acquireAll takes the owner keys of ids (marked Acquiring) in batches,
// then opens each agent taken, bounded by the node's concurrency.
func (n *Node) acquireAll(ctx context.Context, ids []string) {
	start := time.Now()
	tokens, err := n.take(ctx, ids)
	if err != nil && ctx.Err() == nil {
		n.log.Warn("taking agents failed; will retry", "agents", len(ids)-len(tokens), "error", err)
	}
	if len(tokens) > 0 {
		n.log.Info("agents taken", "agents", len(tokens), "took", time.Since(start).Round(time.Millisecond))
	}
	for _, id := range ids {
		token, ok := tokens[id]
		if !ok {
			continue
		}
		n.work.Add(1)
		go func() {
			defer n.work.Done()
			if !n.slot(ctx, id) {
				return
			}
			defer func() { <-n.sem }()
			if err := n.openTaken(ctx, id, token, start); err != nil && ctx.Err() == nil && !errors.Is(err, ErrNotOwner) {
				n.log.Warn("fleet transition failed; will retry", "agent", id, "transition", "acquire", "error", err)
			}
		}()
	}
}

// takeBatch is how many owner keys one transaction creates: etcd refuses
// a transaction of more than 128 operations (--max-txn-ops).
const takeBatch = 100

// take creates the owner keys of ids (each marked Acquiring here), each
// only if it is absent, bound to the node's lease: one transaction per
// takeBatch agents, each agent's create a transaction of its own within
// it, so that one agent owned elsewhere does not stop the others. It
// returns the token of each agent taken; an agent not taken is
// forgotten (owned elsewhere: the view will say so; a failed request:
// retried after a backoff). An agent dropped meanwhile is released.
func (n *Node) take(ctx context.Context, ids []string) (map[string]int64, error) {
	n.mu.Lock()
	lease := n.lease
	n.mu.Unlock()
	tokens := map[string]int64{}
	var errs []error
	for batch := range slices.Chunk(ids, takeBatch) {
		ops := make([]clientv3.Op, len(batch))
		for i, id := range batch {
			key := n.key(ownersDir, id)
			ops[i] = clientv3.OpTxn(
				[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
				[]clientv3.Op{clientv3.OpPut(key, encode(Owner{Node: n.cfg.Node, Lease: int64(lease), Since: time.Now().UTC()}), clientv3.WithLease(lease))},
				nil)
		}
		var resp *clientv3.TxnResponse
		err := n.fenceLocked0()
		if err == nil {
			rctx, cancel := n.requestCtx(ctx)
			resp, err = n.cli.Txn(rctx).Then(ops...).Commit()
			cancel()
		}
		if err == nil && len(resp.Responses) != len(batch) {
			err = fmt.Errorf("etcd answered %d of %d", len(resp.Responses), len(batch))
		}
		for i, id := range batch {
			n.mu.Lock()
			o := n.own[id]
			n.mu.Unlock()
			switch {
			case err != nil:
				if o != nil {
					n.forget(id, o)
				}
				n.failed(id)
			case !resp.Responses[i].GetResponseTxn().GetSucceeded():
				if o != nil {
					n.forget(id, o)
				}
			case o == nil || o.ctx.Err() != nil:
				// Dropped while its key was being taken (a lost lease):
				// give the key back.
				n.releaseKey(id, resp.Header.Revision)
			default:
				n.mu.Lock()
				o.token = resp.Header.Revision
				n.mu.Unlock()
				tokens[id] = resp.Header.Revision
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("take %d agents: %w", len(batch), err))
		}
	}
	return tokens, errors.Join(errs...)
}

// fenceLocked0 is fenceLocked, taking the lock.
func (n *Node) fenceLocked0() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fenceLocked(time.Now())
}

// abandon forgets a transition that never started.
func (n *Node) abandon(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch o := n.own[id]; {
	case o == nil:
	case o.state == Acquiring:
		delete(n.own, id)
	case o.state == HandingOff:
		o.state, o.to = Owned, ""
	}
}

func (n *Node) newOwned(s State, token int64) *owned {
	ctx, cancel := context.WithCancel(context.Background())
	return &owned{state: s, token: token, since: time.Now(), ctx: ctx, cancel: cancel}
}

// eligibleLocked lists, for every agent some live node can open, the
// nodes that may own it: registered, not draining, its key loaded.
func (n *Node) eligibleLocked() map[string][]string {
	out := map[string][]string{}
	for name, e := range n.view.nodes {
		if e.bad != "" {
			continue
		}
		draining := e.info.Draining || n.view.drain[name]
		if name == n.cfg.Node {
			draining = draining || n.leaving
		}
		for a := range e.info.Missing {
			if _, ok := out[a]; !ok {
				out[a] = nil
			}
		}
		for _, a := range e.info.Agents {
			if !draining {
				out[a] = append(out[a], name)
			} else if _, ok := out[a]; !ok {
				out[a] = nil
			}
		}
	}
	return out
}

// settledLocked reports whether node name has been registered for the
// settle time, as this node saw it.
func (n *Node) settledLocked(name string, now time.Time) bool {
	e, ok := n.view.nodes[name]
	return ok && now.Sub(e.seen) >= n.settle
}

// failed schedules the next transition of agent id after a failure.
func (n *Node) failed(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failures[id]++
	b := backoff.Backoff{Min: n.cfg.TTL / 2, Max: 5 * time.Minute}
	n.retryAt[id] = time.Now().Add(b.Wait(n.failures[id]))
}

func (n *Node) succeeded(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.failures, id)
	delete(n.retryAt, id)
}

// Acquire takes agent id for this node: its owner key, created in a
// transaction only if absent (so the node waits for the previous owner's
// release or lease expiry, never less), then the fleet head read, the
// brain brought up to date (Host.Open) and on_acquire run.
func (n *Node) Acquire(ctx context.Context, id string) error {
	n.mu.Lock()
	if err := n.fenceLocked(time.Now()); err != nil {
		n.mu.Unlock()
		return err
	}
	if n.own[id] != nil {
		n.mu.Unlock()
		return fmt.Errorf("agent %s is %s here already", id, n.own[id].state)
	}
	n.own[id] = n.newOwned(Acquiring, 0)
	n.mu.Unlock()
	return n.acquire(ctx, id)
}

func (n *Node) acquire(ctx context.Context, id string) error {
	start := time.Now()
	tokens, err := n.take(ctx, []string{id})
	if err != nil {
		return fmt.Errorf("take agent %s: %w", id, err)
	}
	token, ok := tokens[id]
	if !ok {
		return ErrTaken
	}
	return n.openTaken(ctx, id, token, start)
}

// openTaken opens agent id, whose owner key this node created with
// token.
func (n *Node) openTaken(ctx context.Context, id string, token int64, start time.Time) error {
	o, err := n.locked(id)
	if err != nil {
		return err
	}
	defer o.mu.Unlock()
	if o.token != token {
		return ErrNotOwner
	}
	return n.open(ctx, id, o, Ownership{Token: token}, start)
}

// resume runs again an agent this node still owns under its lease.
func (n *Node) resume(ctx context.Context, id string, token int64) error {
	o, err := n.locked(id)
	if err != nil {
		return err
	}
	defer o.mu.Unlock()
	return n.open(ctx, id, o, Ownership{Token: token, Resumed: true}, time.Now())
}

// locked returns agent id's record here with its transition lock held,
// once the transition in flight (if any) has ended; ErrNotOwner when
// there is none or it was dropped meanwhile.
func (n *Node) locked(id string) (*owned, error) {
	n.mu.Lock()
	o := n.own[id]
	n.mu.Unlock()
	if o == nil {
		return nil, ErrNotOwner
	}
	o.mu.Lock()
	if n.ownedAs(id, o) != nil {
		o.mu.Unlock()
		return nil, ErrNotOwner
	}
	return o, nil
}

// ownedAs says whether o is still agent id's here and not dropped.
func (n *Node) ownedAs(id string, o *owned) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.own[id] != o || o.ctx.Err() != nil {
		return ErrNotOwner
	}
	return nil
}

// open is the rest of an acquisition: read the fleet head, bring the
// brain up to date, run on_acquire. A failure releases the agent (its
// key deleted) and backs off.
func (n *Node) open(ctx context.Context, id string, o *owned, own Ownership, start time.Time) error {
	actx, cancel := mergeCtx(ctx, o.ctx)
	defer cancel()
	head, err := n.ReadHead(actx, id)
	if err == nil {
		own.Head = head
		err = n.host.Open(actx, id, own)
	}
	if err != nil {
		n.obs.Acquired(id, own, time.Since(start), err)
		n.host.Close(id)
		// The backoff before the release: a reconcile between the two
		// would see the agent free and take it again at once.
		n.failed(id)
		n.release(id, o, own.Token)
		return fmt.Errorf("open agent %s: %w", id, err)
	}
	ag := n.agents[id]
	if o.ctx.Err() == nil {
		n.runHook(actx, "acquire", ag, ag.Hooks.OnAcquire, ag.Hooks.Timeout)
	}
	n.mu.Lock()
	dropped := n.own[id] != o
	if !dropped {
		o.state, o.since = Owned, time.Now()
	}
	count := n.ownedLocked()
	n.mu.Unlock()
	if dropped {
		return ErrNotOwner
	}
	n.succeeded(id)
	n.obs.Owned(count)
	n.obs.Acquired(id, own, time.Since(start), nil)
	how := "taken"
	if own.Resumed {
		how = "resumed"
	}
	n.log.Info("agent acquired", "agent", id, "how", how, "token", own.Token, "head", headValue(own.Head),
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

func headValue(h *Head) string {
	if h == nil {
		return ""
	}
	return h.Value
}

// ownedLocked counts the agents this node owns.
func (n *Node) ownedLocked() int {
	c := 0
	for _, o := range n.own {
		if o.state == Owned || o.state == HandingOff {
			c++
		}
	}
	return c
}

// forget removes o (still id's) from the node.
func (n *Node) forget(id string, o *owned) {
	n.mu.Lock()
	if n.own[id] == o {
		delete(n.own, id)
	}
	count := n.ownedLocked()
	n.mu.Unlock()
	o.cancel()
	n.obs.Owned(count)
}

// release deletes agent id's owner key if it is still token's, and the
// hand-off record, and forgets the agent.
func (n *Node) release(id string, o *owned, token int64) error {
	n.mu.Lock()
	n.released[id] = token
	n.mu.Unlock()
	n.forget(id, o)
	return n.releaseKey(id, token)
}

// releaseKey deletes agent id's owner key, and its hand-off record, if
// the key is still token's.
func (n *Node) releaseKey(id string, token int64) error {
	key := n.key(ownersDir, id)
	ctx, cancel := n.requestCtx(context.Background())
	defer cancel()
	_, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", token)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(n.key(handoffsDir, id))).
		Commit()
	if err != nil {
		return fmt.Errorf("release agent %s: %w", id, err)
	}
	return nil
}

// requestCtx bounds one etcd request by the fence's margin.
func (n *Node) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(n.cfg.TTL/2, time.Second))
}

// HandOff gives agent id up (to node to, "" for whichever takes it): it
// runs on_release (the runtime stops writing), has the host take the
// last snapshot and write the fleet head, stops the agent, and releases
// its owner key, which the taker waits for. Bounded by HandoffTimeout; a
// hand-off that fails keeps the agent here (on_acquire runs again) and
// is retried later.
func (n *Node) HandOff(ctx context.Context, id, to string) error {
	n.mu.Lock()
	o := n.own[id]
	if o == nil || o.state != Owned {
		n.mu.Unlock()
		return fmt.Errorf("%w (%s)", ErrNotOwner, id)
	}
	o.state, o.to = HandingOff, to
	n.mu.Unlock()
	return n.handOff(ctx, id, to)
}

func (n *Node) handOff(ctx context.Context, id, to string) error {
	start := time.Now()
	n.mu.Lock()
	o := n.own[id]
	n.mu.Unlock()
	if o == nil {
		return ErrNotOwner
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.state != HandingOff || o.ctx.Err() != nil {
		return ErrNotOwner
	}
	hctx, cancel := mergeCtx(ctx, o.ctx)
	defer cancel()
	hctx, cancel2 := context.WithTimeout(hctx, n.cfg.HandoffTimeout)
	defer cancel2()
	log := n.log.With("agent", id, "to", to)
	log.Info("handing off")
	n.noteStep(id, o, to, "on_release")
	ag := n.agents[id]
	n.runHook(hctx, "release", ag, ag.Hooks.OnRelease, ag.Hooks.Timeout)
	n.noteStep(id, o, to, "last snapshot")
	if err := n.host.Final(hctx, id); err != nil {
		err = fmt.Errorf("last snapshot: %w", err)
		n.obs.HandedOff(id, time.Since(start), err)
		n.mu.Lock()
		still := n.own[id] == o
		if still {
			o.state, o.to, o.step = Owned, "", ""
		}
		n.mu.Unlock()
		n.deleteHandoff(id)
		if still && o.ctx.Err() == nil {
			// The runtime was stopped for nothing: start it again.
			log.Warn("hand-off abandoned; the agent stays here", "error", err)
			n.runHook(o.ctx, "acquire", ag, ag.Hooks.OnAcquire, ag.Hooks.Timeout)
		}
		n.failed(id)
		return err
	}
	n.mu.Lock()
	o.state = Releasing
	n.mu.Unlock()
	n.host.Close(id)
	err := n.release(id, o, o.token)
	n.succeeded(id)
	n.obs.HandedOff(id, time.Since(start), err)
	log.Info("agent handed off", "took", time.Since(start).Round(time.Millisecond), "error", err)
	return err
}

// noteStep records a hand-off's step in etcd (bound to the lease; for
// fleet status), best effort.
func (n *Node) noteStep(id string, o *owned, to, step string) {
	n.mu.Lock()
	o.step = step
	lease := n.lease
	n.mu.Unlock()
	ctx, cancel := n.requestCtx(context.Background())
	defer cancel()
	n.cli.Put(ctx, n.key(handoffsDir, id), encode(Handoff{From: n.cfg.Node, To: to, Since: o.since.UTC(), Step: step}), clientv3.WithLease(lease))
}

func (n *Node) deleteHandoff(id string) {
	ctx, cancel := n.requestCtx(context.Background())
	defer cancel()
	n.cli.Delete(ctx, n.key(handoffsDir, id))
}

// drop stops agent id without writing anything for it: its gate closes
// at once, its transitions end, on_release runs, the host closes it.
func (n *Node) drop(id, why string) {
	n.mu.Lock()
	o := n.own[id]
	if o != nil {
		delete(n.own, id)
	}
	count := n.ownedLocked()
	n.mu.Unlock()
	if o == nil {
		return
	}
	o.cancel()
	n.obs.Owned(count)
	o.mu.Lock() // the transition in flight, if any, has ended
	defer o.mu.Unlock()
	ag := n.agents[id]
	ctx, cancel := context.WithTimeout(context.Background(), max(ag.Hooks.Timeout, time.Second)+time.Second)
	defer cancel()
	n.runHook(ctx, "release", ag, ag.Hooks.OnRelease, ag.Hooks.Timeout)
	n.host.Close(id)
	n.log.Warn("agent dropped", "agent", id, "reason", why)
}

// dropAll drops every agent (a lost lease), together.
func (n *Node) dropAll(why string) {
	n.mu.Lock()
	ids := make([]string, 0, len(n.own))
	for id := range n.own {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.drop(id, why)
		}()
	}
	wg.Wait()
}

// Drop drops agent id without writing (tests; an agent whose key was
// taken away).
func (n *Node) Drop(id string) { n.drop(id, "asked") }

// Leave hands every agent off before a clean stop, within ctx: the node
// says it is draining (so no node chooses it), gives each agent up as a
// hand-off does, then revokes its lease. Agents whose hand-off failed
// are dropped; the error names them.
func (n *Node) Leave(ctx context.Context) error {
	n.mu.Lock()
	n.leaving = true
	lease := n.lease
	var ids []string
	for id, o := range n.own {
		if o.state == Owned {
			o.state, o.to = HandingOff, ""
			ids = append(ids, id)
		}
	}
	n.mu.Unlock()
	if lease != 0 {
		n.putInfo(ctx)
	}
	// Wait for the transitions in flight (an acquisition finishes and is
	// handed off below; a hand-off finishes on its own).
	n.work.Wait()
	n.mu.Lock()
	for id, o := range n.own {
		if o.state == Owned {
			o.state, o.to = HandingOff, ""
			ids = append(ids, id)
		}
	}
	n.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.handOff(ctx, id, ""); err != nil && !errors.Is(err, ErrNotOwner) {
				mu.Lock()
				failed = append(failed, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	n.dropAll("stopping")
	n.mu.Lock()
	n.lease = 0
	n.mu.Unlock()
	if lease != 0 {
		n.revoke(lease)
		n.log.Info("node left the fleet", "node", n.cfg.Node)
	}
	if len(failed) > 0 {
		return fmt.Errorf("hand-off failed (the next owner restores the last fleet head): %v", failed)
	}
	return nil
}

// putInfo rewrites the node's record (draining), if the lease is still
// the one it is bound to.
func (n *Node) putInfo(ctx context.Context) {
	n.mu.Lock()
	lease := n.lease
	n.mu.Unlock()
	key := n.key(nodesDir, n.cfg.Node)
	rctx, cancel := n.requestCtx(ctx)
	defer cancel()
	n.cli.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpPut(key, encode(n.info()), clientv3.WithLease(lease))).Commit()
}

// ReadHead reads agent id's fleet head (nil: none), linearizably.
func (n *Node) ReadHead(ctx context.Context, id string) (*Head, error) {
	rctx, cancel := n.requestCtx(ctx)
	defer cancel()
	resp, err := n.cli.Get(rctx, n.key(headsDir, id))
	if err != nil {
		return nil, fmt.Errorf("read the fleet head of %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var h Head
	if err := decode(resp.Kvs[0].Value, &h); err != nil {
		return nil, fmt.Errorf("the fleet head of %s: %w", id, err)
	}
	return &h, nil
}

// PutHead writes agent id's fleet head, in a transaction conditioned on
// this node still owning the agent under the token it took it with, and
// refused while the node is fenced. It is the pointer package's to call
// (the fleet head is a place of the agent's head).
func (n *Node) PutHead(ctx context.Context, id string, h Head) error {
	if err := n.Gate(id, "fleet_head"); err != nil {
		return err
	}
	n.mu.Lock()
	o := n.own[id]
	n.mu.Unlock()
	if o == nil {
		return ErrNotOwner
	}
	h.Node, h.Token, h.At = n.cfg.Node, o.token, time.Now().UTC()
	key := n.key(ownersDir, id)
	rctx, cancel := n.requestCtx(ctx)
	defer cancel()
	resp, err := n.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", o.token)).
		Then(clientv3.OpPut(n.key(headsDir, id), encode(h))).
		Commit()
	if err != nil {
		return fmt.Errorf("write the fleet head of %s: %w", id, err)
	}
	if !resp.Succeeded {
		n.Kick() // reconcile drops it
		return fmt.Errorf("write the fleet head of %s: %w (its owner key changed)", id, ErrNotOwner)
	}
	return nil
}

// mergeCtx is a context that ends when either ends.
func mergeCtx(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
