package pointer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hermesd/hermesd/internal/backoff"
	"github.com/hermesd/hermesd/internal/ens"
)

// firstCheck is how soon after the start every record is first read
// back: a daemon that starts does not know what the chain holds now (it
// may have been restored older while it was stopped, which the head watch
// cannot see).
const firstCheck = 10 * time.Second

// confirmConcurrency bounds the L1 resolutions of one round.
const confirmConcurrency = 8

// lane is the writes, confirmations and read-backs of one target. Its
// step runs on one goroutine at a time (Run's, or Step's caller); mu
// guards what other lanes and readers touch.
type lane struct {
	pub    *Publisher
	target string
	chain  Chain // nil: no writer (read-only)
	wake   chan struct{}

	hmu   sync.Mutex // heads and pace: heads come and go (Publisher.Add, Remove)
	heads []*Head
	pace  map[*Head]*pace

	mu         sync.Mutex
	lastCheck  time.Time
	checkAt    time.Time       // next read-back after a failed one (zero: lastCheck+CheckEvery)
	checkRetry backoff.Backoff // read-backs that failed are tried again sooner
	chainDown  bool            // a chain call failed since the last success
	// unreachable: the last failure was the chain not answering; a probe
	// (L1 lane) runs until it answers.
	unreachable bool
	probeAt     time.Time
	// The head watch (L1 lane): its next look, the head at the last one,
	// and the highest block one of our transactions was mined in.
	headAt time.Time
	seen   ens.Head
	mined  uint64
}

// pace is one head's schedule.
type pace struct {
	last    time.Time // last write that landed
	retryAt time.Time // earliest next write after a failure
	retry   *backoff.Backoff
	held    bool // held at the last look: its release publishes at once
	// A value written off L1 that L1 resolution does not show yet is
	// confirmed (read, never written) on a backoff of its own, by the
	// number of reads that did not show it (state.Written.Reads):
	// pointer_interval does not apply to reads.
	confirmAt time.Time
	confirm   *backoff.Backoff
}

func newLane(p *Publisher, target string) *lane {
	l := &lane{pub: p, target: target, pace: map[*Head]*pace{}, wake: make(chan struct{}, 1)}
	if c := p.cfg.Chains[target]; c != nil {
		l.chain = c
	}
	l.checkRetry = backoff.Backoff{Min: 2 * time.Second, Max: p.cfg.CheckEvery, Now: p.cfg.Now}
	l.lastCheck = p.cfg.Now().Add(min(firstCheck, p.cfg.CheckEvery) - p.cfg.CheckEvery)
	return l
}

// add puts h in the lane and wakes the lane whenever h has news.
func (l *lane) add(h *Head) {
	l.track(h)
	h.OnPending(l.notify)
}

// track schedules h in the lane.
func (l *lane) track(h *Head) {
	poll := max(h.cfg.ConfirmPoll, 10*time.Millisecond)
	l.hmu.Lock()
	defer l.hmu.Unlock()
	l.heads = append(l.heads, h)
	l.pace[h] = &pace{
		retry:   &backoff.Backoff{Min: 2 * time.Second, Max: 10 * time.Minute, Log: h.log, Now: l.pub.cfg.Now},
		confirm: &backoff.Backoff{Min: poll, Max: min(max(50*poll, time.Second), time.Minute), Log: h.log, Now: l.pub.cfg.Now},
	}
}

// remove takes h out of the lane: nothing of it is written or read back
// from the next round on (a write in flight completes).
func (l *lane) remove(h *Head) bool {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if _, ok := l.pace[h]; !ok {
		return false
	}
	delete(l.pace, h)
	l.heads = slices.DeleteFunc(l.heads, func(x *Head) bool { return x == h })
	return true
}

// list is the lane's heads now.
func (l *lane) list() []*Head {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return slices.Clone(l.heads)
}

// paceOf is h's schedule; nil when h left the lane.
func (l *lane) paceOf(h *Head) *pace {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.pace[h]
}

func (l *lane) now() time.Time { return l.pub.cfg.Now() }

func (l *lane) notify() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run steps the lane until ctx ends.
func (l *lane) run(ctx context.Context) {
	l.mu.Lock()
	every := l.pub.cfg.CheckEvery
	l.lastCheck = l.now().Add(min(firstCheck, every) - every)
	l.mu.Unlock()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
		if ctx.Err() != nil {
			return // a timer and the stop can be ready together
		}
		next := l.step(ctx)
		if next.IsZero() {
			next = l.now().Add(time.Minute)
		}
		timer.Reset(max(next.Sub(l.now()), 10*time.Millisecond))
	}
}

