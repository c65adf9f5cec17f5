package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/ens"
	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
	"github.com/hermesd/hermesd/internal/wait"
)

// The decisions of Prepare: restore, start fresh, or refuse.
func TestPrepareRestoreOrFresh(t *testing.T) {
	t.Run("pointer exists: restore it", func(t *testing.T) {
		r := newRig(t)
		r.chain.set(r.name, ref("blobX"))
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		s := a.Status()
		if s.StartedAs != "restored" || s.Published != ref("blobX") || s.Last == nil || s.Last.BlobID != ref("blobX") || s.Phase != PhaseReady {
			t.Fatalf("status %+v", s)
		}
		b, err := os.ReadFile(filepath.Join(r.brain, "system.md"))
		if err != nil || !strings.Contains(string(b), ref("blobX")) {
			t.Fatalf("brain: %q %v", b, err)
		}
		lock, err := bundlelock.Read(filepath.Join(r.brain, bundlelock.FileName))
		if err != nil || lock.BlobID() != ref("blobX") {
			t.Fatalf("the lock does not name the restored blob: %v %v", lock, err)
		}
	})
	t.Run("no pointer: fresh, filled from the seed", func(t *testing.T) {
		r := newRig(t)
		os.MkdirAll(filepath.Join(r.seed, "skills"), 0o755)
		os.WriteFile(filepath.Join(r.seed, "skills", "s.md"), []byte("seed\n"), 0o640)
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := a.Status(); s.StartedAs != "fresh" || s.Origin != "fresh" {
			t.Fatalf("status %+v", s)
		}
		if st, err := os.Stat(filepath.Join(r.brain, "skills", "s.md")); err != nil || st.Mode().Perm() != 0o640 {
			t.Fatalf("seed not copied with its mode: %v %v", st, err)
		}
		if st, _ := os.Stat(r.brain); st.Mode().Perm() != snapshot.RootMode {
			t.Errorf("fresh brain root mode %v", st.Mode().Perm())
		}
	})
	t.Run("existing brain: untouched, no chain needed", func(t *testing.T) {
		r := newRig(t)
		r.write("system.md", "mine\n")
		r.chain.set(r.name, ref("blobX"))
		r.chain.readErr = nil
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := a.Status(); s.StartedAs != "existing" {
			t.Fatalf("status %+v", s)
		}
		if b, _ := os.ReadFile(filepath.Join(r.brain, "system.md")); string(b) != "mine\n" {
			t.Fatalf("brain changed: %q", b)
		}
	})
	t.Run("pointer exists but cannot be restored: refuse, directory untouched", func(t *testing.T) {
		r := newRig(t)
		r.chain.set(r.name, ref("blobX"))
		r.pipe.restore = func(ctx context.Context, blobID, target string) (snapshot.Restored, error) {
			return snapshot.Restored{}, errors.New("aggregator: 404")
		}
		os.MkdirAll(r.seed, 0o755)
		os.WriteFile(filepath.Join(r.seed, "system.md"), []byte("seed\n"), 0o644)
		a := r.open()
		err := a.Prepare(t.Context())
		if !errors.Is(err, ErrRestoreFailed) || a.Status().Phase != PhaseFailed {
			t.Fatalf("Prepare = %v, phase %s", err, a.Status().Phase)
		}
		if _, err := os.Stat(r.brain); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the seed replaced a brain that exists somewhere: %v", err)
		}
	})
	t.Run("unverifiable snapshot: refused naming the override; installed, unverified, when asked", func(t *testing.T) {
		r := newRig(t)
		r.chain.set(r.name, ref("blobX"))
		r.pipe.noLock = true
		a := r.open()
		err := a.Prepare(t.Context())
		if !errors.Is(err, ErrRestoreFailed) || !errors.Is(err, snapshot.ErrNoLock) || !strings.Contains(err.Error(), "hermesd restore "+a.ID()+" --unverified") {
			t.Fatalf("Prepare = %v", err)
		}
		if _, err := os.Stat(r.brain); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused restore left a brain: %v", err)
		}
		if err := a.PrepareWith(t.Context(), PrepareOptions{Unverified: true}); err != nil {
			t.Fatal(err)
		}
		s := a.Status()
		if s.StartedAs != "restored" || s.Restore == nil || s.Restore.Verified || len(s.Restore.Unchecked) != 1 || len(s.Restore.Stripped) != 1 {
			t.Fatalf("status %+v, restore %+v", s, s.Restore)
		}
		// The lock now records what the files hash to: the next snapshot
		// starts from the state installed.
		lock, err := bundlelock.Read(filepath.Join(r.brain, bundlelock.FileName))
		if err != nil || lock.BlobID() != ref("blobX") || lock.BundleHash() != s.Last.BundleHash {
			t.Fatalf("lock %v (%v), last %+v", lock, err, s.Last)
		}
	})
	t.Run("chain unreachable with an empty brain: refuse", func(t *testing.T) {
		r := newRig(t)
		r.chain.readErr = errors.New("dial tcp: connection refused")
		a := r.open()
		if err := a.Prepare(t.Context()); !errors.Is(err, ErrRestoreFailed) {
			t.Fatalf("Prepare = %v", err)
		}
	})
	t.Run("no ENS name: restore the last snapshot of the local state", func(t *testing.T) {
		r := newRig(t)
		r.name = ""
		a := r.open()
		a.mu.Lock()
		a.st.Last = &state.Snapshot{BlobID: "blobL", BundleHash: "0x01"}
		a.saveStateLocked()
		a.mu.Unlock()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := a.Status(); s.StartedAs != "restored" || s.Last.BlobID != "blobL" || s.Published != "" {
			t.Fatalf("status %+v", s)
		}
	})
}

