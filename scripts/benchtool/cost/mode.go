package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/daemon"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/walruscost"
)

// mode is one way of running hermesd, in real (uncompressed) time.
type mode struct {
	Key    string // short id; names its agents (DNS label)
	Label  string
	Quilts bool
	// BatchWindow, SnapshotInterval, PointerInterval, Quiet, MaxLag are
	// the configuration's, before the time scale.
	BatchWindow      time.Duration
	SnapshotInterval time.Duration
	PointerInterval  time.Duration
	Quiet, MaxLag    time.Duration
	Epochs           int
	ExpiryMargin     int
}

// configured is hermesd as its defaults configure it (internal/config).
func configured() mode {
	d := config.Default()
	return mode{Key: "a", Label: "hermesd as configured (quilts on, the defaults)",
		Quilts: d.Walrus.Quilts, BatchWindow: d.Walrus.BatchWindow.D(),
		SnapshotInterval: d.Defaults.SnapshotInterval.D(), PointerInterval: d.Defaults.PointerInterval.D(),
		Quiet: d.Defaults.Quiet.D(), MaxLag: d.Defaults.MaxLag.D(),
		Epochs: d.Walrus.Epochs, ExpiryMargin: d.Repository.ExpiryMargin}
}

// today is hermesd with quilts off and the old defaults: epochs 5, a
// snapshot after every change, pointer_interval 10m.
func today() mode {
	return mode{Key: "b", Label: "hermesd with quilts off (the old defaults: epochs 5, snapshot_interval 0, pointer_interval 10m)",
		Quilts: false, BatchWindow: 0, SnapshotInterval: 0, PointerInterval: 10 * time.Minute,
		Quiet: 2 * time.Second, MaxLag: 30 * time.Second, Epochs: 5, ExpiryMargin: 1}
}

func (m mode) settings() string {
	q := "quilts off"
	if m.Quilts {
		q = "quilts on, batch_window " + short(m.BatchWindow)
	}
	return fmt.Sprintf("%s, epochs %d, snapshot_interval %s, pointer_interval %s", q, m.Epochs, short(m.SnapshotInterval), short(m.PointerInterval))
}

// short prints a duration as a configuration would: 30s, 10m, 1h30m.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// agentID is agent i of mode m; its ENS name is agentID + ".hermes.eth".
func (m mode) agentID(i int) string { return fmt.Sprintf("%s%04d", m.Key, i) }

// scale maps real durations to the bench's compressed time: a minute of
// real time is one tick.
type scale struct{ tick time.Duration }

func (s scale) of(d time.Duration) time.Duration {
	return time.Duration(float64(d) * float64(s.tick) / float64(time.Minute))
}

// minutes is a bench duration in real minutes.
func (s scale) minutes(d time.Duration) float64 { return float64(d) / float64(s.tick) }

var configTemplate = template.Must(template.New("config").Parse(`# benchtool-cost: mode {{.Mode.Key}} ({{.Mode.Label}}), time scale 1 minute = {{.Tick}}
state_dir: {{.Dir}}/state
shutdown_timeout: 2m
log:
  level: warn
http:
  listen: ""
walrus:
  publishers: ["{{.Walrus}}"]
  aggregators: ["{{.Walrus}}"]
  epochs: {{.Mode.Epochs}}
  epoch_duration: {{.Epoch}}
  quilts: {{.Mode.Quilts}}
  batch_window: {{.BatchWindow}}
  retry_wait_min: 100ms
  retry_wait_max: 2s
chain:
  rpc: {{.RPC}}
  chain_id: {{.ChainID}}
  ens_registry: "{{.Registry}}"
  signer: {file: {{.Signer}}}
  tx_timeout: 2m
  poll_interval: 20ms
encryption:
  key: {file: {{.Key}}}
repository:
  expiry_margin: {{.Mode.ExpiryMargin}}
cost:
  walrus_shards: {{.Shards}}
defaults:
  quiet: {{.Quiet}}
  max_lag: {{.MaxLag}}
  pointer_interval: {{.PointerInterval}}
  snapshot_interval: {{.SnapshotInterval}}
agents:
{{- range .Agents}}
  - id: {{.}}
    brain_dir: {{$.Dir}}/brains/{{.}}
    ens_name: {{.}}.hermes.eth
{{- end}}
`))

// modeRun is one mode run on a tier's devnet.
type modeRun struct {
	mode   mode
	scale  scale
	agents int
	ticks  int
	spread bool
	idle   bool // no changes: the brains stay as they are
	dir    string
	dn     *devnet.Devnet
	w      *writer
	tmpl   string // the template brain
	other  struct {
		files int
		bytes int64
	}
	log *slog.Logger
}

