// Package daemon is `hermesd run`: it supervises every configured agent
// (each in its own goroutine tree: restore, watch, snapshot), publishes
// their pointers, and serves health, readiness, metrics and receipt
// ingestion over HTTP on loopback.
//
// One agent's failure never stops the others: an agent whose pointer cannot
// be restored is marked failed (readiness says so) and retried with backoff,
// its directory untouched. The state directory is locked, so a second
// hermesd on the same state refuses to start.
package daemon

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/cipher"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/receipts"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/walrus"
)

// Daemon is a running hermesd. Create it with New, then Start, then Close.
type Daemon struct {
	cfg     *config.Config
	log     *slog.Logger
	state   *state.Dir
	metrics *metrics
	walrus  *walrus.Client
	ens     *ens.Client
	agents  []*agent.Agent
	byID    map[string]*agent.Agent
	pub     *publisher

	listener net.Listener
	server   *http.Server

	cancel context.CancelFunc
	wg     sync.WaitGroup // agents
	pubWG  sync.WaitGroup
	httpWG sync.WaitGroup
	closed bool
}

// Services are the clients a daemon uses; the CLI builds them from the
// configuration (see Build), tests may build them directly.
type Services struct {
	Walrus *walrus.Client
	ENS    *ens.Client // nil when no agent has an ENS name
	Key    cipher.Key
	// ReceiptSigner signs transition receipts; nil disables them.
	ReceiptSigner *ecdsa.PrivateKey
	Trusted       []common.Address

	// walrusHook receives the Walrus client's attempts once a daemon
	// exists to count them (set by Build).
	walrusHook *atomic.Pointer[func(walrus.Attempt)]
}

// New locks the state directory, opens every agent and binds the HTTP
// listener. Nothing runs until Start.
func New(cfg *config.Config, svc Services, log *slog.Logger) (*Daemon, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sd, err := state.Open(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg:     cfg,
		log:     log,
		state:   sd,
		metrics: newMetrics(),
		walrus:  svc.Walrus,
		ens:     svc.ENS,
		byID:    map[string]*agent.Agent{},
		cancel:  func() {},
	}
	if svc.walrusHook != nil {
		f := d.observeWalrus
		svc.walrusHook.Store(&f)
	}
	ok := false
	defer func() {
		if !ok {
			d.closeAgents()
			sd.Close()
		}
	}()

	policy, err := receipts.ParsePolicy(cfg.Receipts.ImportPolicy)
	if err != nil {
		return nil, err
	}
	every := map[string]time.Duration{}
	for i := range cfg.Agents {
		a, err := newAgent(cfg, i, svc, sd, policy, (*observer)(d.metrics), log)
		if err != nil {
			return nil, err
		}
		d.agents = append(d.agents, a)
		d.byID[a.ID()] = a
		every[a.ID()] = cfg.PointerIntervalOf(&cfg.Agents[i])
	}
	d.metrics.reg.MustRegister(newAgeCollector(d.Agents))
	if svc.ENS != nil {
		d.pub = newPublisher(svc.ENS, d.agents, every, log.With("component", "publisher"), d.metrics)
		for _, a := range d.agents {
			a.SetPublisher(d.pub)
		}
	}
	if cfg.HTTP.Listen != "" {
		ln, err := net.Listen("tcp", cfg.HTTP.Listen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.HTTP.Listen, err)
		}
		d.listener = ln
		d.server = &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
	}
	ok = true
	return d, nil
}

// newAgent opens agent i of cfg.
func newAgent(cfg *config.Config, i int, svc Services, sd *state.Dir, policy receipts.Policy, obs agent.Observer, log *slog.Logger) (*agent.Agent, error) {
	ac := &cfg.Agents[i]
	var others []string
	for j := range cfg.Agents {
		if j != i {
			others = append(others, cfg.Agents[j].Identity())
		}
	}
	var pointer agent.PointerReader
	if ac.ENSName != "" {
		if svc.ENS == nil {
			return nil, fmt.Errorf("agent %s has an ENS name but no chain client is configured", ac.ID)
		}
		pointer = svc.ENS
	}
	a, err := agent.New(agent.Config{
		ID:           ac.ID,
		BrainDir:     ac.BrainDir,
		SeedDir:      ac.SeedDir,
		ENSName:      ac.ENSName,
		Identity:     ac.Identity(),
		TokenID:      ac.TokenID,
		Quiet:        cfg.QuietPeriod(ac),
		MaxLag:       cfg.MaxLagOf(ac),
		MinInterval:  cfg.SnapshotIntervalOf(ac),
		RefreshAfter: cfg.RefreshAfterOf(ac),
		Epochs:       cfg.EpochsOf(ac),
		ImportPolicy: policy,
		Trusted:      svc.Trusted,
	}, agent.Deps{
		State:        sd,
		Store:        svc.Walrus,
		Pointer:      pointer,
		ErrNoPointer: ens.ErrNoPointer,
		Envelope:     Envelope(cfg, ac, svc.Key),
		Others:       others,
		Signer:       svc.ReceiptSigner,
		Observer:     obs,
		Log:          log,
	})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ac.ID, err)
	}
	return a, nil
}

// Envelope is how snapshots of agent ac are encrypted.
func Envelope(cfg *config.Config, ac *config.Agent, key cipher.Key) snapshot.Envelope {
	return snapshot.Envelope{
		Key:       key,
		Identity:  ac.Identity(),
		V1:        cfg.Encryption.Format == "v1",
		V1MaxSize: int64(cfg.Encryption.V1MaxSize),
	}
}

