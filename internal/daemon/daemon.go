// Package daemon is `hermesd run`: it supervises every configured agent
// (each in its own goroutine tree: restore, watch, snapshot), publishes
// their pointers, probes for the end of outages, and serves health,
// readiness, metrics, status and authenticated receipt ingestion over HTTP
// on loopback (and optionally a Unix socket).
//
// One agent's failure never stops the others: an agent whose pointer cannot
// be restored is marked failed (readiness says so) and retried with backoff,
// its directory untouched. The state directory is locked, so a second
// hermesd on the same state refuses to start.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/watch"
)

// Daemon is a running hermesd. Create it with New, then Start, then Close.
type Daemon struct {
	cfg     *config.Config
	svc     *compose.Services // built by New, closed by Close
	log     *slog.Logger
	state   *state.Dir
	ledger  *ledger.Ledger
	now     func() time.Time
	metrics *metrics
	// quiltMetrics are the shared quilt batcher's series.
	quiltMetrics *quiltMetrics
	hub          *watch.Hub
	version      string // as built: the fleet registration says it
	agents       []*agent.Agent
	byID         map[string]*agent.Agent
	pub          *pointer.Publisher // nil without a chain
	probe        *prober
	// slots bounds the agents syncing at once (agent.Env.Slots).
	slots chan struct{}
	// walrusRetryAt is when a Walrus attempt last failed and was to be
	// retried (unix nanoseconds): until a backoff started then has surely
	// ended, the prober watches for the store to come back, before any
	// sync has failed.
	walrusRetryAt atomic.Int64

	api       *api
	listeners []net.Listener
	servers   []*http.Server

	started time.Time // Start

	// fleet is the daemon's node of a fleet (nil without cluster:): it
	// runs only the agents the node owns.
	fleet *fleetState
	// runCtx is Start's: the agents' loops run under it.
	runCtx context.Context

	cancel context.CancelFunc
	wg     sync.WaitGroup // agents
	bgWG   sync.WaitGroup // publisher, prober
	httpWG sync.WaitGroup
	closed bool
}

// New builds the services the configuration asks for (compose.Build with
// opts, observed by the daemon: its metrics see every Walrus attempt and
// quilt, and a Walrus retry waiting out its backoff goes as soon as the
// prober sees the store answer again), locks the state directory, opens
// every agent and binds the HTTP listeners. Nothing runs until Start;
// Close releases everything, the services too. Build's errors are the
// configuration's (ErrConfig): it reads and checks every secret and
// touches no network.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts compose.Options) (*Daemon, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Daemon{
		cfg:     cfg,
		log:     log,
		now:     time.Now,
		metrics: newMetrics(),
		probe:   newProber(log.With("component", "walrus")),
		byID:    map[string]*agent.Agent{},
		cancel:  func() {},
		version: cmp.Or(opts.Version, "dev"),
	}
	d.quiltMetrics = newQuiltMetrics(d.metrics.reg)
	opts.Observer = (*servicesObserver)(d)
	if cfg.Cluster != nil {
		fs, err := dialFleet(cfg)
		if err != nil {
			return nil, err
		}
		d.fleet = fs
		opts.Fleet = fs.gate
	}
	svc, err := compose.Build(ctx, cfg, log, opts)
	if err != nil {
		if d.fleet != nil {
			d.fleet.etcd.Close()
		}
		return nil, configError{err}
	}
	d.svc = svc
	sd, err := compose.OpenState(cfg)
	if err != nil {
		svc.Close()
		return nil, err
	}
	d.state, d.ledger = sd, svc.Ledger(sd)
	ok := false
	defer func() {
		if !ok {
			d.closeAgents()
			if d.hub != nil {
				d.hub.Close()
			}
			for _, l := range d.listeners {
				l.Close()
			}
			sd.Close()
			svc.Close()
			if d.fleet != nil {
				d.fleet.etcd.Close()
			}
		}
	}()

	d.hub, err = watch.NewHub(watch.HubOptions{Logger: log.With("component", "watch")})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	// A few syncs at a time: the cores are the limit, and each pipeline
	// holds buffers of its own.
	d.slots = make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))
	for i := range cfg.Agents {
		ac := &cfg.Agents[i]
		a, err := svc.OpenAgent(sd, ac.ID, (*observer)(d.metrics))
		if err != nil {
			return nil, err
		}
		d.agents = append(d.agents, a)
		d.byID[a.ID()] = a
	}
	d.metrics.reg.MustRegister(newAgeCollector(d.Agents, d.agentStatus, d.pointerCheckedAt))
	ids := make([]string, len(d.agents))
	for i, a := range d.agents {
		ids[i] = a.ID()
		d.metrics.zeroAgent(a.ID(), a.Config().ENSName != "")
	}
	d.metrics.reg.MustRegister(newSpendCollector(d.ledger, ids))
	var heads []*pointer.Head
	if d.fleet == nil {
		// In a fleet the heads of the agents this node owns come and go.
		for _, a := range d.agents {
			heads = append(heads, a.Head())
		}
	}
	d.pub = svc.Publisher(heads, (*pointerObserver)(d.metrics), log.With("component", "publisher"))
	if d.api, err = newAPI(d); err != nil {
		return nil, configError{err}
	}
	if err := d.listen(); err != nil {
		return nil, err
	}
	if d.fleet != nil {
		if err := d.newNode(); err != nil {
			return nil, err
		}
	}
	ok = true
	return d, nil
}

