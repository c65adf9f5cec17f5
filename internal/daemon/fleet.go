package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/fleet"
	"github.com/hermesd/hermesd/internal/pointer"
)

// fleetGate is the fleet node as the services see it (compose.Fleet): the
// node is made after the services (it needs to know which keys they
// could open), so until then every write is refused.
type fleetGate struct{ node atomic.Pointer[fleet.Node] }

func (g *fleetGate) Check(kind string) error {
	n := g.node.Load()
	if n == nil {
		return fleet.ErrFenced
	}
	return n.Check(kind)
}

func (g *fleetGate) Gate(agent, kind string) error {
	n := g.node.Load()
	if n == nil {
		return fleet.ErrFenced
	}
	return n.Gate(agent, kind)
}

func (g *fleetGate) PutHead(ctx context.Context, agent string, h pointer.FleetHead) error {
	n := g.node.Load()
	if n == nil {
		return fleet.ErrFenced
	}
	return n.PutHead(ctx, agent, fleet.Head{Value: h.Value, BundleHash: h.BundleHash, Version: h.Version,
		CreatedAt: h.CreatedAt, Published: h.Published})
}

// running is an owned agent's loop.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// fleetState is the daemon's part in a fleet.
type fleetState struct {
	gate *fleetGate
	node *fleet.Node
	etcd *clientv3.Client
	obs  *fleetMetrics
	mu   sync.Mutex
	run  map[string]*running // the agents this node runs
	wg   sync.WaitGroup      // the node's Run
}

// dialFleet connects to the fleet's etcd (no request yet: the node's
// registration waits for etcd to answer).
func dialFleet(cfg *config.Config) (*fleetState, error) {
	cl := cfg.Cluster
	conn := fleet.Conn{Endpoints: cl.Endpoints, CAFile: cl.TLS.CAFile, CertFile: cl.TLS.CertFile, KeyFile: cl.TLS.KeyFile,
		Username: cl.Username}
	if !cl.Password.IsZero() {
		pw, err := config.ReadSecret(cl.Password)
		if err != nil {
			return nil, configError{fmt.Errorf("cluster.password: %w", err)}
		}
		conn.Password = pw
	}
	cli, err := fleet.Dial(conn)
	if err != nil {
		return nil, configError{err}
	}
	return &fleetState{gate: &fleetGate{}, etcd: cli, run: map[string]*running{}}, nil
}

// newNode makes this process's node of the fleet, its agents those of
// the configuration (missing where their key could not be opened).
func (d *Daemon) newNode() error {
	cl := d.cfg.Cluster
	var agents []fleet.Agent
	for i := range d.cfg.Agents {
		ac := &d.cfg.Agents[i]
		h := d.cfg.HooksOf(ac)
		agents = append(agents, fleet.Agent{ID: ac.ID, BrainDir: ac.BrainDir, ENSName: ac.ENSName,
			Missing: d.svc.MissingKeys[ac.ID],
			Hooks:   fleet.Hooks{OnAcquire: h.OnAcquire, OnRelease: h.OnRelease, Timeout: h.Timeout.D()}})
	}
	leasePath := d.state.Path() + "/fleet-lease"
	prev, _ := readLease(leasePath)
	d.fleet.obs = newFleetMetrics(d.metrics.reg)
	n, err := fleet.New(fleet.Config{
		Client: d.fleet.etcd, Fleet: cl.Fleet, Node: cl.Node, TTL: cl.LeaseTTL.D(),
		HandoffTimeout: cl.HandoffTimeout.D(), Agents: agents, API: d.Addr(), Version: d.version,
		PreviousLease: prev,
		Registered:    func(lease int64) { os.WriteFile(leasePath, []byte(strconv.FormatInt(lease, 16)+"\n"), 0o600) },
		Observer:      d.fleet.obs,
		Log:           d.log.With("component", "fleet"),
	}, fleetHost{d})
	if err != nil {
		return err
	}
	d.fleet.node = n
	d.fleet.gate.node.Store(n)
	return nil
}

// readLease reads the lease this node's previous process recorded.
func readLease(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 32 {
		return 0, err
	}
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return strconv.ParseInt(string(b), 16, 64)
}

// fleetHost runs the agents the node owns (fleet.Host).
type fleetHost struct{ d *Daemon }

