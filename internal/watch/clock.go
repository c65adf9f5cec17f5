package watch

import (
	"container/heap"
	"sync"
	"time"
)

// alarm is one deadline on a clock. fire runs on the clock's goroutine and
// must not block: it only hands work to its owner.
type alarm struct {
	due  time.Time
	idx  int // position in the heap; -1 when not set
	fire func()
}

// clock runs every alarm of a hub on one goroutine and one timer, so a
// thousand idle subscriptions cost no goroutines and, with no alarm set,
// no wake-ups at all.
type clock struct {
	mu     sync.Mutex
	alarms alarms
	wake   chan struct{} // capacity 1: the earliest deadline moved
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func newClock() *clock {
	c := &clock{wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run()
	}()
	return c
}

// set arms a for due, moving it if it is already set.
func (c *clock) set(a *alarm, due time.Time) {
	c.mu.Lock()
	if a.idx >= 0 {
		if a.due.Equal(due) {
			c.mu.Unlock()
			return
		}
		a.due = due
		heap.Fix(&c.alarms, a.idx)
	} else {
		a.due = due
		heap.Push(&c.alarms, a)
	}
	first := a.idx == 0
	c.mu.Unlock()
	if first {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// stop disarms a. Its fire may still be running or about to run; owners
// ignore a fire they no longer expect.
func (c *clock) stop(a *alarm) {
	c.mu.Lock()
	if a.idx >= 0 {
		heap.Remove(&c.alarms, a.idx)
	}
	c.mu.Unlock()
}

// armed reports how many alarms are set.
func (c *clock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.alarms)
}

// close stops the clock and waits for its goroutine.
func (c *clock) close() {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
}

func (c *clock) run() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var due []*alarm
	for {
		c.mu.Lock()
		now := time.Now()
		due = due[:0]
		for len(c.alarms) > 0 && !c.alarms[0].due.After(now) {
			due = append(due, heap.Pop(&c.alarms).(*alarm))
		}
		wait := time.Duration(-1)
		if len(c.alarms) > 0 {
			wait = c.alarms[0].due.Sub(now)
		}
		c.mu.Unlock()
		if len(due) > 0 {
			for i, a := range due {
				a.fire()
				due[i] = nil
			}
			continue // time has passed: look again
		}
		if wait >= 0 {
			t.Reset(wait)
		} else {
			t.Stop()
		}
		select {
		case <-t.C:
		case <-c.wake:
		case <-c.done:
			return
		}
	}
}

// alarms is a min-heap of deadlines.
type alarms []*alarm

func (h alarms) Len() int           { return len(h) }
func (h alarms) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h alarms) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *alarms) Push(x any) {
	a := x.(*alarm)
	a.idx = len(*h)
	*h = append(*h, a)
}
func (h *alarms) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	a.idx = -1
	*h = old[:len(old)-1]
	return a
}
