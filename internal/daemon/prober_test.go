package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/wait"
)

// The prober wakes waiting agents when Walrus answers again after failing
// to, and stays quiet while nothing fails.
func TestProberBroadcastsRecovery(t *testing.T) {
	t.Parallel()
	var down, failing atomic.Bool
	var pings atomic.Int64
	p := newProber(slog.New(slog.DiscardHandler))
	ping := func(context.Context) error {
		pings.Add(1)
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx, ping, failing.Load) }()
	defer func() { cancel(); <-done }()

	woken := p.recovered()
	down.Store(true)
	failing.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for pings.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no probes while a sync fails")
		}
		time.Sleep(10 * time.Millisecond) // waiting for the condition
	}
	select {
	case <-woken:
		t.Fatal("woke agents while Walrus is still down")
	default:
	}
	down.Store(false)
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("agents not woken after Walrus came back")
	}
	if p.recovered() == woken {
		t.Fatal("the next recovery reuses a closed channel")
	}
	// Nothing failing: no probes.
	failing.Store(false)
	n := pings.Load()
	time.Sleep(3 * probeInterval) // a quiet period is what is being checked
	if pings.Load() > n+1 {
		t.Errorf("%d probes while nothing failed", pings.Load()-n)
	}
}

// TestWalrusOutageRecoveryIsProbed: a snapshot whose upload fails while
// Walrus is down (the server gone: connection refused) is uploaded soon
// after Walrus comes back, not at the end of the Walrus retry's backoff
// (after a 120 s outage the backoff alone would wait up to 50 s).
// The retry backs off for at least walrus.retry_wait_min = 20 s; the
// prober, which probes every probeInterval while a Walrus request is being
// retried, ends that wait when Walrus answers: the upload comes within a
// few probe intervals of the store coming back, well below 20 s.
func TestWalrusOutageRecoveryIsProbed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha"})
	seedBrain(t, w.brain("alpha"))
	cfg := w.config(func(c *config.Config) {
		c.Walrus.RetryWaitMin = config.Duration(20 * time.Second)
		c.Walrus.RetryWaitMax = config.Duration(time.Minute)
		c.Walrus.RetryMax = 8
	})
	rec := newRecorder(t)
	d := w.startWith(cfg, rec.logger())
	a, _ := d.Agent("alpha")
	wait.For(t, "the first snapshot", func() bool { s := a.Status(); return s.Last != nil && s.UnsavedSince.IsZero() })
	first := a.Status().Last.BlobID

	addr := w.dn.Walrus.Addr()
	if err := w.dn.Walrus.Close(); err != nil { // the outage
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.brain("alpha"), "skills/during-outage.md"), "x\n", 0o644)
	wait.For(t, "the prober to see Walrus down", func() bool {
		return rec.count(slog.LevelWarn, "walrus does not answer") > 0
	})
	if s := a.Status(); s.Last.BlobID != first || s.UnsavedSince.IsZero() {
		t.Fatalf("during the outage: %+v", s)
	}

	srv, err := localwalrus.New(localwalrus.Config{Dir: filepath.Join(w.dn.Dir, "walrus"), EpochDuration: time.Hour,
		StartEpoch: 1, MaxBodySize: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	if err := srv.Start(addr); err != nil {
		t.Fatal(err)
	}
	w.dn.Walrus = srv // the devnet closes it
	wait.For(t, "the change to be uploaded", func() bool {
		s := a.Status()
		return s.Last.BlobID != first && s.UnsavedSince.IsZero()
	})
	took := time.Since(back)
	t.Logf("uploaded %v after Walrus came back (retry backoff at least %v, probe every %v)",
		took.Round(time.Millisecond), cfg.Walrus.RetryWaitMin, probeInterval)
	if rec.count(slog.LevelInfo, "walrus answers again") == 0 {
		t.Error("the prober did not see Walrus come back")
	}
	if took >= cfg.Walrus.RetryWaitMin.D() {
		t.Errorf("uploaded %v after Walrus came back: the retry waited out its backoff", took)
	}
}