// SyncOnce snapshots only when the hash moved, retries a brain that keeps
// changing a bounded number of times, and does not repack a brain known to
// be over the blob limit.
func TestSyncDecisions(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := a.SyncOnce(t.Context())
	if err != nil || res.Outcome != Snapshotted || r.pipe.Takes() != 1 {
		t.Fatalf("first sync: %+v %v (takes %d)", res, err, r.pipe.Takes())
	}
	p, ok := a.Head().Pending()
	if !ok || p.Value != res.Snapshot.BlobID || p.Expected != "" {
		t.Fatalf("pending %+v %v", p, ok)
	}
	if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged || r.pipe.Takes() != 1 {
		t.Fatalf("unchanged: %+v %v (takes %d)", res, err, r.pipe.Takes())
	}

	// A brain that changes under the packer: retried, then an error.
	r.write("system.md", "v2\n")
	r.pipe.take = func(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
		return snapshot.Result{}, snapshot.ErrChanged
	}
	before := r.pipe.Takes()
	if _, err := a.SyncOnce(t.Context()); !errors.Is(err, snapshot.ErrChanged) {
		t.Fatalf("changing brain: %v", err)
	}
	if n := r.pipe.Takes() - before; n != maxChangedRetries+1 {
		t.Errorf("%d attempts, want %d", n, maxChangedRetries+1)
	}

	// Over the limit: measured once, not packed again until it changes.
	r.pipe.take = func(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
		return snapshot.Result{}, fmt.Errorf("%w: 2 GiB", snapshot.ErrTooLarge)
	}
	before = r.pipe.Takes()
	for range 3 {
		if _, err := a.SyncOnce(t.Context()); !errors.Is(err, snapshot.ErrTooLarge) {
			t.Fatalf("too large: %v", err)
		}
	}
	if n := r.pipe.Takes() - before; n != 1 {
		t.Errorf("the same too-large state was packed %d times", n)
	}
	r.pipe.take = nil
	r.write("system.md", "v3\n")
	if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Snapshotted {
		t.Fatalf("after a change: %+v %v", res, err)
	}
	// The unpublished pending pointer keeps its oldest Since, with the
	// newest value.
	if p2, _ := a.Head().Pending(); p2.Since != p.Since || p2.Value == p.Value {
		t.Errorf("pending after a second snapshot: %+v (first %+v)", p2, p)
	}
}

