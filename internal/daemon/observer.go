package daemon

import (
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/quilt"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/walrus"
)

// servicesObserver is the daemon as the observer of its services
// (compose.Options.Observer): the Walrus client's attempts and the quilt
// batcher's quilts go to the metrics, and a Walrus retry waiting out its
// backoff goes when the prober sees the store answer again.
type servicesObserver Daemon

var _ compose.Observer = (*servicesObserver)(nil)

func (o *servicesObserver) WalrusAttempt(a walrus.Attempt) {
	outcome := "ok"
	failed := a.Err != nil || a.Status == 0 || a.Status >= 400
	switch {
	case failed && a.Retry:
		outcome = "retry"
	case failed:
		outcome = "error"
	}
	if failed && a.Retry {
		o.walrusRetryAt.Store(o.now().UnixNano())
	}
	o.metrics.walrusAttempts.WithLabelValues(a.Op, outcome).Inc()
}

func (o *servicesObserver) Quilt(b quilt.Batch) { o.quiltMetrics.observe(b) }

func (o *servicesObserver) WalrusRecovered() <-chan struct{} { return o.probe.recovered() }

// observer feeds agent events into the metrics.
type observer metrics

var _ agent.Observer = (*observer)(nil)

func (o *observer) Phase(id string, p agent.Phase) {
	v := 0.0
	if p == agent.PhaseReady {
		v = 1
	}
	o.agentReady.set(id, "", v)
}

func (o *observer) Hashed(id string, files int, bytes int64, took time.Duration) {
	o.brainFiles.set(id, "", float64(files))
	o.brainBytes.set(id, "", float64(bytes))
	o.stageDuration.WithLabelValues("hash").Observe(took.Seconds())
}

func (o *observer) Snapshot(id string, r snapshot.Result) {
	o.snapshots.add(id, "uploaded", 1)
	o.snapshotLast.set(id, "", float64(time.Now().Unix()))
	o.snapshotSize.set(id, "", float64(r.Size))
	o.uploadedBytes.add(id, "", float64(r.Size))
	o.stageDuration.WithLabelValues("pack").Observe(r.Pack.Seconds())
	o.stageDuration.WithLabelValues("upload").Observe(r.Upload.Seconds())
	o.stageDuration.WithLabelValues("verify").Observe(r.Verify.Seconds())
	if r.Quilted > 0 {
		o.stageDuration.WithLabelValues("batch").Observe(r.BatchWait.Seconds())
	}
}

func (o *observer) Unchanged(id string) {
	o.snapshots.add(id, "unchanged", 1)
}

func (o *observer) Failed(id, stage string, err error) {
	o.failures.add(id, stage, 1)
	if stage == agent.StageSnapshot || stage == agent.StagePack {
		o.snapshots.add(id, "failed", 1)
	}
}

func (o *observer) Restore(id, result string, r *snapshot.Restored) {
	o.restores.add(id, result, 1)
	if r != nil {
		o.stageDuration.WithLabelValues("download").Observe(r.Download.Seconds())
		o.stageDuration.WithLabelValues("unpack").Observe(r.Unpack.Seconds())
	}
}
