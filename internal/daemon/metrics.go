package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/pointer"
)

// metrics are hermesd's Prometheus series. Every series carries the agent
// id, so one stale agent stands out among healthy ones: alert on
// time() - hermesd_snapshot_last_success_timestamp_seconds and on
// hermesd_pointer_pending_age_seconds.
type metrics struct {
	reg *prometheus.Registry

	agentReady       *prometheus.GaugeVec
	brainBytes       *prometheus.GaugeVec
	brainFiles       *prometheus.GaugeVec
	snapshotLast     *prometheus.GaugeVec
	snapshotSize     *prometheus.GaugeVec
	snapshots        *prometheus.CounterVec
	uploadedBytes    *prometheus.CounterVec
	stageDuration    *prometheus.HistogramVec
	failures         *prometheus.CounterVec
	publishLast      *prometheus.GaugeVec
	publishes        *prometheus.CounterVec
	walrusAttempts   *prometheus.CounterVec
	receiptsIngested *prometheus.CounterVec
	restores         *prometheus.CounterVec
	pointerChecks    *prometheus.CounterVec
	headRewinds      prometheus.Counter
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ageCollector reports ages computed at scrape time, so they keep growing
// while an agent is stuck rather than freezing at their last update.
type ageCollector struct {
	agents    func() []*agent.Agent
	status    func(*agent.Agent) agent.Status
	checkedAt func(*agent.Agent) time.Time
	checked   *prometheus.Desc
	unsaved   *prometheus.Desc
	pending   *prometheus.Desc
	held      *prometheus.Desc
	healthy   *prometheus.Desc
	unseen    *prometheus.Desc
}

func newAgeCollector(agents func() []*agent.Agent, status func(*agent.Agent) agent.Status, checkedAt func(*agent.Agent) time.Time) *ageCollector {
	return &ageCollector{
		agents:    agents,
		status:    status,
		checkedAt: checkedAt,
		checked: prometheus.NewDesc("hermesd_pointer_check_age_seconds",
			"How long since the agent's pointer was last read back from the chain or written there (since the daemon started, when not yet); "+
				"above chain.check_interval the pointer is unverified. 0 for an agent without an ENS name.",
			[]string{"agent"}, nil),
		unsaved: prometheus.NewDesc("hermesd_unsaved_change_age_seconds",
			"How long the brain has differed from its last verified snapshot (0 when every change is stored). Alert on this.",
			[]string{"agent"}, nil),
		pending: prometheus.NewDesc("hermesd_pointer_pending_age_seconds",
			"How long a verified snapshot has waited for its ENS pointer (0 when none).",
			[]string{"agent"}, nil),
		held: prometheus.NewDesc("hermesd_pointer_held",
			"1 while publishing is held (another writer, or the signer lost the name) until an operator decides.",
			[]string{"agent"}, nil),
		healthy: prometheus.NewDesc("hermesd_agent_healthy",
			"1 when the agent is ready, its last sync succeeded, its state is saved, nothing is held and no change is unsaved for longer than the configuration promises.",
			[]string{"agent"}, nil),
		unseen: prometheus.NewDesc("hermesd_pointer_not_visible_seconds",
			"How long a pointer written where the agent's record lives (an L2) has not been visible through L1 resolution (0 when none): the gateway's lag.",
			[]string{"agent"}, nil),
	}
}

func (c *ageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.checked
	ch <- c.unsaved
	ch <- c.pending
	ch <- c.held
	ch <- c.healthy
	ch <- c.unseen
}

func (c *ageCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	age := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return now.Sub(t).Seconds()
	}
	for _, a := range c.agents() {
		s := c.status(a)
		ch <- prometheus.MustNewConstMetric(c.checked, prometheus.GaugeValue, age(c.checkedAt(a)), s.ID)
		ch <- prometheus.MustNewConstMetric(c.unsaved, prometheus.GaugeValue, age(s.UnsavedSince), s.ID)
		var since time.Time
		if s.Pending != nil {
			since = s.Pending.Since
		}
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, age(since), s.ID)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, b2f(s.Hold != nil), s.ID)
		ok, _ := healthy(s)
		ch <- prometheus.MustNewConstMetric(c.healthy, prometheus.GaugeValue, b2f(ok), s.ID)
		var written time.Time
		if p := s.Pending; p != nil && p.Written != nil && p.Written.Value == p.Value {
			written = p.Written.At
		}
		ch <- prometheus.MustNewConstMetric(c.unseen, prometheus.GaugeValue, age(written), s.ID)
	}
}