// step is one round: probe a chain that was down, watch the head, read
// back when due, publish what is due. It returns when the next round is
// due (zero: nothing scheduled).
func (l *lane) step(ctx context.Context) time.Time {
	fleetAt := l.syncFleet(ctx)
	l.probeChain(ctx)
	l.watchHead(ctx)
	every := l.pub.cfg.CheckEvery
	if every > 0 && !l.now().Before(l.nextCheck()) {
		l.checkAll(ctx)
	}
	next := l.publishDue(ctx, false)
	// A record just published is what the fleet heads say next.
	if at := l.syncFleet(ctx); !at.IsZero() && (fleetAt.IsZero() || at.Before(fleetAt)) {
		fleetAt = at
	}
	l.mu.Lock()
	if at := l.probeAt; !at.IsZero() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	if at := l.headAt; l.watches() && !l.unreachable && (next.IsZero() || at.Before(next)) {
		next = at
	}
	l.mu.Unlock()
	if every > 0 {
		if c := l.nextCheck(); next.IsZero() || c.Before(next) {
			next = c
		}
	}
	if !fleetAt.IsZero() && (next.IsZero() || fleetAt.Before(next)) {
		next = fleetAt
	}
	return next
}

// fleetRetry is how soon a fleet head that could not be written is tried
// again.
const fleetRetry = 2 * time.Second

// syncFleet writes the fleet heads that do not name their agent's last
// verified snapshot (a write that failed); it returns when to try again
// (zero: none due). A head whose gate is closed (the node fenced for a
// moment) is tried again too: its fleet head must not wait for the
// record's pointer_interval.
func (l *lane) syncFleet(ctx context.Context) time.Time {
	var at time.Time
	for _, h := range l.list() {
		if !h.FleetPending() {
			continue
		}
		if h.gate() != nil || h.SyncFleet(ctx) != nil {
			at = l.now().Add(fleetRetry)
		}
	}
	return at
}

// nextCheck is when every record is read back next.
func (l *lane) nextCheck() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.checkAt.IsZero() {
		return l.checkAt
	}
	return l.lastCheck.Add(l.pub.cfg.CheckEvery)
}

// dueAt is when h may write next. A pointer written off L1 and only
// waiting to be visible is due for its next confirmation instead, which
// writes nothing.
func (l *lane) dueAt(h *Head, pp Pending) time.Time {
	pc := l.paceOf(h)
	if pc == nil {
		return time.Time{}
	}
	if pp.AwaitingVisibility() {
		return pc.confirmAt
	}
	at := pc.last.Add(h.cfg.Interval)
	if pc.retryAt.After(at) {
		at = pc.retryAt
	}
	return at
}

// publishDue publishes what is due (everything pending when force) and
// returns when the next pointer is due (zero: nothing pending).
func (l *lane) publishDue(ctx context.Context, force bool) time.Time {
	next, _ := l.publish(ctx, force)
	return next
}

// interrupted reports whether r failed only because ctx, the lane's own
// context, was cancelled.
func interrupted(ctx context.Context, r Result) bool {
	return r.Outcome == Failed && errors.Is(ctx.Err(), context.Canceled) && errors.Is(r.Err, context.Canceled)
}

// publish is publishDue that also counts the pointers it published.
func (l *lane) publish(ctx context.Context, force bool) (next time.Time, published int) {
	l.noteHolds()
	// A rollback found while writing is published again at once, once.
	for round := 0; round < 2; round++ {
		now := l.now()
		var due []*Head
		var pps []Pending
		for _, h := range l.list() {
			if pp, ok := h.Pending(); ok && (force || !l.dueAt(h, pp).After(now)) {
				due, pps = append(due, h), append(pps, pp)
			}
		}
		if len(due) == 0 {
			break
		}
		start := l.now()
		results := l.round(ctx, due, pps)
		took := l.now().Sub(start)
		again := false
		for _, r := range results {
			if interrupted(ctx, r) {
				// Our own stop (or a second signal) cancelled the write:
				// not the chain's failure, and no backoff. The shutdown
				// flush, or the next start, publishes it.
				r.Head.log.Debug("pointer publish interrupted by the stop", "blob", r.Update.Value)
				continue
			}
			if r.Outcome == Published {
				published++
			}
			if l.schedule(r, took) {
				again = true
			}
		}
		if !again || ctx.Err() != nil {
			break
		}
	}
	for _, h := range l.list() {
		if pp, ok := h.Pending(); ok {
			if at := l.dueAt(h, pp); next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return next, published
}

// round writes the due pointers that need a write (oldest change first:
// when gas or time runs out, what waited longest is on chain) and
// confirms those written off L1, by reading them through L1.
func (l *lane) round(ctx context.Context, due []*Head, pps []Pending) []Result {
	idx := make([]int, len(due))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(pps[a].Since.UnixNano(), pps[b].Since.UnixNano()) })
	var writes, confirms []*Head
	var wpps []Pending
	for _, i := range idx {
		if pps[i].AwaitingVisibility() {
			confirms = append(confirms, due[i])
		} else {
			writes, wpps = append(writes, due[i]), append(wpps, pps[i])
		}
	}
	out := l.write(ctx, writes, wpps)
	return append(out, confirmAll(ctx, confirms)...)
}