// Open brings the agent's brain to what its new owner must start from
// (agent.PlanTakeOver: the fleet head, unless the record says otherwise),
// prepares it, and starts its loop and its pointer's publishing. An
// agent resumed under the same lease keeps its brain.
func (h fleetHost) Open(ctx context.Context, id string, o fleet.Ownership) error {
	d := h.d
	a, ok := d.byID[id]
	if !ok {
		return fmt.Errorf("agent %s is not configured here", id)
	}
	if !o.Resumed {
		record, err := a.ReadRecord(ctx)
		if err != nil {
			// Without the record no one can tell whether the fleet head
			// would roll it back: retried.
			return fmt.Errorf("read the record before taking the agent over: %w", err)
		}
		var fh *pointer.FleetHead
		if o.Head != nil {
			fh = &pointer.FleetHead{Value: o.Head.Value, BundleHash: o.Head.BundleHash, Version: o.Head.Version,
				CreatedAt: o.Head.CreatedAt, Published: o.Head.Published}
		}
		plan, err := a.CheckDescent(ctx, agent.PlanTakeOver(fh, record, a.Config().ENSName != ""))
		if err != nil {
			return err
		}
		if plan.Source == agent.SourceENS && fh != nil {
			d.log.Warn("the fleet head does not descend from the record: restoring the record", "agent", id, "why", plan.Why)
		}
		if err := a.TakeOver(ctx, plan); err != nil {
			return err
		}
	}
	if err := a.Prepare(ctx); err != nil {
		return err
	}
	d.fleet.mu.Lock()
	defer d.fleet.mu.Unlock()
	if d.fleet.run[id] != nil {
		return nil
	}
	rctx, cancel := context.WithCancel(d.runCtx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	d.fleet.run[id] = r
	if d.pub != nil {
		if err := d.pub.Add(a.Head()); err != nil {
			d.log.Error("the agent's pointer is not published here", "agent", id, "error", err)
		}
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(r.done)
		st := a.Status()
		d.log.Info("agent ready", "origin", st.Origin, "bundle_hash", st.BundleHash, "dir", st.BrainDir)
		a.Run(rctx, agent.Env{Watch: d.subscribe, Slots: d.slots, Recovered: d.probe.recovered})
	}()
	return nil
}

// Final takes the agent's last snapshot and makes its fleet head name it.
func (h fleetHost) Final(ctx context.Context, id string) error {
	d := h.d
	a, ok := d.byID[id]
	if !ok {
		return nil
	}
	if err := d.finalOf(ctx, []*agent.Agent{a}); err != nil {
		return err
	}
	if err := a.Head().SyncFleet(ctx); err != nil {
		return err
	}
	if a.Head().FleetPending() {
		return errors.New("the fleet head does not name the last snapshot")
	}
	return nil
}

// Close stops the agent's loop and its publishing; nothing of it runs
// when Close returns.
func (h fleetHost) Close(id string) {
	d := h.d
	d.fleet.mu.Lock()
	r := d.fleet.run[id]
	delete(d.fleet.run, id)
	d.fleet.mu.Unlock()
	a, ok := d.byID[id]
	if ok && d.pub != nil {
		d.pub.Remove(a.Head())
	}
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// notRunHere says why agent id does not run on this node ("" when it
// does, or outside a fleet): one line naming its owner.
func (d *Daemon) notRunHere(id string) string {
	if d.fleet == nil {
		return ""
	}
	d.fleet.mu.Lock()
	running := d.fleet.run[id] != nil
	d.fleet.mu.Unlock()
	if running && d.fleet.node.Owns(id) {
		return ""
	}
	n := d.fleet.node
	switch owner := n.OwnerOf(id); owner {
	case "":
		return fmt.Sprintf("agent %s runs on no node of fleet %s now (this is %s); retry shortly", id, n.Fleet(), n.Name())
	case n.Name():
		return fmt.Sprintf("agent %s is not running on this node (%s) yet or any more; retry shortly", id, n.Name())
	default:
		return fmt.Sprintf("agent %s is owned by node %s, not this node (%s): send its receipts there", id, owner, n.Name())
	}
}

// owned lists the agents this node runs.
func (d *Daemon) owned() []*agent.Agent {
	if d.fleet == nil {
		return d.agents
	}
	d.fleet.mu.Lock()
	defer d.fleet.mu.Unlock()
	var out []*agent.Agent
	for _, a := range d.agents {
		if d.fleet.run[a.ID()] != nil {
			out = append(out, a)
		}
	}
	return out
}

// startFleet runs the node: it registers, takes the agents the
// assignment gives it, and gives up those it no longer should.
func (d *Daemon) startFleet(ctx context.Context) {
	d.fleet.wg.Add(1)
	go func() {
		defer d.fleet.wg.Done()
		d.fleet.node.Run(ctx)
	}()
}

// leaveFleet hands every owned agent off (bounded by ctx) and stops the
// node, before the daemon stops.
func (d *Daemon) leaveFleet(ctx context.Context) {
	if err := d.fleet.node.Leave(ctx); err != nil {
		d.log.Warn("leaving the fleet", "error", err)
	}
}

// Fleet is the node's view of the fleet (nil outside a fleet).
func (d *Daemon) Fleet() *fleet.Status {
	if d.fleet == nil {
		return nil
	}
	st := d.fleet.node.Status()
	return &st
}

// maxFleetWait bounds a long poll of /v1/fleet.
const maxFleetWait = 5 * time.Minute

// serveFleet answers GET /v1/fleet: the node's view of the fleet; with
// ?wait=REV it answers once the view has moved past revision REV (or
// after ?timeout=, 60 s by default, at most 5 min), so a supervisor can
// follow which agents run here.
func (a *api) serveFleet(w http.ResponseWriter, r *http.Request) {
	d := a.d
	if d.fleet == nil {
		apiError(w, http.StatusNotFound, "not in a fleet (no cluster: in the configuration)")
		return
	}
	if s := r.URL.Query().Get("wait"); s != "" {
		rev, err := strconv.ParseInt(s, 10, 64)
		if err != nil || rev < 0 {
			apiError(w, http.StatusBadRequest, "wait: a revision (a non-negative integer)")
			return
		}
		timeout := time.Minute
		if ts := r.URL.Query().Get("timeout"); ts != "" {
			if timeout, err = time.ParseDuration(ts); err != nil || timeout <= 0 {
				apiError(w, http.StatusBadRequest, "timeout: a positive duration")
				return
			}
		}
		t := time.NewTimer(min(timeout, maxFleetWait, writeTimeout-5*time.Second))
		defer t.Stop()
		select {
		case <-d.fleet.node.Changed(rev):
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	writeJSON(w, http.StatusOK, d.Fleet())
}

// fleetMetrics are the fleet node's series (fleet.Observer).
type fleetMetrics struct {
	owned     prometheus.Gauge
	fenced    prometheus.Gauge
	renewals  *prometheus.HistogramVec
	leaseLost prometheus.Counter
	acquired  *prometheus.CounterVec
	handoffs  *prometheus.CounterVec
	refused   *prometheus.CounterVec
	hooks     *prometheus.CounterVec
}

func newFleetMetrics(reg *prometheus.Registry) *fleetMetrics {
	m := &fleetMetrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hermesd_fleet_owned_agents",
			Help: "Agents this node owns in its fleet."}),
		fenced: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hermesd_fleet_fenced",
			Help: "1 while this node has not renewed its etcd lease for half its TTL and writes nothing."}),
		renewals: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hermesd_fleet_lease_renewal_seconds",
			Help: "Time one renewal of the node's etcd lease took, by result.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)},
			[]string{"result"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "hermesd_fleet_lease_lost_total",
			Help: "Times this node lost its lease (or a whole TTL passed without a renewal) and dropped its agents."}),
		acquired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermesd_fleet_takeovers_total",
			Help: "Agents this node took (how: taken, resumed; result: ok, error)."}, []string{"how", "result"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermesd_fleet_handoffs_total",
			Help: "Agents this node handed off, by result."}, []string{"result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermesd_fleet_fenced_writes_total",
			Help: "Writes refused because this node was fenced or did not own the agent, by kind."}, []string{"kind"}),
		hooks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hermesd_fleet_hooks_total",
			Help: "Hook runs, by event and result."}, []string{"event", "result"}),
	}
	reg.MustRegister(m.owned, m.fenced, m.renewals, m.leaseLost, m.acquired, m.handoffs, m.refused, m.hooks)
	for _, k := range []string{compose.WriteWalrus, compose.WriteChain, compose.WriteFleetHead, compose.WriteState, compose.WriteHook} {
		m.refused.WithLabelValues(k)
	}
	return m
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

func (m *fleetMetrics) Owned(n int) { m.owned.Set(float64(n)) }
func (m *fleetMetrics) Fenced(f bool) {
	m.fenced.Set(b2f(f))
}
func (m *fleetMetrics) Renewed(took time.Duration, err error) {
	m.renewals.WithLabelValues(result(err)).Observe(took.Seconds())
}
func (m *fleetMetrics) LeaseLost() { m.leaseLost.Inc() }
func (m *fleetMetrics) Acquired(_ string, o fleet.Ownership, _ time.Duration, err error) {
	how := "taken"
	if o.Resumed {
		how = "resumed"
	}
	m.acquired.WithLabelValues(how, result(err)).Inc()
}
func (m *fleetMetrics) HandedOff(_ string, _ time.Duration, err error) {
	m.handoffs.WithLabelValues(result(err)).Inc()
}
func (m *fleetMetrics) Refused(kind string) {
	if kind != "" {
		m.refused.WithLabelValues(kind).Inc()
	}
}
func (m *fleetMetrics) Hook(event string, err error) {
	m.hooks.WithLabelValues(event, result(err)).Inc()
}