// zeroAgent creates an agent's counters at zero, so that a rate or an
// alert over them sees the first failure as an increase, and a dashboard
// finds every series from the start.
func (m *metrics) zeroAgent(id string, ens bool) {
	for _, r := range []string{"uploaded", "unchanged", "failed"} {
		m.snapshots.WithLabelValues(id, r)
	}
	for _, stage := range append([]string{"publish"}, agent.Stages...) {
		m.failures.WithLabelValues(id, stage)
	}
	m.uploadedBytes.WithLabelValues(id)
	if !ens {
		return
	}
	for _, r := range []pointer.Outcome{pointer.Published, pointer.Rollback, pointer.Held, pointer.Failed} {
		m.publishes.WithLabelValues(id, string(r))
		m.pointerChecks.WithLabelValues(id, string(r))
	}
	m.pointerChecks.WithLabelValues(id, string(pointer.OK))
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	agent := []string{"agent"}
	m.agentReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hermesd_agent_ready",
		Help: "1 when the agent's brain is restored (or deliberately fresh) and watched, 0 while starting or failed.",
	}, agent)
	m.brainBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hermesd_brain_bytes",
		Help: "Bytes of hashed brain content at the last check.",
	}, agent)
	m.brainFiles = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hermesd_brain_files",
		Help: "Number of hashed brain files at the last check.",
	}, agent)
	m.snapshotLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hermesd_snapshot_last_success_timestamp_seconds",
		Help: "Unix time of the last snapshot that was uploaded and verified.",
	}, agent)
	m.snapshotSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hermesd_snapshot_size_bytes",
		Help: "Size of the last uploaded encrypted snapshot.",
	}, agent)
	m.snapshots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_snapshots_total",
		Help: "Snapshots attempted, by result (uploaded, unchanged, failed).",
	}, []string{"agent", "result"})
	m.uploadedBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_uploaded_bytes_total",
		Help: "Encrypted snapshot bytes stored on Walrus.",
	}, agent)
	m.stageDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hermesd_stage_duration_seconds",
		Help:    "Duration of pipeline stages (hash, pack, upload, verify, batch: waiting for a quilt, publish, download, unpack), over all agents.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		// By stage only: per agent it was 13 series a stage, 78,000 of the
		// 124,000 series (8.8 MB a scrape) of a daemon of a thousand
		// agents. Each agent's stage times are in its snapshot log line.
	}, []string{"stage"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_failures_total",
		Help: "Failed attempts by stage (state, dirs, sqlite, hash, snapshot, pack, restore, publish, visibility): every failed sync and pointer write counts; retried with backoff.",
	}, []string{"agent", "stage"})
	m.publishLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hermesd_publish_last_success_timestamp_seconds",
		Help: "Unix time the agent-snapshot record last moved to a new snapshot.",
	}, agent)
	m.publishes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_pointer_writes_total",
		Help: "ENS pointer writes by result (published, rollback, held, unauthorized, failed).",
	}, []string{"agent", "result"})
	m.walrusAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_walrus_requests_total",
		Help: "HTTP requests to Walrus publishers and aggregators by operation and outcome (ok, retry, error).",
	}, []string{"op", "outcome"})
	m.receiptsIngested = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_receipts_ingested_total",
		Help: "Receipts received from the agent runtime, by result (added, duplicate, quarantined, dropped, rejected).",
	}, []string{"agent", "result"})
	m.restores = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_restores_total",
		Help: "Cold restores at start, by result (restored, fresh, existing, failed).",
	}, []string{"agent", "result"})
	m.pointerChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_pointer_checks_total",
		Help: "Periodic read-backs of published pointers, by result (ok, rollback, held, failed). A rollback was repaired.",
	}, []string{"agent", "result"})
	m.headRewinds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermesd_chain_head_rewinds_total",
		Help: "Times the chain's head was seen to go back or a block below it to change (a reorg, an older chain restored); every pointer is then read back at once.",
	})
	m.reg.MustRegister(
		m.pointerChecks, m.headRewinds,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.agentReady, m.brainBytes, m.brainFiles, m.snapshotLast, m.snapshotSize, m.snapshots,
		m.uploadedBytes, m.stageDuration, m.failures, m.publishLast, m.publishes,
		m.walrusAttempts, m.receiptsIngested, m.restores,
	)
	return m
}
