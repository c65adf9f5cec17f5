package gcpace

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
)

// Policy is how far the heap may grow past the live heap of the last
// collection: Min bytes or Fraction of the live heap, whichever is more,
// and never more than GOGC=100 would let it.
type Policy struct {
	Min      int64
	Fraction float64
}

// Daemon is hermesd's policy. Measured on this repository's bench machine
// (2 cores), against GOGC=100: the first snapshot of 50,000 files peaks at
// 61–65 MiB of RSS in the bench tool (77–84 before) and 74–75 MiB in the
// daemon (91–95), at the same wall time; 1,000 agents starting peak at
// 98–101 MiB (117–130) and idle at 75–82 MiB (81–92), at 0.3% of a core
// idle (0.1–0.5%), published 15–24 s after the start (13–19 s before).
var Daemon = Policy{Min: 8 << 20, Fraction: 0.25}

// Pacer applies a Policy after every collection until Stop.
type Pacer struct {
	p Policy

	mu      sync.Mutex
	stopped bool
	prev    int // GOGC before Start
	percent int // the GOGC set last
	sample  [1]rtmetrics.Sample
}

// active is set while a pacer is on: GOGC is the process's, so one at a
// time (a test binary may run several daemons).
var active atomic.Bool

// Start applies p now and after every collection, unless GOGC is set in
// the environment or another pacer is on: then it returns nil (Stop on nil
// does nothing).
func Start(p Policy) *Pacer {
	if os.Getenv("GOGC") != "" || !active.CompareAndSwap(false, true) {
		return nil
	}
	c := &Pacer{p: p, prev: debug.SetGCPercent(100), percent: -2}
	c.sample[0].Name = "/gc/heap/live:bytes"
	c.update()
	c.arm()
	return c
}

// arm has update run after the next collection: a cleanup runs once a
// collection found its object unreachable, and the object is new and
// referred to by nothing.
func (c *Pacer) arm() {
	sentinel := new([64]byte) // not a tiny object: those share a block and may outlive many collections
	runtime.AddCleanup(sentinel, func(c *Pacer) {
		if c.update() {
			c.arm()
		}
	}, c)
}

// update sets GOGC from the last collection's live heap and reports
// whether the pacer is still on.
func (c *Pacer) update() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	rtmetrics.Read(c.sample[:])
	if c.sample[0].Value.Kind() != rtmetrics.KindUint64 {
		return true
	}
	live := int64(min(c.sample[0].Value.Uint64(), math.MaxInt64/4))
	head := max(c.p.Min, int64(float64(live)*c.p.Fraction))
	percent := 100
	if live > 0 {
		percent = int(min(100, max(1, 100*head/live)))
	}
	if percent != c.percent {
		c.percent = percent
		debug.SetGCPercent(percent)
	}
	return true
}

// Percent is the GOGC the pacer set last (its tests read it).
func (c *Pacer) Percent() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.percent
}

// Stop puts GOGC back as it was before Start.
func (c *Pacer) Stop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.stopped = true
		debug.SetGCPercent(c.prev)
		active.Store(false)
	}
}
