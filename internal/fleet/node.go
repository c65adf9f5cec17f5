package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Errors of a refused write or transition.
var (
	// ErrFenced: the node has not renewed its lease for half its TTL
	// (or has none): it writes nothing until it does.
	ErrFenced = errors.New("fenced: this node's etcd lease is not known to be held")
	// ErrNotOwner: this node does not own the agent (any more).
	ErrNotOwner = errors.New("this node does not own the agent")
	// ErrTaken: another node owns the agent.
	ErrTaken = errors.New("another node owns the agent")
	// ErrNodeTaken: another live process is registered under this
	// node's name.
	ErrNodeTaken = errors.New("another live process is registered under this node's name")
)

// Agent is one agent this node is configured with.
type Agent struct {
	ID       string
	BrainDir string
	ENSName  string
	// Missing says why this node cannot open the agent (its key is not
	// loaded); "" when it can. A node owns only agents it can open.
	Missing string
	Hooks   Hooks
}

// Ownership is what a node knows of an agent it has just come to own.
type Ownership struct {
	// Token is the owner key's create revision.
	Token int64
	// Head is the agent's fleet head as etcd held it when the node
	// took the agent (nil: none).
	Head *Head
	// Resumed: this node owned the agent all along, under the same
	// lease; it had dropped it because it could not reach etcd for a
	// whole TTL. Its local brain is the newest there is.
	Resumed bool
}

// Host runs the agents a node owns: the daemon.
type Host interface {
	// Open brings the agent's brain up to date for its new owner (from
	// o.Head, the ENS record, or as it is) and starts protecting it.
	// It returns once the brain is in place.
	Open(ctx context.Context, id string, o Ownership) error
	// Final takes the agent's last snapshot (an unchanged brain takes
	// none) and makes its fleet head current.
	Final(ctx context.Context, id string) error
	// Close stops the agent; nothing of it runs when Close returns.
	Close(id string)
}

// Observer receives what a node does, for metrics. Every method must be
// cheap and non-blocking.
type Observer interface {
	Owned(n int)
	Fenced(fenced bool)
	Renewed(took time.Duration, err error)
	LeaseLost()
	Acquired(agent string, o Ownership, took time.Duration, err error)
	HandedOff(agent string, took time.Duration, err error)
	Refused(kind string)
	Hook(event string, err error)
}

// Config is one node of a fleet.
type Config struct {
	Client *clientv3.Client
	Fleet  string
	Node   string
	TTL    time.Duration
	// HandoffTimeout bounds one hand-off by the giver.
	HandoffTimeout time.Duration
	// Agents are the agents this node is configured with.
	Agents []Agent
	// API and Version are advertised in the node's record.
	API, Version string
	// PreviousLease is the lease this node's previous process held
	// (recorded in its state directory, whose lock says that process
	// is gone; 0: none): a registration of this node bound to it is
	// revoked at once instead of waited out.
	PreviousLease int64
	// Registered is told each new lease, to record it.
	Registered func(lease int64)
	// Concurrency bounds the acquisitions and hand-offs in flight.
	Concurrency int
	Observer    Observer
	Log         *slog.Logger
}

// Node is this process's node of a fleet. New, then Run; Leave before
// the end of a clean stop.
type Node struct {
	cfg    Config
	cli    *clientv3.Client
	prefix string
	host   Host
	obs    Observer
	log    *slog.Logger
	agents map[string]Agent
	ids    []string // sorted
	settle time.Duration
	sem    chan struct{}
	kick   chan struct{}
	work   sync.WaitGroup // transitions in flight

	mu           sync.Mutex
	lease        clientv3.LeaseID // 0: not registered
	renewed      time.Time        // when the last successful renewal was sent
	registeredAt time.Time
	lost         bool // a whole TTL of silence: agents dropped, the lease may be gone
	fenced       bool // as last reported
	leaving      bool
	own          map[string]*owned
	retryAt      map[string]time.Time // no transition of the agent before
	failures     map[string]int
	released     map[string]int64 // the token of each agent's last release here
	view         view
	changed      chan struct{} // closed when the view changes
}

// State is where an agent's ownership is on this node.
type State string