// result is what one mode run measured.
type result struct {
	Mode    mode
	Agents  int
	Ticks   int
	Tick    time.Duration
	Changes int
	// Samples of every agent's ledger and status, from the settled start
	// to the end of the last tick.
	Samples []sample
	// Naive holds one whole-brain blob per change made (the reference
	// runtime's way): its size in bytes.
	Naive []uint64
	// Served is what the Walrus server answered to every store of the
	// run; Ledger what the agents' ledgers recorded over the same run.
	Served, Lost served
	Ledger       ledger.Spend
	// Changed are, per agent, the times of its changes.
	Changed [][]time.Time
	// Anchors are, per agent, when its ledger last recorded a store and a
	// pointer transaction before the ticks began.
	Anchors []anchors
	// Setup is the time from the daemon's start to every agent's first
	// snapshot published; Took the whole run.
	Setup, Took time.Duration
}

// sample is every agent's totals and status at one moment.
type sample struct {
	At     time.Time
	Spend  []ledger.Spend
	Status []agentSample
}

// anchors are when an agent's first snapshot was stored (its ledger's
// first record) and its first pointer transaction mined (its last record
// before the ticks).
type anchors struct{ Store, Pointer time.Time }

type agentSample struct {
	Last      string
	LastAt    time.Time
	Published string
}

