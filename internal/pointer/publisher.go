package pointer

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hermesd/hermesd/internal/ens"
)

// Blocks is the L1 chain's head and the blocks below it, which the head
// watch reads (an *ens.Client).
type Blocks interface {
	Head(ctx context.Context) (ens.Head, error)
	Block(ctx context.Context, number uint64) (ens.Head, error)
}

// Observer receives what the publisher does, for metrics. Every method
// must be cheap and non-blocking.
type Observer interface {
	// Outcome: one write's or confirmation's outcome.
	Outcome(agent string, o Outcome)
	// Checked: one read-back's outcome.
	Checked(agent string, o Outcome)
	// Published: the record moved to a new snapshot in a step that took
	// took.
	Published(agent string, took time.Duration)
	// Failed: a failed attempt, by stage ("publish", "visibility").
	Failed(agent, stage string)
	// Rewound: the L1 chain's head was seen to go back.
	Rewound()
}

// PublisherConfig is what a Publisher writes through and how often it
// reads.
type PublisherConfig struct {
	// Chains write the records, by target ("" = L1). A head whose target
	// has none fails its writes (a read-only configuration).
	Chains map[string]Chain
	// Probe reads a record while the L1 chain is unreachable, to see it
	// answer again (nil: no probe).
	Probe Reader
	// Blocks is the L1 chain's head, looked at every HeadEvery (nil: not
	// watched), so that a chain that went back is noticed at once rather
	// than at the next read-back.
	Blocks    Blocks
	HeadEvery time.Duration
	// CheckEvery is how often every published pointer is read back
	// (chain.check_interval; 0: never).
	CheckEvery time.Duration
	Observer   Observer
	Log        *slog.Logger
	Now        func() time.Time
	// Targets are lanes made at the start even without a head: heads of
	// these targets may be added later (Add), as agents come and go in a
	// fleet.
	Targets []string
}

// Publisher schedules the writes, confirmations and read-backs of many
// heads, one lane per target. Step runs one round synchronously; Run runs
// every lane on a goroutine of its own until its context ends.
//
// Per head: at most one write per Config.Interval, oldest change first,
// failures retried with a backoff of its own, a value written off L1
// confirmed on a backoff of its own (reads only). Per lane: every
// published pointer read back every CheckEvery (sooner after a failed
// read, at once when the chain comes back or its head goes back). Pending
// pointers live in the agents' state files, so a crash resumes them.
type Publisher struct {
	cfg   PublisherConfig
	lanes []*lane // the L1 lane first
	log   *slog.Logger

	mu      sync.Mutex
	started time.Time // Run's start (zero before)
}

// NewPublisher returns a publisher of heads. Each head's lane is woken
// when the head has something new to publish.
func NewPublisher(cfg PublisherConfig, heads []*Head) *Publisher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	p := &Publisher{cfg: cfg, log: cfg.Log}
	byTarget := map[string]*lane{}
	for _, t := range cfg.Targets {
		if byTarget[t] == nil {
			l := newLane(p, t)
			byTarget[t] = l
			p.lanes = append(p.lanes, l)
		}
	}
	for _, h := range heads {
		t := h.cfg.Target
		l := byTarget[t]
		if l == nil {
			l = newLane(p, t)
			byTarget[t] = l
			p.lanes = append(p.lanes, l)
		}
		l.add(h)
	}
	slices.SortStableFunc(p.lanes, func(a, b *lane) int {
		switch {
		case a.target == b.target:
			return 0
		case a.target == "":
			return -1
		case b.target == "":
			return 1
		}
		return 0
	})
	return p
}

// Add puts h in the lane of its target, to be published from the next
// round on (the agent came to this node). Its target's lane must exist:
// one of the heads' at the start, or of PublisherConfig.Targets.
func (p *Publisher) Add(h *Head) error {
	for _, l := range p.lanes {
		if l.target == h.cfg.Target {
			l.add(h)
			l.notify()
			return nil
		}
	}
	return fmt.Errorf("no lane for %s", targetName(h.cfg.Target))
}

