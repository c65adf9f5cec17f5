package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/state"
)

// lostSave is a restart after a snapshot was uploaded (the lock names it)
// and published, but the state save failed and the process died before it
// was retried: the state on disk still says first.
func lostSave(t *testing.T, r *rig) (a *Agent, first, second string) {
	t.Helper()
	return lostSaveAfter(t, r, true)
}

// lostSaveAfter is lostSave with the second snapshot published before the
// crash or not.
func lostSaveAfter(t *testing.T, r *rig, publish bool) (a *Agent, first, second string) {
	t.Helper()
	a, first = publishFirst(t, r)
	saved, err := state.LoadAgent(state.AgentPath(r.state, "alpha"))
	if err != nil {
		t.Fatal(err)
	}
	r.write("system.md", "v2\n")
	res, err := a.SyncOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second = res.Snapshot.BlobID
	if publish {
		publishOnce(t, a, r.chain)
		if r.chain.get(r.name) != second {
			t.Fatal("second not published")
		}
	}
	a.Close()
	a.deps.State.Close()
	if err := state.SaveAgent(state.AgentPath(r.state, "alpha"), saved); err != nil {
		t.Fatal(err)
	}
	return r.open(), first, second
}

// The publisher recognises its own blob after a restart: a record that
// names a newer snapshot of ours than the state knows is never rolled
// back to the state's older one.
func TestOwnNewerBlobAfterLostSave(t *testing.T) {
	t.Run("at publish time", func(t *testing.T) {
		r := newRig(t)
		a, first, second := lostSave(t, r)
		// The state still has first pending over nothing in particular:
		// the worst case, an unpublished older snapshot.
		a.mu.Lock()
		a.st.Pending = &state.Pointer{Value: first, Expected: "", Since: time.Now()}
		a.mu.Unlock()
		out := publishOnce(t, a, r.chain)
		if len(out) != 1 || out[0].Outcome != pointer.Published {
			t.Fatalf("publish: %+v", out)
		}
		if got := r.chain.get(r.name); got != second {
			t.Fatalf("the record went back to %s (newest is %s)", got, second)
		}
		s := a.Status()
		if s.Pending != nil || s.Published != second || s.Last == nil || s.Last.BlobID != second || s.Hold != nil {
			t.Fatalf("status: %+v", s)
		}
		// And the brain, which hashes to second's snapshot, is not
		// uploaded again.
		takes := r.pipe.Takes()
		if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged || r.pipe.Takes() != takes {
			t.Fatalf("sync after catching up: %+v %v", res, err)
		}
	})
	t.Run("at start", func(t *testing.T) {
		r := newRig(t)
		a, _, second := lostSave(t, r)
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		takes := r.pipe.Takes()
		if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged || r.pipe.Takes() != takes {
			t.Fatalf("the snapshot whose save was lost was taken again: %+v %v", res, err)
		}
		st, err := state.LoadAgent(state.AgentPath(r.state, "alpha"))
		if err != nil || st.Last == nil || st.Last.BlobID != second {
			t.Fatalf("state after start: %+v %v", st, err)
		}
	})
	t.Run("at check time", func(t *testing.T) {
		r := newRig(t)
		a, _, second := lostSave(t, r)
		writes := r.chain.writes
		out, err := a.Head().Check(t.Context())
		if out != pointer.OK || err != nil {
			t.Fatalf("check: %s %v", out, err)
		}
		if _, ok := a.Head().Pending(); ok || r.chain.writes != writes {
			t.Fatal("the check made an older snapshot pending over our newest")
		}
		if s := a.Status(); s.Published != second || s.Last.BlobID != second {
			t.Fatalf("status: %+v", s)
		}
	})
}

// A kill after the brain's lock recorded a snapshot but before the state
// saved it (and before it was published): the restarted agent catches up
// and publishes that snapshot, without taking it again.
func TestLostSaveBeforePublish(t *testing.T) {
	r := newRig(t)
	a, first, second := lostSaveAfter(t, r, false)
	if got := r.chain.get(r.name); got != first {
		t.Fatalf("record %s before the restart, want %s", got, first)
	}
	wakes := r.wakes.Load()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p, ok := a.Head().Pending(); !ok || p.Value != second || p.Expected != first {
		t.Fatalf("after the restart pending = %+v %v, want %s over %s", p, ok, second, first)
	}
	// A publisher already running learns of it now, not at its next
	// read-back of the record.
	if r.wakes.Load() == wakes {
		t.Fatal("the publisher was not notified of the snapshot made pending at start")
	}
	takes := r.pipe.Takes()
	if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged || r.pipe.Takes() != takes {
		t.Fatalf("the snapshot whose save was lost was taken again: %+v %v", res, err)
	}
	if out := publishOnce(t, a, r.chain); len(out) != 1 || out[0].Outcome != pointer.Published {
		t.Fatalf("publish: %+v", out)
	}
	if got := r.chain.get(r.name); got != second {
		t.Fatalf("record %s, want %s", got, second)
	}
}

// A record that is gone (a reset chain) at publish time is a rollback to
// publish over, not another writer.
func TestEmptiedRecordIsNotForeign(t *testing.T) {
	r := newRig(t)
	a, _ := publishFirst(t, r)
	r.write("system.md", "v2\n")
	second, _ := a.SyncOnce(t.Context())
	r.chain.mu.Lock()
	delete(r.chain.records, r.name)
	r.chain.mu.Unlock()
	out := publishOnce(t, a, r.chain)
	if len(out) != 1 || out[0].Outcome != pointer.Rollback || a.Head().Hold() != nil {
		t.Fatalf("emptied record: %+v hold %+v", out, a.Head().Hold())
	}
	if p, ok := a.Head().Pending(); !ok || p.Expected != "" || p.Value != second.Snapshot.BlobID {
		t.Fatalf("pending: %+v %v", p, ok)
	}
	if out := publishOnce(t, a, r.chain); out[0].Outcome != pointer.Published || r.chain.get(r.name) != second.Snapshot.BlobID {
		t.Fatalf("republish: %+v", out)
	}
}

// Two adopts within one second set the brain aside under two names.
func TestAdoptTwiceInOneSecond(t *testing.T) {
	r := newRig(t)
	a, _ := publishFirst(t, r)
	a.deps.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	var asides []string
	for i, foreign := range []string{"foreignA", "foreignB"} {
		r.chain.set(r.name, foreign)
		if out, _ := a.Head().Check(t.Context()); out != pointer.Held {
			t.Fatalf("round %d: check %s", i, out)
		}
		aside, err := a.Adopt(t.Context())
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		asides = append(asides, aside)
	}
	if asides[0] == asides[1] {
		t.Fatalf("both set aside to %s", asides[0])
	}
	if b, err := os.ReadFile(filepath.Join(asides[1], "system.md")); err != nil || string(b) != "restored from foreignA\n" {
		t.Fatalf("second set-aside brain: %q %v", b, err)
	}
	if s := a.Status(); s.Published != "foreignB" || s.Hold != nil || s.BundleHash == "" || s.BundleHash != s.Last.BundleHash {
		t.Fatalf("after the second adopt: %+v", s)
	}
}