const (
	Unowned    State = "unowned"
	Acquiring  State = "acquiring"
	Owned      State = "owned"
	HandingOff State = "handing-off"
	Releasing  State = "releasing"
)

// owned is an agent this node owns or is taking or giving.
type owned struct {
	state State
	token int64
	since time.Time
	to    string // hand-off: the node it goes to
	step  string // hand-off: its step
	// mu serialises the agent's transitions; ctx ends when the agent is
	// dropped.
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns the node; nothing runs until Run.
func New(cfg Config, host Host) (*Node, error) {
	if cfg.Client == nil || cfg.Fleet == "" || cfg.Node == "" || cfg.TTL < time.Second || host == nil {
		return nil, errors.New("fleet: client, fleet, node, a TTL of at least 1s and a host are required")
	}
	if cfg.HandoffTimeout <= 0 {
		cfg.HandoffTimeout = 2 * time.Minute
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg: cfg, cli: cfg.Client, prefix: Prefix(cfg.Fleet), host: host, obs: cfg.Observer,
		log: cfg.Log, agents: map[string]Agent{}, settle: cfg.TTL / 2,
		sem: make(chan struct{}, cfg.Concurrency), kick: make(chan struct{}, 1),
		own: map[string]*owned{}, retryAt: map[string]time.Time{}, failures: map[string]int{}, released: map[string]int64{},
		view: newView(), changed: make(chan struct{}),
	}
	for _, a := range cfg.Agents {
		n.agents[a.ID] = a
		n.ids = append(n.ids, a.ID)
	}
	slices.Sort(n.ids)
	return n, nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Node }

// Fleet is the fleet's name.
func (n *Node) Fleet() string { return n.cfg.Fleet }

func (n *Node) key(dir, name string) string { return n.prefix + dir + name }

// Kick asks Run to reconcile soon.
func (n *Node) Kick() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// fenceLocked says why the node may not write now (nil: it may).
func (n *Node) fenceLocked(now time.Time) error {
	switch {
	case n.lease == 0:
		return fmt.Errorf("%w (not registered)", ErrFenced)
	case n.lost:
		return fmt.Errorf("%w (no renewal for a whole TTL)", ErrFenced)
	case now.Sub(n.renewed) >= n.cfg.TTL/2:
		return fmt.Errorf("%w (no renewal for %s)", ErrFenced, now.Sub(n.renewed).Round(time.Millisecond))
	}
	return nil
}

// Check says whether the node may write now: nil, or ErrFenced, which
// counts a write of kind refused. Every write of the node's agents asks
// it at the lowest level the write goes through (a Walrus store body, a
// transaction about to be signed, a state save, a fleet head).
func (n *Node) Check(kind string) error {
	n.mu.Lock()
	err := n.fenceLocked(time.Now())
	n.mu.Unlock()
	if err != nil {
		n.obs.Refused(kind)
	}
	return err
}

// Gate says whether agent id's head may be written now: the node is not
// fenced and owns the agent (it is acquiring, owns or is handing it
// off). A refusal counts as a write of kind refused.
func (n *Node) Gate(id, kind string) error {
	n.mu.Lock()
	err := n.fenceLocked(time.Now())
	if o := n.own[id]; err == nil && (o == nil || o.state == Releasing) {
		err = fmt.Errorf("%w (%s)", ErrNotOwner, id)
	}
	n.mu.Unlock()
	if err != nil {
		n.obs.Refused(kind)
	}
	return err
}

// Owns reports whether the node owns agent id now (and is not fenced).
func (n *Node) Owns(id string) bool { return n.Gate(id, "") == nil }

// OwnerOf is the node that owns agent id as this node last saw etcd
// ("" when none does).
func (n *Node) OwnerOf(id string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if o, ok := n.view.owners[id]; ok {
		return o.Node
	}
	return ""
}

// Fenced reports whether the node may not write now.
func (n *Node) Fenced() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fenceLocked(time.Now()) != nil
}