// Addr is the HTTP listener's address ("" when disabled).
func (d *Daemon) Addr() string {
	for _, l := range d.listeners {
		if l.Addr().Network() == "tcp" {
			return l.Addr().String()
		}
	}
	return ""
}

// Agents returns the supervised agents.
func (d *Daemon) Agents() []*agent.Agent { return d.agents }

// Agent returns one agent by id.
func (d *Daemon) Agent(id string) (*agent.Agent, bool) {
	a, ok := d.byID[id]
	return a, ok
}

// Start launches the HTTP servers, the publisher, the prober and one
// goroutine tree per agent. It returns at once.
func (d *Daemon) Start(ctx context.Context) {
	ctx, d.cancel = context.WithCancel(ctx)
	d.runCtx = ctx
	d.started = d.now()
	for i, srv := range d.servers {
		l := d.listeners[i]
		d.httpWG.Add(1)
		go func() {
			defer d.httpWG.Done()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("http server stopped", "error", err)
			}
		}()
		d.log.Info("serving health, metrics and receipts", "addr", listenerURL(l))
	}
	if d.pub != nil {
		d.bgWG.Add(1)
		go func() {
			defer d.bgWG.Done()
			d.pub.Run(ctx)
		}()
	}
	d.bgWG.Add(1)
	go func() {
		defer d.bgWG.Done()
		d.probe.run(ctx, d.svc.Walrus.Ping, d.anyFailing)
	}()
	d.bgWG.Add(1)
	go func() {
		defer d.bgWG.Done()
		newTrimmer(func() bool { return len(d.slots) > 0 }, d.log).run(ctx)
	}()
	if d.fleet != nil {
		d.startFleet(ctx)
		return
	}
	for _, a := range d.agents {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.superviseAgent(ctx, a)
		}()
	}
}

func listenerURL(l net.Listener) string {
	if l.Addr().Network() == "unix" {
		return "unix:" + l.Addr().String()
	}
	return "http://" + l.Addr().String()
}