// An empty brain is never snapshotted over a real one: it is restored.
func TestWipedBrainIsRestored(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	a.Prepare(t.Context())
	res, err := a.SyncOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(r.brain)
	r.chain.set(r.name, res.Snapshot.BlobID)
	out, err := a.SyncOnce(t.Context())
	if err != nil || out.Outcome != Restored || r.pipe.Takes() != 1 {
		t.Fatalf("wiped: %+v %v (takes %d)", out, err, r.pipe.Takes())
	}
	// The restore records the end epoch the upload recorded, in the
	// lock's lineage and the state (not 0).
	want := res.Snapshot.EndEpoch
	if lin := readLockAt(t, r.brain).Lineage(); len(lin) == 0 || lin[0].BlobID != res.Snapshot.BlobID || lin[0].EndEpoch != want || want == 0 {
		t.Errorf("lineage after the restore %+v, want %s ending with epoch %d", lin, res.Snapshot.BlobID, want)
	}
	if l := a.Status().Last; l == nil || l.EndEpoch != want {
		t.Errorf("last snapshot after the restore %+v, want end epoch %d", l, want)
	}

	// Another machine (no state) knows only what the snapshot records.
	r2 := newRig(t)
	r2.chain = r.chain
	r2.pipe.restore = func(_ context.Context, blobID, target string) (snapshot.Restored, error) {
		res, err := restoreInto(target, blobID)
		res.EndEpoch = 33
		return res, err
	}
	b := r2.open()
	if err := b.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if lin := readLockAt(t, r2.brain).Lineage(); len(lin) == 0 || lin[0].EndEpoch != 33 {
		t.Errorf("lineage after a cold restore %+v, want end epoch 33", lin)
	}
}

func readLockAt(t *testing.T, brain string) *bundlelock.Lock {
	t.Helper()
	l, err := bundlelock.Read(filepath.Join(brain, bundlelock.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// publishFirst prepares an agent, snapshots it and publishes the pointer.
func publishFirst(t *testing.T, r *rig) (*Agent, string) {
	t.Helper()
	a, blob := snapshotFirst(t, r)
	out := publishOnce(t, a, r.chain)
	if len(out) != 1 || out[0].Outcome != pointer.Published {
		t.Fatalf("publish: %+v", out)
	}
	return a, blob
}

// snapshotFirst opens the agent on a brain holding system.md "v1" and
// takes its first snapshot.
func snapshotFirst(t *testing.T, r *rig) (*Agent, string) {
	t.Helper()
	r.write("system.md", "v1\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := a.SyncOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return a, res.Snapshot.BlobID
}

// Conflict vs rollback vs another writer, at publish time.
func TestPublishConflicts(t *testing.T) {
	t.Run("a rollback to an older snapshot of ours is published over", func(t *testing.T) {
		r := newRig(t)
		a, first := publishFirst(t, r)
		r.write("system.md", "v2\n")
		second, _ := a.SyncOnce(t.Context())
		publishOnce(t, a, r.chain)
		if r.chain.get(r.name) != second.Snapshot.BlobID {
			t.Fatal("second not published")
		}
		// The chain goes back (a reorg, a reset dev chain) and a third
		// snapshot is taken.
		r.chain.set(r.name, first)
		r.write("system.md", "v3\n")
		third, _ := a.SyncOnce(t.Context())
		out := publishOnce(t, a, r.chain)
		if out[0].Outcome != pointer.Rollback || a.Head().Hold() != nil {
			t.Fatalf("rollback: %+v hold %+v", out[0], a.Head().Hold())
		}
		out = publishOnce(t, a, r.chain)
		if out[0].Outcome != pointer.Published || r.chain.get(r.name) != third.Snapshot.BlobID {
			t.Fatalf("republish after rollback: %+v, chain %s", out[0], r.chain.get(r.name))
		}
	})
	t.Run("another writer holds publishing, across a restart", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.set(r.name, "foreignBlob")
		r.write("system.md", "v2\n")
		a.SyncOnce(t.Context())
		out := publishOnce(t, a, r.chain)
		if out[0].Outcome != pointer.Held || a.Head().Hold() == nil || a.Head().Hold().Value != "foreignBlob" {
			t.Fatalf("foreign writer: %+v hold %+v", out[0], a.Head().Hold())
		}
		if _, ok := a.Head().Pending(); ok {
			t.Fatal("a held agent offers its pending pointer")
		}
		writes := r.chain.writes
		a = r.reopen(a)
		if a.Head().Hold() == nil || !strings.Contains(a.Status().Hold.Reason, "pointer adopt") {
			t.Fatalf("the hold did not survive a restart: %+v", a.Status())
		}
		if out := publishOnce(t, a, r.chain); len(out) != 0 || r.chain.writes != writes {
			t.Fatalf("a held agent published: %+v", out)
		}
		// The snapshot is still pending underneath: nothing is lost.
		if s := a.Status(); s.Pending == nil {
			t.Fatal("the pending snapshot was dropped by the hold")
		}
	})
	t.Run("our own unrecorded write is recognised", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.write("system.md", "v2\n")
		res, _ := a.SyncOnce(t.Context())
		// The write landed but the state never heard of it (a crash).
		r.chain.set(r.name, res.Snapshot.BlobID)
		out := publishOnce(t, a, r.chain)
		if out[0].Outcome != pointer.Published || a.Status().Pending != nil || a.Status().Published != res.Snapshot.BlobID {
			t.Fatalf("own blob: %+v %+v", out[0], a.Status())
		}
	})
	t.Run("the name moved to another owner: held, not an error loop", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.write = func(u ens.Update) (ens.UpdateResult, bool) {
			return ens.UpdateResult{Outcome: ens.NotAuthorized, Err: errors.New("owned by 0xbuyer")}, true
		}
		r.write("system.md", "v2\n")
		a.SyncOnce(t.Context())
		out := publishOnce(t, a, r.chain)
		if out[0].Outcome != pointer.Unauthorized || a.Head().Hold() == nil {
			t.Fatalf("unauthorized: %+v", out[0])
		}
		if out := publishOnce(t, a, r.chain); len(out) != 0 {
			t.Fatal("tried again while held")
		}
	})
	t.Run("a failure is retried later, counted", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.write = func(u ens.Update) (ens.UpdateResult, bool) {
			return ens.UpdateResult{Outcome: ens.Retry, Err: errors.New("chain unreachable")}, true
		}
		r.write("system.md", "v2\n")
		a.SyncOnce(t.Context())
		out := publishOnce(t, a, r.chain)
		if out[0].Outcome != pointer.Failed || a.Status().Pending.Attempts != 1 || a.Head().Hold() != nil {
			t.Fatalf("failed: %+v %+v", out[0], a.Status().Pending)
		}
		r.chain.write = nil
		if out := publishOnce(t, a, r.chain); out[0].Outcome != pointer.Published {
			t.Fatalf("retry: %+v", out[0])
		}
	})
}