// write sends the heads' pending pointers in gas-bounded transactions
// and judges each result; a value written off L1 is confirmed at once.
func (l *lane) write(ctx context.Context, heads []*Head, pps []Pending) []Result {
	if len(heads) == 0 {
		return nil
	}
	// A head whose name resolves from elsewhere than its target is not
	// written (docs/design.md §7.4).
	var refused []Result
	keep := heads[:0:0]
	var kpps []Pending
	routes := make([]error, len(heads))
	g := new(errgroup.Group)
	g.SetLimit(confirmConcurrency)
	for i, h := range heads {
		g.Go(func() error {
			routes[i] = h.routed(ctx)
			return nil
		})
	}
	g.Wait()
	for i, h := range heads {
		if err := routes[i]; err != nil {
			pp := pps[i]
			out := Failed
			if errors.Is(err, ErrMisrouted) {
				out = Misrouted
			}
			refused = append(refused, Result{Head: h, Update: Update{Name: pp.Name, Value: pp.Value, Expected: pp.Expected},
				Target: l.target, Since: pp.Since, Outcome: out, Err: err})
			continue
		}
		keep, kpps = append(keep, h), append(kpps, pps[i])
	}
	if len(refused) > 0 {
		return append(l.write(ctx, keep, kpps), refused...)
	}
	ups := make([]Update, len(heads))
	for i, pp := range pps {
		ups[i] = Update{Name: pp.Name, Value: pp.Value, Expected: pp.Expected}
	}
	// A head that may not write now (in a fleet: fenced, or no longer
	// the agent's owner) sends nothing.
	ws := make([]Written, len(heads))
	var send []int
	for i, h := range heads {
		if err := h.gate(); err != nil {
			ws[i] = Written{Kind: WriteFailed, Err: err}
			continue
		}
		send = append(send, i)
	}
	if len(send) > 0 {
		sendUps := make([]Update, len(send))
		for k, i := range send {
			sendUps[k] = ups[i]
		}
		var sent []Written
		if l.chain != nil {
			sent = Write(ctx, l.chain, sendUps)
		} else {
			err := fmt.Errorf("no writer for ens.records %s (a read-only configuration?)", l.target)
			for range sendUps {
				sent = append(sent, Written{Kind: WriteFailed, Err: err})
			}
		}
		for k, i := range send {
			ws[i] = sent[k]
		}
	}
	out := make([]Result, len(heads))
	var written []int
	for i, h := range heads {
		out[i] = h.apply(ctx, ups[i], pps[i].Since, ws[i])
		if out[i].confirm {
			written = append(written, i)
		}
	}
	confirmed := confirmAll(ctx, pick(heads, written))
	for k, i := range written {
		c := confirmed[k]
		out[i].Outcome, out[i].Seen, out[i].Reads, out[i].Err = c.Outcome, c.Seen, c.Reads, c.Err
	}
	return out
}

// confirmAll confirms the heads' written values, a few at a time.
func confirmAll(ctx context.Context, heads []*Head) []Result {
	out := make([]Result, len(heads))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(confirmConcurrency)
	for i, h := range heads {
		g.Go(func() error {
			out[i] = h.Confirm(gctx)
			return nil
		})
	}
	g.Wait()
	return out
}

func pick(heads []*Head, idx []int) []*Head {
	out := make([]*Head, len(idx))
	for k, i := range idx {
		out[k] = heads[i]
	}
	return out
}

// noteHolds remembers which heads are held; one whose hold an operator
// just resolved (pointer override) publishes at once, whatever its
// interval or backoff.
func (l *lane) noteHolds() {
	for _, h := range l.list() {
		pc := l.paceOf(h)
		if pc == nil {
			continue
		}
		switch held := h.Hold() != nil; {
		case held:
			pc.held = true
		case pc.held:
			pc.held, pc.last, pc.retryAt = false, time.Time{}, time.Time{}
		}
	}
}

// flush publishes until nothing pending needs a write, or ctx ends; it
// returns the agents whose pointers still need one.
func (l *lane) flush(ctx context.Context) []string {
	bo := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	start, published := l.now(), 0
	defer func() {
		if published > 0 {
			took := l.now().Sub(start)
			l.pub.log.Info("flush published pending pointers", "pointers", published, "took", took.Round(time.Millisecond),
				"per_second", fmt.Sprintf("%.1f", float64(published)/max(took.Seconds(), 1e-3)))
		}
	}()
	for n := 1; ; n++ {
		_, done := l.publish(ctx, true)
		published += done
		var needWrite []string
		for _, h := range l.list() {
			// A misrouted head cannot be written here until the
			// configuration follows its record (like a held one, it
			// waits for the operator).
			if pp, ok := h.Pending(); ok && !pp.AwaitingVisibility() && h.Misrouted() == "" {
				needWrite = append(needWrite, h.cfg.Agent)
			}
		}
		if len(needWrite) == 0 {
			l.noteWritten()
			return nil
		}
		t := time.NewTimer(bo.Wait(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return needWrite
		case <-t.C:
		}
	}
}

// noteWritten logs, at a stop, the pointers written off L1 that L1 does
// not show yet: confirmed after the next start.
func (l *lane) noteWritten() {
	for _, h := range l.list() {
		if pp, ok := h.Pending(); ok && pp.AwaitingVisibility() {
			h.log.Info("pointer written where the record lives, not yet visible from L1; confirmed after the next start",
				"blob", pp.Value, "tx", pp.Written.TxHash)
		}
	}
}