// Register grants the node a lease and registers it under it. A
// registration of the same name bound to another live lease is another
// process (ErrNodeTaken), unless it is this node's previous process's
// (Config.PreviousLease), which is revoked.
func (n *Node) Register(ctx context.Context) error {
	sent := time.Now()
	g, err := n.cli.Grant(ctx, int64(n.cfg.TTL/time.Second))
	if err != nil {
		return fmt.Errorf("grant a lease: %w", err)
	}
	key := n.key(nodesDir, n.cfg.Node)
	for try := 0; ; try++ {
		resp, err := n.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, encode(n.info()), clientv3.WithLease(g.ID))).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			n.revoke(g.ID)
			return fmt.Errorf("register node %s: %w", n.cfg.Node, err)
		}
		if resp.Succeeded {
			break
		}
		var held int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			held = kvs[0].Lease
		}
		if try == 0 && held != 0 && held == n.cfg.PreviousLease {
			n.log.Info("revoking the lease of this node's previous process", "lease", fmt.Sprintf("%x", held))
			if _, err := n.cli.Revoke(ctx, clientv3.LeaseID(held)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				n.revoke(g.ID)
				return fmt.Errorf("revoke the previous lease: %w", err)
			}
			continue
		}
		n.revoke(g.ID)
		return fmt.Errorf("%w (%s, lease %x): waiting for it to stop or its lease to expire", ErrNodeTaken, n.cfg.Node, held)
	}
	n.mu.Lock()
	n.lease, n.renewed, n.registeredAt, n.lost = g.ID, sent, time.Now(), false
	n.mu.Unlock()
	if n.cfg.Registered != nil {
		n.cfg.Registered(int64(g.ID))
	}
	n.log.Info("node registered", "node", n.cfg.Node, "fleet", n.cfg.Fleet, "lease", fmt.Sprintf("%x", int64(g.ID)), "ttl", n.cfg.TTL)
	n.noteFence()
	n.Kick()
	return nil
}

// revoke gives a lease back, best effort.
func (n *Node) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.TTL/2)
	defer cancel()
	n.cli.Revoke(ctx, id)
}

// info is the node's record.
func (n *Node) info() NodeInfo {
	n.mu.Lock()
	leaving := n.leaving
	n.mu.Unlock()
	info := NodeInfo{Node: n.cfg.Node, API: n.cfg.API, Version: n.cfg.Version, Started: time.Now().UTC(), Draining: leaving, Agents: []string{}}
	for _, id := range n.ids {
		if m := n.agents[id].Missing; m != "" {
			if info.Missing == nil {
				info.Missing = map[string]string{}
			}
			info.Missing[id] = m
		} else {
			info.Agents = append(info.Agents, id)
		}
	}
	return info
}