// PrepareOnce runs one agent's start-up path once — restore if the brain is
// missing or empty, fill from the seed, hash, reconcile with the chain —
// and stops. `hermesd restore` uses it (init containers).
func PrepareOnce(ctx context.Context, cfg *config.Config, svc Services, id string, log *slog.Logger) (agent.Status, error) {
	if _, err := cfg.Agent(id); err != nil {
		return agent.Status{}, err
	}
	sd, err := state.Open(cfg.StateDir)
	if err != nil {
		return agent.Status{}, err
	}
	defer sd.Close()
	a, err := OpenAgent(cfg, svc, sd, id, nil, log)
	if err != nil {
		return agent.Status{}, err
	}
	defer a.Close()
	err = a.Prepare(ctx)
	return a.Status(), err
}

// OpenAgent opens agent id exactly as the daemon does, on a state directory
// the caller has locked, for one-shot drivers (the amnesia drill) that call
// Prepare and SyncOnce themselves. obs may be nil. The caller closes the
// agent.
func OpenAgent(cfg *config.Config, svc Services, sd *state.Dir, id string, obs agent.Observer, log *slog.Logger) (*agent.Agent, error) {
	for i := range cfg.Agents {
		if cfg.Agents[i].ID != id {
			continue
		}
		policy, err := receipts.ParsePolicy(cfg.Receipts.ImportPolicy)
		if err != nil {
			return nil, err
		}
		return newAgent(cfg, i, svc, sd, policy, obs, log)
	}
	_, err := cfg.Agent(id)
	return nil, err
}

// Addr is the HTTP listener's address ("" when disabled).
func (d *Daemon) Addr() string {
	if d.listener == nil {
		return ""
	}
	return d.listener.Addr().String()
}

// Agents returns the supervised agents.
func (d *Daemon) Agents() []*agent.Agent { return d.agents }

// Agent returns one agent by id.
func (d *Daemon) Agent(id string) (*agent.Agent, bool) {
	a, ok := d.byID[id]
	return a, ok
}

// Start launches the HTTP server, the publisher and one goroutine tree per
// agent. It returns at once.
func (d *Daemon) Start(ctx context.Context) {
	ctx, d.cancel = context.WithCancel(ctx)
	if d.server != nil {
		d.httpWG.Add(1)
		go func() {
			defer d.httpWG.Done()
			if err := d.server.Serve(d.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.log.Error("http server stopped", "error", err)
			}
		}()
		d.log.Info("serving health, metrics and receipts", "addr", "http://"+d.Addr())
	}
	if d.pub != nil {
		d.pubWG.Add(1)
		go func() {
			defer d.pubWG.Done()
			d.pub.run(ctx)
		}()
	}
	for _, a := range d.agents {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.superviseAgent(ctx, a)
		}()
	}
}

// superviseAgent prepares the agent (retrying a failed restore with
// backoff) and then runs its loop.
func (d *Daemon) superviseAgent(ctx context.Context, a *agent.Agent) {
	log := d.log.With("agent", a.ID())
	for failures := 0; ; failures++ {
		err := a.Prepare(ctx)
		if err == nil {
			if failures > 0 {
				log.Info("agent recovered", "previous_errors", failures)
			}
			break
		}
		if ctx.Err() != nil {
			return
		}
		wait := backoffFor(failures + 1)
		if wait > 5*time.Minute {
			wait = 5 * time.Minute
		}
		log.Error("agent failed to start; directory left untouched; will retry",
			"error", err, "consecutive_errors", failures+1, "backoff", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	st := a.Status()
	log.Info("agent ready", "origin", st.Origin, "bundle_hash", st.BundleHash, "dir", st.BrainDir)
	a.Run(ctx)
}

// Ready reports whether every agent is restored (or deliberately fresh) and
// watched.
func (d *Daemon) Ready() bool {
	for _, a := range d.agents {
		if !a.Ready() {
			return false
		}
	}
	return true
}

// Close stops the agents, then flushes pending pointers until flushCtx ends
// (the shutdown time limit; cancel it on a second signal to abort), then
// releases everything. It reports the agents whose pointers are still
// pending; they stay in the state directory and are published on the next
// start.
func (d *Daemon) Close(flushCtx context.Context) error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.cancel()
	d.wg.Wait() // agents stopped: no new snapshots while flushing
	var err error
	if d.pub != nil {
		d.pubWG.Wait()
		if left := d.pub.flush(flushCtx); len(left) > 0 {
			err = fmt.Errorf("pointers still pending at shutdown (published on next start): %v", left)
		} else if d.anyPending() {
			err = errors.New("pointers still pending at shutdown")
		}
	}
	if d.server != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		d.server.Shutdown(sctx)
		cancel()
		d.httpWG.Wait()
	}
	d.closeAgents()
	if d.ens != nil {
		d.ens.Close()
	}
	if cerr := d.state.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *Daemon) anyPending() bool {
	for _, a := range d.agents {
		if _, ok := a.Pending(); ok {
			return true
		}
	}
	return false
}

func (d *Daemon) closeAgents() {
	for _, a := range d.agents {
		if err := a.Close(); err != nil {
			d.log.Warn("closing agent", "agent", a.ID(), "error", err)
		}
	}
}

func (d *Daemon) observeWalrus(a walrus.Attempt) {
	outcome := "ok"
	failed := a.Err != nil || a.Status == 0 || a.Status >= 400
	switch {
	case failed && a.Retry:
		outcome = "retry"
	case failed:
		outcome = "error"
	}
	d.metrics.walrusAttempts.WithLabelValues(a.Op, outcome).Inc()
}

// weiPerGwei converts the configured fee cap.
var weiPerGwei = big.NewFloat(1e9)