// The periodic read-back (pointer.Head.Check) of an agent that snapshots.
func TestCheckPointer(t *testing.T) {
	t.Run("a stale pointer with nothing pending is repaired", func(t *testing.T) {
		r := newRig(t)
		a, first := publishFirst(t, r)
		r.write("system.md", "v2\n")
		second, _ := a.SyncOnce(t.Context())
		publishOnce(t, a, r.chain)
		r.chain.set(r.name, first) // the record went back; nothing is pending
		if _, ok := a.Head().Pending(); ok {
			t.Fatal("pending before the check")
		}
		out, err := a.Head().Check(t.Context())
		if out != pointer.Rollback || err == nil {
			t.Fatalf("check: %s %v", out, err)
		}
		p, ok := a.Head().Pending()
		if !ok || p.Value != second.Snapshot.BlobID || p.Expected != first {
			t.Fatalf("pending after the check: %+v %v", p, ok)
		}
		if out := publishOnce(t, a, r.chain); out[0].Outcome != pointer.Published || r.chain.get(r.name) != second.Snapshot.BlobID {
			t.Fatalf("repair: %+v", out)
		}
		if out, _ := a.Head().Check(t.Context()); out != pointer.OK {
			t.Fatalf("after the repair: %s", out)
		}
	})
	t.Run("a foreign pointer holds", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.set(r.name, "foreignBlob")
		if out, _ := a.Head().Check(t.Context()); out != pointer.Held || a.Head().Hold() == nil {
			t.Fatalf("foreign: %s %+v", out, a.Head().Hold())
		}
	})
	t.Run("after a crash the state does not know; the chain names our blob", func(t *testing.T) {
		r := newRig(t)
		a, first := publishFirst(t, r)
		// The state directory is lost (a new machine with the same brain).
		a.Close()
		a.deps.State.Close()
		os.RemoveAll(r.state)
		a = r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := a.Status(); s.Published != first || s.Hold != nil {
			t.Fatalf("reconciled: %+v", s)
		}
	})
	t.Run("after a crash the chain names a foreign blob: held", func(t *testing.T) {
		r := newRig(t)
		r.write("system.md", "mine\n")
		r.chain.set(r.name, "foreignBlob")
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if a.Head().Hold() == nil {
			t.Fatal("not held")
		}
	})
}