// RenewOnce renews the lease once (registering the node when it has
// none). A lease etcd no longer has is lost: every agent is dropped
// without writing and the node registers again. A renewal that fails is
// retried by the next; a node silent for a whole TTL drops its agents
// (another node may take them from then on) and finds out, once etcd
// answers, whether its lease survived (a lost majority: etcd extends
// leases when it elects a leader again), when it resumes them.
func (n *Node) RenewOnce(ctx context.Context) error {
	n.mu.Lock()
	lease := n.lease
	n.mu.Unlock()
	if lease == 0 {
		return n.Register(ctx)
	}
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, max(n.cfg.TTL/5, 200*time.Millisecond))
	resp, err := n.cli.KeepAliveOnce(rctx, lease)
	cancel()
	if err == nil && resp.TTL <= 0 {
		err = rpctypes.ErrLeaseNotFound
	}
	n.obs.Renewed(time.Since(sent), err)
	switch {
	case err == nil:
		n.mu.Lock()
		resumed := n.lost && n.lease == lease
		if n.lease == lease && sent.After(n.renewed) {
			n.renewed, n.lost = sent, false
		}
		n.mu.Unlock()
		if resumed {
			n.log.Warn("etcd answers again and the lease survived: resuming this node's agents", "lease", fmt.Sprintf("%x", int64(lease)))
			n.Kick()
		}
		n.noteFence()
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		n.leaseLost(lease, "etcd no longer has the lease")
		return fmt.Errorf("renew the lease: %w", err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	n.noteFence()
	n.mu.Lock()
	silent := time.Since(n.renewed)
	presume := n.lease == lease && !n.lost && silent >= n.cfg.TTL
	if presume {
		n.lost = true
	}
	n.mu.Unlock()
	if presume {
		n.log.Error("no lease renewal for a whole TTL: another node may own this node's agents now; dropping them without writing",
			"silent", silent.Round(time.Millisecond), "error", err)
		n.obs.LeaseLost()
		n.dropAll("the lease may have expired")
	}
	return fmt.Errorf("renew the lease: %w", err)
}

// leaseLost drops every agent and forgets the lease: the next renewal
// registers the node again.
func (n *Node) leaseLost(lease clientv3.LeaseID, why string) {
	n.mu.Lock()
	if n.lease != lease {
		n.mu.Unlock()
		return
	}
	wasLost := n.lost
	n.lease, n.lost = 0, false
	n.mu.Unlock()
	n.log.Error("lease lost: dropping every agent without writing; registering again", "reason", why)
	if !wasLost {
		n.obs.LeaseLost()
	}
	n.dropAll(why)
	n.noteFence()
}

// noteFence logs and reports a change of the fence.
func (n *Node) noteFence() {
	n.mu.Lock()
	err := n.fenceLocked(time.Now())
	fenced := err != nil
	changed := fenced != n.fenced
	n.fenced = fenced
	n.mu.Unlock()
	if !changed {
		return
	}
	n.obs.Fenced(fenced)
	if fenced {
		n.log.Warn("fenced: no writes for this node's agents until its lease is renewed", "reason", err)
	} else {
		n.log.Info("unfenced: the lease is renewed; writes resume")
	}
}

// Run keeps the node registered, renews its lease, watches the fleet and
// reconciles until ctx ends. A clean stop calls Leave first.
func (n *Node) Run(ctx context.Context) {
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		n.watch(ctx)
	}()
	defer func() {
		bg.Wait()
		n.work.Wait()
	}()
	every := max(n.cfg.TTL/5, 100*time.Millisecond)
	renew := time.NewTimer(0)
	defer renew.Stop()
	recon := time.NewTimer(n.settle)
	defer recon.Stop()
	fence := time.NewTimer(time.Hour)
	defer fence.Stop()
	regBackoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			err := n.RenewOnce(ctx)
			next := every
			if err != nil && n.registered() == 0 {
				// Not registered: back off (another process holds the
				// name until its lease expires).
				regBackoff = min(max(2*regBackoff, every), n.cfg.TTL)
				next = regBackoff
				if ctx.Err() == nil {
					n.log.Warn("node not registered; retrying", "error", err, "in", next)
				}
			} else {
				regBackoff = 0
			}
			renew.Reset(next)
			// Wake when the fence would fall without a renewal.
			n.mu.Lock()
			at := time.Until(n.renewed.Add(n.cfg.TTL / 2))
			if n.lease != 0 && !n.lost && at > 0 {
				fence.Reset(at + time.Millisecond)
			}
			n.mu.Unlock()
			continue
		case <-fence.C:
			n.noteFence()
			continue
		case <-n.kick:
		case <-recon.C:
		}
		n.ReconcileOnce(ctx)
		next := max(n.cfg.TTL, time.Second)
		n.mu.Lock()
		if settled := n.registeredAt.Add(n.settle); n.lease != 0 && time.Now().Before(settled) {
			// Not settled yet, so nothing was acquired: look again as
			// soon as it is.
			next = min(next, time.Until(settled)+time.Millisecond)
		}
		n.mu.Unlock()
		recon.Reset(next)
	}
}

// registered is the node's lease (0: none).
func (n *Node) registered() clientv3.LeaseID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease
}

// Wait waits for the transitions ReconcileOnce started.
func (n *Node) Wait() { n.work.Wait() }

type nopObserver struct{}

func (nopObserver) Owned(int)                                        {}
func (nopObserver) Fenced(bool)                                      {}
func (nopObserver) Renewed(time.Duration, error)                     {}
func (nopObserver) LeaseLost()                                       {}
func (nopObserver) Acquired(string, Ownership, time.Duration, error) {}
func (nopObserver) HandedOff(string, time.Duration, error)           {}
func (nopObserver) Refused(string)                                   {}
func (nopObserver) Hook(string, error)                               {}
