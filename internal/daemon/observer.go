package daemon

import (
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// observer feeds agent events into the metrics.
type observer metrics

var _ agent.Observer = (*observer)(nil)

func (o *observer) Phase(id string, p agent.Phase) {
	v := 0.0
	if p == agent.PhaseReady {
		v = 1
	}
	o.agentReady.WithLabelValues(id).Set(v)
}

func (o *observer) Hashed(id string, files int, bytes int64, took time.Duration) {
	o.brainFiles.WithLabelValues(id).Set(float64(files))
	o.brainBytes.WithLabelValues(id).Set(float64(bytes))
	o.stageDuration.WithLabelValues(id, "hash").Observe(took.Seconds())
}

func (o *observer) Snapshot(id string, r snapshot.Result) {
	o.snapshots.WithLabelValues(id, "uploaded").Inc()
	o.snapshotLast.WithLabelValues(id).Set(float64(time.Now().Unix()))
	o.snapshotSize.WithLabelValues(id).Set(float64(r.Size))
	o.uploadedBytes.WithLabelValues(id).Add(float64(r.Size))
	o.stageDuration.WithLabelValues(id, "pack").Observe(r.Pack.Seconds())
	o.stageDuration.WithLabelValues(id, "upload").Observe(r.Upload.Seconds())
	o.stageDuration.WithLabelValues(id, "verify").Observe(r.Verify.Seconds())
	if r.Quilted > 0 {
		o.stageDuration.WithLabelValues(id, "batch").Observe(r.BatchWait.Seconds())
	}
}

func (o *observer) Unchanged(id string) {
	o.snapshots.WithLabelValues(id, "unchanged").Inc()
}

func (o *observer) Failed(id, stage string, err error) {
	o.failures.WithLabelValues(id, stage).Inc()
	if stage != "hash" {
		o.snapshots.WithLabelValues(id, "failed").Inc()
	}
}

func (o *observer) Restore(id, result string, r *snapshot.Restored) {
	o.restores.WithLabelValues(id, result).Inc()
	if r != nil {
		o.stageDuration.WithLabelValues(id, "download").Observe(r.Download.Seconds())
		o.stageDuration.WithLabelValues(id, "unpack").Observe(r.Unpack.Seconds())
	}
}