// Resolving a hold: override publishes ours, adopt takes theirs.
func TestResolveHold(t *testing.T) {
	t.Run("override", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.set(r.name, "foreignBlob")
		a.Head().Check(t.Context())
		if err := a.Override(t.Context()); err != nil {
			t.Fatal(err)
		}
		out := publishOnce(t, a, r.chain)
		if len(out) != 1 || out[0].Outcome != pointer.Published || r.chain.get(r.name) != a.Status().Last.BlobID {
			t.Fatalf("override: %+v", out)
		}
		if err := a.Override(t.Context()); !errors.Is(err, pointer.ErrNotHeld) {
			t.Fatalf("second override: %v", err)
		}
	})
	t.Run("adopt", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.set(r.name, "foreignBlob")
		a.Head().Check(t.Context())
		aside, err := a.Adopt(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(aside, "system.md")); string(b) != "v1\n" {
			t.Fatalf("set-aside brain: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(r.brain, "system.md")); !strings.Contains(string(b), "foreignBlob") {
			t.Fatalf("adopted brain: %q", b)
		}
		if s := a.Status(); s.Hold != nil || s.Published != "foreignBlob" || s.Pending != nil {
			t.Fatalf("after adopt: %+v", s)
		}
	})
	t.Run("adopt that fails puts the brain back", func(t *testing.T) {
		r := newRig(t)
		a, _ := publishFirst(t, r)
		r.chain.set(r.name, "foreignBlob")
		a.Head().Check(t.Context())
		r.pipe.restore = func(ctx context.Context, blobID, target string) (snapshot.Restored, error) {
			os.MkdirAll(target, 0o755)
			return snapshot.Restored{}, errors.New("decrypt: authentication failed")
		}
		if _, err := a.Adopt(t.Context()); err == nil {
			t.Fatal("adopt succeeded")
		}
		if b, _ := os.ReadFile(filepath.Join(r.brain, "system.md")); string(b) != "v1\n" {
			t.Fatalf("brain not put back: %q", b)
		}
		if a.Head().Hold() == nil {
			t.Fatal("hold lost")
		}
	})
}

