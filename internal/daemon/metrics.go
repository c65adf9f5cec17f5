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

	// Per agent (agentSeries: plain numbers, written out at scrape time).
	perAgent         *agentSeries
	agentReady       agentVec
	brainBytes       agentVec
	brainFiles       agentVec
	snapshotLast     agentVec
	snapshotSize     agentVec
	snapshots        agentVec
	uploadedBytes    agentVec
	failures         agentVec
	publishLast      agentVec
	publishes        agentVec
	receiptsIngested agentVec
	restores         agentVec
	pointerChecks    agentVec

	stageDuration  *prometheus.HistogramVec
	walrusAttempts *prometheus.CounterVec
	headRewinds    prometheus.Counter
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
		m.snapshots.add(id, r, 0)
	}
	for _, stage := range append([]string{"publish"}, agent.Stages...) {
		m.failures.add(id, stage, 0)
	}
	m.uploadedBytes.add(id, "", 0)
	if !ens {
		return
	}
	for _, r := range []pointer.Outcome{pointer.Published, pointer.Rollback, pointer.Held, pointer.Failed} {
		m.publishes.add(id, string(r), 0)
		m.pointerChecks.add(id, string(r), 0)
	}
	m.pointerChecks.add(id, string(pointer.OK), 0)
}

func newMetrics() *metrics {
	a := newAgentSeries()
	m := &metrics{reg: prometheus.NewRegistry(), perAgent: a}
	const gauge, counter = false, true
	m.agentReady = a.family("hermesd_agent_ready",
		"1 when the agent's brain is restored (or deliberately fresh) and watched, 0 while starting or failed.", "", gauge)
	m.brainBytes = a.family("hermesd_brain_bytes", "Bytes of hashed brain content at the last check.", "", gauge)
	m.brainFiles = a.family("hermesd_brain_files", "Number of hashed brain files at the last check.", "", gauge)
	m.snapshotLast = a.family("hermesd_snapshot_last_success_timestamp_seconds",
		"Unix time of the last snapshot that was uploaded and verified.", "", gauge)
	m.snapshotSize = a.family("hermesd_snapshot_size_bytes", "Size of the last uploaded encrypted snapshot.", "", gauge)
	m.snapshots = a.family("hermesd_snapshots_total",
		"Snapshots attempted, by result (uploaded, unchanged, failed).", "result", counter)
	m.uploadedBytes = a.family("hermesd_uploaded_bytes_total", "Encrypted snapshot bytes stored on Walrus.", "", counter)
	m.failures = a.family("hermesd_failures_total",
		"Failed attempts by stage (state, dirs, sqlite, hash, snapshot, pack, restore, publish, visibility): every failed sync and pointer write counts; retried with backoff.",
		"stage", counter)
	m.publishLast = a.family("hermesd_publish_last_success_timestamp_seconds",
		"Unix time the agent-snapshot record last moved to a new snapshot.", "", gauge)
	m.publishes = a.family("hermesd_pointer_writes_total",
		"ENS pointer writes by result (published, rollback, held, unauthorized, failed).", "result", counter)
	m.receiptsIngested = a.family("hermesd_receipts_ingested_total",
		"Receipts received from the agent runtime, by result (added, duplicate, quarantined, dropped, rejected).", "result", counter)
	m.restores = a.family("hermesd_restores_total",
		"Cold restores at start, by result (restored, fresh, existing, failed).", "result", counter)
	m.pointerChecks = a.family("hermesd_pointer_checks_total",
		"Periodic read-backs of published pointers, by result (ok, rollback, held, failed). A rollback was repaired.", "result", counter)
	m.stageDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hermesd_stage_duration_seconds",
		Help:    "Duration of pipeline stages (hash, pack, upload, verify, batch: waiting for a quilt, publish, download, unpack), over all agents.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		// By stage only: per agent it was 13 series a stage, 78,000 of the
		// 124,000 series (8.8 MB a scrape) of a daemon of a thousand
		// agents. Each agent's stage times are in its snapshot log line.
	}, []string{"stage"})
	m.walrusAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hermesd_walrus_requests_total",
		Help: "HTTP requests to Walrus publishers and aggregators by operation and outcome (ok, retry, error).",
	}, []string{"op", "outcome"})
	m.headRewinds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hermesd_chain_head_rewinds_total",
		Help: "Times the chain's head was seen to go back or a block below it to change (a reorg, an older chain restored); every pointer is then read back at once.",
	})
	m.reg.MustRegister(
		m.headRewinds,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		a, m.stageDuration, m.walrusAttempts,
	)
	return m
}