// Remove takes h out of the publisher: from the next round on nothing of
// it is written, confirmed or read back (the agent left this node). A
// write already sent completes; h's gate refuses any other.
func (p *Publisher) Remove(h *Head) {
	for _, l := range p.lanes {
		if l.remove(h) {
			h.OnPending(func() {})
			return
		}
	}
}

// Notify asks every lane to look for pending pointers.
func (p *Publisher) Notify() {
	for _, l := range p.lanes {
		l.notify()
	}
}

// Step runs one round of every lane, the L1 lane first, and returns when
// the next is due (zero: nothing scheduled). Tests and one-shot callers
// drive it; it must not run concurrently with Run.
func (p *Publisher) Step(ctx context.Context) time.Time {
	var next time.Time
	for _, l := range p.lanes {
		if at := l.step(ctx); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// Run publishes due pointers and reads published ones back until ctx
// ends, each lane on a goroutine of its own; it returns when all have
// stopped.
func (p *Publisher) Run(ctx context.Context) {
	p.mu.Lock()
	p.started = p.cfg.Now()
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range p.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(ctx)
		}()
	}
	wg.Wait()
}

// Flush publishes every pending pointer now, ignoring intervals and
// backoff, every lane at once, until none is left or ctx ends (the
// shutdown time limit, or a second signal). It returns the agents whose
// pointers still need a write. A pointer written where its record lives
// (an L2) and not yet visible from L1 is not among them: it is on chain,
// this machine has nothing left to send for it, and a fresh machine sees
// it once the gateway serves it (docs/design.md §7, Durable).
func (p *Publisher) Flush(ctx context.Context) []string {
	needWrite := make([][]string, len(p.lanes))
	var wg sync.WaitGroup
	for i, l := range p.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			needWrite[i] = l.flush(ctx)
		}()
	}
	wg.Wait()
	return slices.Concat(needWrite...)
}

// CheckedAt is when what h's status says of its pointer was last
// confirmed by the chain: its last read-back or write, or the publisher's
// start when there was none since; zero for a head that publishes
// nothing (no name, transferred).
func (p *Publisher) CheckedAt(h *Head) time.Time {
	if h.cfg.Name == "" || h.Transferred() != nil {
		return time.Time{}
	}
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if at := h.CheckedAt(); at.After(started) {
		return at
	}
	return started
}

// Unverified says since when h's pointer is not known to be what the
// chain holds, once no read-back succeeded for longer than the check
// interval (and a little: a read-back takes a moment); "" otherwise.
func (p *Publisher) Unverified(h *Head) string {
	at, every := p.CheckedAt(h), p.cfg.CheckEvery
	if at.IsZero() || every <= 0 {
		return ""
	}
	if age := p.cfg.Now().Sub(at); age > every+min(every/4, 30*time.Second) {
		return "unverified since " + at.UTC().Format(time.RFC3339) + ": not read back from the chain for " +
			age.Round(time.Second).String() + " (check_interval " + every.String() + ")"
	}
	return ""
}

// Watched is what the head watch knows of the L1 chain: the head at its
// last look, and the highest block one of our transactions was mined in.
func (p *Publisher) Watched() (seen ens.Head, mined uint64) {
	for _, l := range p.lanes {
		if l.target == "" {
			l.mu.Lock()
			defer l.mu.Unlock()
			return l.seen, l.mined
		}
	}
	return ens.Head{}, 0
}

// recheck makes every lane read its records back at once (the L1 chain
// went back: whatever L1 resolution showed may have changed).
func (p *Publisher) recheck() {
	for _, l := range p.lanes {
		l.mu.Lock()
		l.lastCheck, l.checkAt = time.Time{}, time.Time{}
		l.mu.Unlock()
		l.notify()
	}
}

// resyncNonces makes every writer take its next nonce from its chain
// (after a chain went back, the counters are ahead of it).
func (p *Publisher) resyncNonces() {
	for _, c := range p.cfg.Chains {
		if c != nil {
			c.ResyncNonce()
		}
	}
}

type nopObserver struct{}

func (nopObserver) Outcome(string, Outcome)         {}
func (nopObserver) Checked(string, Outcome)         {}
func (nopObserver) Published(string, time.Duration) {}
func (nopObserver) Failed(string, string)           {}
func (nopObserver) Rewound()                        {}