// A state save that fails is retried, and nothing is lost meanwhile.
func TestStateSaveFailureIsRetried(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	a.Prepare(t.Context())
	// Make the state file impossible to replace: a non-empty directory
	// stands where it goes.
	sf := filepath.Join(r.state, "agents", "alpha", "state.json")
	os.Remove(sf)
	if err := os.MkdirAll(filepath.Join(sf, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := a.SyncOnce(t.Context())
	if err == nil || !a.Dirty() {
		t.Fatalf("sync with an unsavable state: %+v %v dirty %v", res, err, a.Dirty())
	}
	// The snapshot is known in memory and published from there.
	if out := publishOnce(t, a, r.chain); len(out) != 1 || out[0].Outcome != pointer.Published || out[0].Err == nil {
		t.Fatalf("publish with an unsavable state: %+v", out)
	}
	if ok, why := a.Status().Unsaved, ""; !ok {
		t.Fatalf("status does not say the state is unsaved %s", why)
	}
	// The disk recovers: the next sync saves first.
	os.RemoveAll(sf)
	if _, err := a.SyncOnce(t.Context()); err != nil || a.Dirty() {
		t.Fatalf("after recovery: %v dirty %v", err, a.Dirty())
	}
	st, err := state.LoadAgent(filepath.Dir(sf))
	if err != nil || st.Last == nil || st.Published != st.Last.BlobID || st.Pending != nil {
		t.Fatalf("saved state %+v %v", st, err)
	}
}

// Run retries a failed sync at once when the outage ends, not at the end
// of its backoff.
func TestRunRetriesOnRecovery(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	a.Prepare(t.Context())
	var fail atomic.Bool
	fail.Store(true)
	r.pipe.take = func(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
		if fail.Load() {
			return snapshot.Result{}, errors.New("walrus: 503")
		}
		return r.pipe.store(in.Want)
	}
	recovered := make(chan struct{})
	r.env.Recovered = func() <-chan struct{} { return recovered }
	r.run(a)
	wait.For(t, "the first sync to fail", a.Failing)
	// The backoff is now at least a second; the recovery must not wait
	// for it.
	fail.Store(false)
	close(recovered)
	wait.For(t, "the retry after recovery", func() bool { s := a.Status(); return s.Last != nil && !a.Failing() })
	if h, _ := hash.ParseDigest(a.Status().Last.BundleHash); h == (hash.Digest{}) {
		t.Fatal("no snapshot")
	}
}

// unchangedCounter counts the syncs that found nothing to snapshot.
type unchangedCounter struct {
	nopObserver
	n atomic.Int32
}

func (o *unchangedCounter) Unchanged(string) { o.n.Add(1) }

// Run owns retrying a state save that failed outside any sync (here the
// one after a publish): with no change of the brain, nothing else would
// try again, and no sync is failed for it.
func TestRunRetriesStateSave(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	obs := &unchangedCounter{}
	a.deps.Observer = obs
	a.Prepare(t.Context())
	res, err := a.SyncOnce(t.Context())
	if err != nil || res.Snapshot == nil {
		t.Fatalf("first snapshot: %+v %v", res, err)
	}
	r.run(a)
	wait.For(t, "Run's first pass", func() bool { return obs.n.Load() > 0 })

	sf := filepath.Join(r.state, "agents", "alpha", "state.json")
	os.Remove(sf)
	if err := os.MkdirAll(filepath.Join(sf, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out := publishOnce(t, a, r.chain); len(out) != 1 || out[0].Outcome != pointer.Published || out[0].Err == nil {
		t.Fatalf("publish with an unsavable state: %+v", out)
	}
	if !a.Dirty() {
		t.Fatal("the failed save left the state clean")
	}
	os.RemoveAll(sf)
	wait.For(t, "Run to save the state", func() bool { return !a.Dirty() })
	st, err := state.LoadAgent(filepath.Dir(sf))
	if err != nil || st.Published != res.Snapshot.BlobID || st.Pending != nil {
		t.Fatalf("saved state %+v %v", st, err)
	}
	if a.Failing() || r.pipe.Takes() != 1 {
		t.Errorf("a sync failed or snapshotted: failing %v, takes %d", a.Failing(), r.pipe.Takes())
	}
}

// A brain reached through a symbolic link is refused unless allowed: a
// followed link puts what it points at (/etc/shadow, say) in a blob, and
// writes the lock into the link's target.
func TestSymlinkedBrainRefused(t *testing.T) {
	r := newRig(t)
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.MkdirAll(target, 0o755)
	os.WriteFile(filepath.Join(target, "shadow"), []byte("root:x:0\n"), 0o600)
	if err := os.Symlink(target, r.brain); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		os.Lchown(r.brain, 65534, 65534) // planted by an unprivileged user
	}
	a := r.open()
	if err := a.Prepare(t.Context()); err == nil || !strings.Contains(err.Error(), "symbolic link") || a.Status().Phase != PhaseFailed {
		t.Fatalf("Prepare = %v, phase %s", err, a.Status().Phase)
	}
	if _, err := a.SyncOnce(t.Context()); err == nil || r.pipe.Takes() != 0 {
		t.Fatalf("SyncOnce = %v (takes %d)", err, r.pipe.Takes())
	}
	if _, err := os.Stat(filepath.Join(target, bundlelock.FileName)); err == nil {
		t.Fatal("a lock was written into the link's target")
	}
	a.cfg.AllowSymlinks = true
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}

// A brain or seed directory anyone may write to is refused unless allowed:
// files planted there would enter its snapshots. The
// check runs before every sync, so a brain made world-writable under a
// running daemon stops being snapshotted.
func TestPublicBrainRefused(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "You are a test agent.\n")
	os.Chmod(r.brain, os.ModeSticky|0o777) // /tmp-like: anyone may still add files
	a := r.open()
	err := a.Prepare(t.Context())
	if !errors.Is(err, fsys.ErrUnsafeDir) || !strings.Contains(err.Error(), "unsafe brain directory") ||
		!strings.Contains(err.Error(), "allow_unsafe_dirs") || a.Status().Phase != PhaseFailed {
		t.Fatalf("Prepare = %v, phase %s", err, a.Status().Phase)
	}
	os.Chmod(r.brain, 0o755)
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatalf("once fixed: %v", err)
	}
	os.Chmod(r.brain, 0o777)
	if _, err := a.SyncOnce(t.Context()); !errors.Is(err, fsys.ErrUnsafeDir) || r.pipe.Takes() != 0 {
		t.Fatalf("SyncOnce = %v (takes %d)", err, r.pipe.Takes())
	}
	a.cfg.AllowUnsafeDirs = true
	if _, err := a.SyncOnce(t.Context()); err != nil {
		t.Fatalf("allowed: %v", err)
	}

	// A seed directory too: its files are copied into the brain.
	r = newRig(t)
	os.MkdirAll(r.seed, 0o777)
	os.Chmod(r.seed, 0o777)
	a = r.open()
	if err := a.Prepare(t.Context()); !errors.Is(err, fsys.ErrUnsafeDir) || !strings.Contains(err.Error(), "unsafe seed directory") {
		t.Fatalf("public seed: %v", err)
	}
}

// The first snapshot of a brain is the hash when the format hashes while
// it reads (v3): Prepare does not hash, the first sync's Take has no Want
// and teaches the cache every file, and the next sync finds the brain
// unchanged without reading it. A brain that did not hold still falls back
// to hashing first, as does every sync after a failed first snapshot; an
// empty brain is not snapshotted; once a snapshot exists, Prepare hashes
// again.
func TestFirstSnapshotIsTheHash(t *testing.T) {
	brain := func(r *rig) {
		r.write("system.md", "You are a test agent.\n")
		r.write("skills/a.md", "skill\n")
	}
	t.Run("taken as the hash", func(t *testing.T) {
		r := newRig(t)
		r.pipe.hashes = true
		brain(r)
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if a.cache.Validated() {
			t.Fatal("Prepare hashed the brain")
		}
		res, err := a.SyncOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want, err := hash.Dir(t.Context(), r.brain, hash.Options{})
		if err != nil {
			t.Fatal(err)
		}
		in := r.pipe.lastInput()
		if res.Outcome != Snapshotted || res.Hash != want.Digest || in.Want != (hash.Digest{}) {
			t.Fatalf("first sync %+v, Take's input %+v", res, in)
		}
		if !a.cache.Validated() || a.cache.Digest() != want.Digest {
			t.Fatalf("cache validated %v, digest %s, want %s", a.cache.Validated(), a.cache.Digest(), want.Digest)
		}
		if s := a.Status(); s.BundleHash != want.Digest.String() {
			t.Errorf("status bundle hash %q", s.BundleHash)
		}
		res, err = a.SyncOnce(t.Context())
		if err != nil || res.Outcome != Unchanged || r.pipe.Takes() != 1 {
			t.Fatalf("second sync %+v, %v, %d takes", res, err, r.pipe.Takes())
		}
		// A restart with a snapshot on record hashes in Prepare again.
		a = r.reopen(a)
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !a.cache.Validated() {
			t.Error("Prepare did not hash a brain that has a snapshot")
		}
	})
	// The first Take (as the hash) fails with err; the syncs that follow
	// must hash first: within the same sync for ErrChanged, in the next
	// one for any other failure.
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"did not hold still", fmt.Errorf("v3 snapshot: %w: skills/a.md changed while it was read", snapshot.ErrChanged)},
		{"failed: retried hashing first", fmt.Errorf("v3 snapshot: %w: a pack of 12 MiB is over the 10 MiB limit", snapshot.ErrTooLarge)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.pipe.hashes = true
			brain(r)
			var wants []hash.Digest
			r.pipe.take = func(ctx context.Context, in snapshot.Input) (snapshot.Result, error) {
				wants = append(wants, in.Want)
				switch {
				case len(wants) == 1:
					return snapshot.Result{}, tc.err
				case in.Want == (hash.Digest{}):
					return r.pipe.takeAsHash(ctx, in)
				}
				return r.pipe.store(in.Want)
			}
			a := r.open()
			if err := a.Prepare(t.Context()); err != nil {
				t.Fatal(err)
			}
			res, err := a.SyncOnce(t.Context())
			if !errors.Is(tc.err, snapshot.ErrChanged) {
				if !errors.Is(err, tc.err) {
					t.Fatalf("first sync: %v", err)
				}
				res, err = a.SyncOnce(t.Context())
			}
			if err != nil || res.Outcome != Snapshotted || len(wants) != 2 || wants[0] != (hash.Digest{}) || wants[1] != res.Hash || res.Hash == (hash.Digest{}) {
				t.Fatalf("sync %+v, %v; Take's wants %v", res, err, wants)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		r := newRig(t)
		r.pipe.hashes = true
		a := r.open()
		if err := a.Prepare(t.Context()); err != nil {
			t.Fatal(err)
		}
		res, err := a.SyncOnce(t.Context())
		if err != nil || res.Outcome != Empty || !a.cache.Validated() {
			t.Fatalf("sync %+v, %v (cache validated %v)", res, err, a.cache.Validated())
		}
		if _, err := os.Stat(filepath.Join(r.brain, bundlelock.FileName)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("an empty brain got a lock: %v", err)
		}
	})
}