func (r *modeRun) run(ctx context.Context) (*result, error) {
	began := time.Now()
	res := &result{Mode: r.mode, Agents: r.agents, Ticks: r.ticks, Tick: r.scale.tick}
	ids := make([]string, r.agents)
	for i := range ids {
		ids[i] = r.mode.agentID(i)
		if err := copyBrain(r.w, r.tmpl, filepath.Join(r.dir, "brains", ids[i]), ids[i]); err != nil {
			return nil, fmt.Errorf("brain %s: %w", ids[i], err)
		}
	}
	proxy, err := startAnswers(r.dn.Walrus.URL())
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	cfgPath := filepath.Join(r.dir, "hermesd.yml")
	var b strings.Builder
	err = configTemplate.Execute(&b, map[string]any{
		"Mode": r.mode, "Tick": r.scale.tick, "Dir": r.dir, "Walrus": proxy.url,
		"Epoch":       r.scale.of(config.Default().Walrus.EpochDuration.D()),
		"BatchWindow": r.scale.of(r.mode.BatchWindow),
		"RPC":         r.dn.Chain.URL(), "ChainID": r.dn.Chain.ChainID(), "Registry": r.dn.Chain.RegistryAddress().Hex(),
		"Signer": filepath.Join(r.dn.Dir, "keys", "chain.key"), "Key": r.dn.KeyPath,
		"Quiet": r.scale.of(r.mode.Quiet), "MaxLag": r.scale.of(r.mode.MaxLag),
		"PointerInterval": r.scale.of(r.mode.PointerInterval), "SnapshotInterval": r.scale.of(r.mode.SnapshotInterval),
		"Agents": ids, "Shards": r.dn.Config.Cost.WalrusShards,
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfgPath, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	d, err := daemon.New(ctx, cfg, r.log, compose.Options{Batch: true})
	if err != nil {
		return nil, err
	}
	closed := false
	stop := func() error {
		if closed {
			return nil
		}
		closed = true
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return d.Close(cctx)
	}
	defer stop()
	d.Start(ctx)
	if err := settle(ctx, d, r.log, time.Now().Add(10*time.Minute+time.Duration(r.agents)*time.Second)); err != nil {
		return nil, err
	}
	res.Setup = time.Since(began)
	for _, id := range ids {
		bk, err := ledger.Load(cfg.StateDir, id)
		if err != nil {
			return nil, err
		}
		res.Anchors = append(res.Anchors, anchors{Store: bk.Since, Pointer: bk.Updated})
	}

	// The ticks: agent i changes at i/N of every tick, from its first
	// tick on. With spread, the agents' rhythms are spread evenly over a
	// cycle of snapshot_interval + batch_window, as agents that go quiet
	// and busy again at their own times would have them (started
	// together, they would stay in step and share quilts more than a
	// fleet in the long run): the ticks begin once snapshot_interval has
	// passed since the first snapshots, and agent i begins at i/N of the
	// cycle.
	samples := make(chan []sample, 1)
	sctx, stopSampling := context.WithCancel(ctx)
	go func() { samples <- sampleEvery(sctx, d, max(r.scale.tick/4, 50*time.Millisecond)) }()
	first := make([]int, r.agents)
	var werr error
	if r.spread && r.mode.SnapshotInterval > 0 {
		werr = sleepUntil(ctx, time.Now().Add(r.scale.of(r.mode.SnapshotInterval)))
		cycle := int(math.Ceil(r.scale.minutes(r.scale.of(r.mode.SnapshotInterval + r.mode.BatchWindow))))
		for i := range first {
			first[i] = i * cycle / r.agents
		}
		res.Anchors = make([]anchors, r.agents) // the first period is idle: none
	}
	t0 := time.Now()
	res.Changed = make([][]time.Time, r.agents)
	for k := 0; k < r.ticks && werr == nil && !r.idle; k++ {
		for i, id := range ids {
			if k < first[i] {
				continue
			}
			at := t0.Add(time.Duration(k)*r.scale.tick + time.Duration(i)*r.scale.tick/time.Duration(r.agents))
			if err := sleepUntil(ctx, at); err != nil {
				werr = err
				break
			}
			size, err := r.w.insert(filepath.Join(r.dir, "brains", id, "memory.db"), fmt.Sprintf("%s-%d", id, k))
			if err != nil {
				werr = err
				break
			}
			res.Changed[i] = append(res.Changed[i], time.Now())
			res.Changes++
			res.Naive = append(res.Naive, ledger.NaiveBlobSize(r.other.files+1, r.other.bytes+size))
		}
	}
	if werr == nil {
		werr = sleepUntil(ctx, t0.Add(time.Duration(r.ticks)*r.scale.tick))
	}
	stopSampling()
	res.Samples = <-samples
	if werr != nil {
		return nil, werr
	}
	// Stop between stores: an answer on its way while the daemon stops
	// is charged by the server but may never reach a ledger, and the
	// proxy cannot always tell (the write to the socket succeeded).
	if err := quiesce(ctx, d, proxy, time.Now().Add(time.Minute)); err != nil {
		return nil, err
	}
	if err := stop(); err != nil && !errors.Is(err, daemon.ErrPending) {
		return nil, err
	}
	for _, id := range ids {
		bk, err := ledger.Load(cfg.StateDir, id)
		if err != nil {
			return nil, err
		}
		res.Ledger.Add(bk.Total)
	}
	res.Served, res.Lost = proxy.total()
	res.Took = time.Since(began)
	return res, nil
}

// quiesce waits, until deadline at most, for a moment when the agents'
// ledgers hold every store answer the server sent.
func quiesce(ctx context.Context, d *daemon.Daemon, proxy *answers, deadline time.Time) error {
	for time.Now().Before(deadline) {
		var got uint64
		for _, a := range d.CostReport().Agents {
			got += a.Recorded.FROST
		}
		sent, lost := proxy.total()
		if got == sent.FROST+lost.FROST {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(10*time.Millisecond)); err != nil {
			return err
		}
	}
	return nil // check reports the difference
}

// settle waits until every agent has a verified snapshot and its pointer
// names it.
func settle(ctx context.Context, d *daemon.Daemon, log *slog.Logger, deadline time.Time) error {
	began, said := time.Now(), false
	for {
		done, why := settled(d.Agents())
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agents not settled in time: %s", why)
		}
		if !said && time.Since(began) > 30*time.Second {
			log.Warn("agents not settled yet", "why", why)
			said = true
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
}

func settled(agents []*agent.Agent) (bool, string) {
	for _, a := range agents {
		s := a.Status()
		switch {
		case s.Last == nil:
			return false, s.ID + " has no snapshot yet " + s.LastError
		case s.Pending != nil || s.Published != s.Last.BlobID:
			return false, s.ID + " has not published its snapshot yet " + s.LastError
		}
	}
	return true, ""
}

// sampleEvery takes a sample at once and then every interval until ctx
// ends, and one last one.
func sampleEvery(ctx context.Context, d *daemon.Daemon, interval time.Duration) []sample {
	var out []sample
	take := func() {
		s := sample{At: time.Now()}
		rep := d.CostReport()
		for _, a := range rep.Agents {
			s.Spend = append(s.Spend, a.Recorded)
		}
		for _, a := range d.Agents() {
			st := a.Status()
			as := agentSample{Published: st.Published}
			if st.Last != nil {
				as.Last, as.LastAt = st.Last.BlobID, st.Last.CreatedAt
			}
			s.Status = append(s.Status, as)
		}
		out = append(out, s)
	}
	take()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			take()
			return out
		case <-t.C:
			take()
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// naiveCharge prices one whole-brain blob of size bytes stored for epochs
// epochs, by Walrus's formula (walruscost) at price: the reference
// runtime's way.
func naiveCharge(size uint64, epochs uint64, price walruscost.Price, shards int) (encoded, frost uint64, err error) {
	encoded, err = walruscost.EncodedLength(size, shards)
	if err != nil {
		return 0, 0, err
	}
	return encoded, price.Cost(encoded, epochs), nil
}