// superviseAgent prepares the agent (retrying a failed restore with
// backoff) and then runs its loop.
func (d *Daemon) superviseAgent(ctx context.Context, a *agent.Agent) {
	log := d.log.With("agent", a.ID())
	bo := &backoff.Backoff{Min: time.Second, Max: time.Minute, Log: log}
	for {
		err := a.Prepare(ctx)
		if err == nil {
			bo.Succeeded("agent recovered")
			break
		}
		if ctx.Err() != nil {
			return
		}
		wait := bo.Failed("agent failed to start; directory left untouched; will retry", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	st := a.Status()
	hashed := st.BundleHash
	if hashed == "" {
		hashed = "none yet: the first snapshot hashes the brain as it reads it"
	}
	log.Info("agent ready", "origin", st.Origin, "bundle_hash", hashed, "dir", st.BrainDir)
	a.Run(ctx, agent.Env{Watch: d.subscribe, Slots: d.slots, Recovered: d.probe.recovered})
}

func (d *Daemon) subscribe(dir string, opts watch.Options) (agent.Watcher, error) {
	w, err := d.hub.Watch(dir, opts)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// anyFailing reports whether some agent's last sync failed, or a Walrus
// request is being retried (the prober then watches for the end of the
// outage).
func (d *Daemon) anyFailing() bool {
	if at := d.walrusRetryAt.Load(); at != 0 && d.now().Sub(time.Unix(0, at)) < d.cfg.Walrus.RetryWaitMax.D()+probeInterval {
		return true
	}
	for _, a := range d.owned() {
		if a.Failing() {
			return true
		}
	}
	return false
}

// healthy reports whether an agent is fully in service, and if not why.
func healthy(s agent.Status) (bool, string) {
	switch {
	case s.Transferred != nil:
		// Handed to a new owner: finished here, not a failure.
		return true, "transferred: " + s.Transferred.Reason
	case s.Phase != agent.PhaseReady:
		r := string(s.Phase)
		if s.Reason != "" {
			r += ": " + s.Reason
		}
		return false, r
	case s.Hold != nil:
		return false, "publishing held: " + s.Hold.Reason
	case s.PointerMisrouted != "":
		return false, "pointer not written: " + s.PointerMisrouted
	case s.LastError != "":
		return false, "last snapshot failed: " + s.LastError
	case s.Unsaved:
		return false, "agent state not saved yet"
	case s.UnsavedOverdue != "":
		return false, s.UnsavedOverdue
	}
	return true, ""
}

// pointerCheckedAt is when what an agent's status says of its pointer
// was last confirmed by the chain (the publisher's account of it); zero
// for an agent that publishes nothing.
func (d *Daemon) pointerCheckedAt(a *agent.Agent) time.Time {
	if d.pub == nil {
		return time.Time{}
	}
	return d.pub.CheckedAt(a.Head())
}

// agentStatus is an agent's status with what the publisher knows of it:
// since when its pointer is unverified, if it is.
func (d *Daemon) agentStatus(a *agent.Agent) agent.Status {
	s := a.Status()
	if d.pub != nil {
		s.PointerUnverified = d.pub.Unverified(a.Head())
	}
	return s
}

// Ready applies the configured readiness rule: every agent healthy
// ("all"), or at least one ("any"). In a fleet, the agents this node owns,
// and only while it holds its lease and is not fenced.
func (d *Daemon) Ready() bool {
	if d.fleet != nil && d.fleet.node.Fenced() {
		return false
	}
	agents := d.owned()
	n := 0
	for _, a := range agents {
		if ok, _ := healthy(a.Status()); ok {
			n++
		}
	}
	if d.cfg.HTTP.Readiness == "any" {
		return n > 0 || len(agents) == 0
	}
	return n == len(agents)
}

// ErrConfig matches a start-up error that is the configuration's fault
// (a secret that cannot be read, an http.token too short), as opposed to
// the environment's (a port in use, a locked state directory).
var ErrConfig = errors.New("invalid configuration")

type configError struct{ error }

func (e configError) Unwrap() error        { return e.error }
func (e configError) Is(target error) bool { return target == ErrConfig }

// ErrPending means pointers were still pending when the daemon stopped.
var ErrPending = errors.New("pointers still pending at shutdown")

// Close stops the agents, then flushes pending pointers until flushCtx ends
// (the shutdown time limit; cancel it on a second signal to abort), then
// releases everything. Pointers still pending stay in the state directory
// and are published on the next start; the error (matching ErrPending)
// names their agents.
func (d *Daemon) Close(flushCtx context.Context) error {
	if d.closed {
		return nil
	}
	d.closed = true
	if d.fleet != nil {
		// Every owned agent is handed off (its last snapshot, its fleet
		// head), so nothing is left to flush here.
		d.leaveFleet(flushCtx)
	} else {
		d.finalSnapshots(flushCtx)
	}
	if d.svc.Quilts != nil {
		// Packs waiting for their batch window are stored now, so their
		// snapshots are published in the flush below.
		d.svc.Quilts.Flush()
	}
	d.cancel()
	stopped := make(chan struct{})
	go func() {
		d.wg.Wait() // agents stopped: no new snapshots while flushing
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-flushCtx.Done():
		// A quilt still being stored (an outage) does not hold the stop
		// beyond its time limit: its packs fail and are retaken next time.
		if d.svc.Quilts != nil {
			d.svc.Quilts.Close()
		}
		<-stopped
	}
	d.bgWG.Wait()
	if d.fleet != nil {
		d.fleet.wg.Wait()
	}
	var err error
	if d.pub != nil {
		if left := d.pub.Flush(flushCtx); len(left) > 0 {
			err = fmt.Errorf("%w (published on the next start): %v", ErrPending, left)
		}
	}
	for _, srv := range d.servers {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		srv.Shutdown(sctx)
		cancel()
	}
	d.httpWG.Wait()
	if cerr := d.closeAgents(); err == nil {
		err = cerr
	}
	if d.hub != nil {
		d.hub.Close()
	}
	if cerr := d.state.Close(); err == nil {
		err = cerr
	}
	d.svc.Close()
	if d.fleet != nil {
		d.fleet.etcd.Close()
	}
	return err
}

// finalSnapshots has every running agent store what it still holds back
// (the debounce, snapshot_interval) before the stop, within ctx: with
// uploads minutes apart, a stop must not leave the last minutes of a brain
// only on a machine that may go away with the daemon. Their small packs
// wait for a quilt like any other: whatever waits is stored as soon as no
// more packs arrived for a moment, so the agents share as few quilts as
// the stop allows.
func (d *Daemon) finalSnapshots(ctx context.Context) {
	for _, err := range d.finals(ctx, d.agents) {
		d.log.Warn("last snapshot before the stop failed; the next start takes it", "error", err)
	}
}

// finalOf takes the last snapshot of agents (a hand-off's), within ctx.
func (d *Daemon) finalOf(ctx context.Context, agents []*agent.Agent) error {
	return errors.Join(d.finals(ctx, agents)...)
}

// finals has agents store what they still hold back, within ctx, flushing
// the quilt batcher once no more packs arrive; it returns their errors.
func (d *Daemon) finals(ctx context.Context, agents []*agent.Agent) []error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Final(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("agent %s: %w", a.ID(), err))
				mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	if d.svc.Quilts == nil {
		<-done
		return errs
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := 0
	for {
		select {
		case <-done:
			return errs
		case <-tick.C:
			n := d.svc.Quilts.Pending()
			if n > 0 && n == last {
				d.svc.Quilts.Flush()
			}
			last = n
		}
	}
}

func (d *Daemon) closeAgents() error {
	var errs []error
	for _, a := range d.agents {
		if err := a.Close(); err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.ID(), err))
		}
	}
	return errors.Join(errs...)
}
