package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hermesd/hermesd/internal/quilt"
)

// quiltMetrics are the series of the shared quilt batcher (not per
// agent: a quilt holds the packs of many). The packs' own waits are
// hermesd_stage_duration_seconds{stage="batch"}.
type quiltMetrics struct {
	quilts  *prometheus.CounterVec
	packs   *prometheus.CounterVec
	patches prometheus.Histogram
	wait    prometheus.Histogram
	bytes   prometheus.Counter
}

func newQuiltMetrics(reg *prometheus.Registry) *quiltMetrics {
	q := &quiltMetrics{
		quilts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermesd_quilts_total",
			Help: "Quilts (Walrus blobs holding the small packs of many agents), by result (stored, failed).",
		}, []string{"result"}),
		packs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermesd_quilt_packs_total",
			Help: "Packs stored as quilt patches, by result (stored: read back and compared; failed).",
		}, []string{"result"}),
		patches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hermesd_quilt_patches",
			Help:    "Patches per stored quilt (at most 666).",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 400, 666},
		}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hermesd_quilt_batch_wait_seconds",
			Help:    "How long a quilt gathered packs, from its first to its store (at most walrus.batch_window).",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 10),
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hermesd_quilt_blob_bytes_total",
			Help: "Bytes of the quilt blobs stored (the packs and the layout's padding), as the publisher reported them.",
		}),
	}
	reg.MustRegister(q.quilts, q.packs, q.patches, q.wait, q.bytes)
	// Every series from the start, at zero: rates and the dashboard see
	// them before the first quilt (and with quilts off).
	for _, r := range []string{"stored", "failed"} {
		q.quilts.WithLabelValues(r)
		q.packs.WithLabelValues(r)
	}
	return q
}

func (q *quiltMetrics) observe(b quilt.Batch) {
	q.packs.WithLabelValues("failed").Add(float64(b.Failed))
	q.packs.WithLabelValues("stored").Add(float64(b.Patches - b.Failed))
	if b.QuiltID == "" {
		q.quilts.WithLabelValues("failed").Inc()
		return
	}
	q.quilts.WithLabelValues("stored").Inc()
	q.patches.Observe(float64(b.Patches))
	q.wait.Observe(b.Wait.Seconds())
	q.bytes.Add(float64(b.Size))
}
