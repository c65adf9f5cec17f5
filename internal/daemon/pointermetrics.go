package daemon

import (
	"time"

	"github.com/hermesd/hermesd/internal/pointer"
)

// pointerObserver feeds what the pointer publisher does into the metrics.
// What pointers cost is read from the cost ledger (spendCollector), the
// one account of every paid transaction.
type pointerObserver metrics

var _ pointer.Observer = (*pointerObserver)(nil)

func (o *pointerObserver) Outcome(id string, out pointer.Outcome) {
	o.publishes.add(id, string(out), 1)
}

func (o *pointerObserver) Checked(id string, out pointer.Outcome) {
	o.pointerChecks.add(id, string(out), 1)
}

func (o *pointerObserver) Published(id string, took time.Duration) {
	o.publishLast.set(id, "", float64(time.Now().Unix()))
	o.stageDuration.WithLabelValues("publish").Observe(took.Seconds())
}

func (o *pointerObserver) Failed(id, stage string) { o.failures.add(id, stage, 1) }

func (o *pointerObserver) Rewound() { o.headRewinds.Inc() }
