package agent

import (
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/wait"
)

// An unchanged brain is snapshotted again only when the pipeline says its
// last snapshot needs renewing (v3: a pack near its end epoch), and the
// renewal is published like any snapshot.
func TestRenewalOfUnchangedBrain(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	first, err := a.SyncOnce(t.Context())
	if err != nil || first.Outcome != Snapshotted {
		t.Fatalf("first sync: %+v %v", first, err)
	}
	if res, err := a.SyncOnce(t.Context()); err != nil || res.Outcome != Unchanged || r.pipe.Takes() != 1 {
		t.Fatalf("not due: %+v %v (takes %d)", res, err, r.pipe.Takes())
	}
	r.pipe.setRenewal(func(time.Time) snapshot.Renewal {
		return snapshot.Renewal{Due: true, Reason: "pack ends with the next epoch"}
	})
	res, err := a.SyncOnce(t.Context())
	if err != nil || res.Outcome != Snapshotted || r.pipe.Takes() != 2 {
		t.Fatalf("due: %+v %v (takes %d)", res, err, r.pipe.Takes())
	}
	if res.Hash != first.Hash || r.pipe.lastInput().Want != first.Hash {
		t.Errorf("renewal snapshot of %s, want the unchanged %s", r.pipe.lastInput().Want, first.Hash)
	}
	if p, ok := a.Head().Pending(); !ok || p.Value != res.Snapshot.BlobID {
		t.Errorf("the renewed snapshot is not pending publication: %+v %v", p, ok)
	}
	if st := a.Status(); st.Last == nil || st.Last.BlobID != res.Snapshot.BlobID {
		t.Errorf("last snapshot %+v, want the renewal %s", st.Last, res.Snapshot.BlobID)
	}
}

// The snapshot input carries the hash cache's files, so a v3 snapshot
// reads only what changed.
func TestSnapshotInputKnownFiles(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	r.write("skills/a.md", "a\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	in := r.pipe.lastInput()
	want, err := hash.Dir(t.Context(), r.brain, hash.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Known == nil {
		t.Fatal("no Known files")
	}
	for _, f := range want.Files {
		if hash.Excluded(f.Path) {
			continue
		}
		if got, ok := in.Known.Lookup(f.Path); !ok || got.SHA256 != f.SHA256 {
			t.Errorf("Known lacks %s with its digest", f.Path)
		}
	}
	if in.Want != want.Digest {
		t.Errorf("Want %s, the brain hashes to %s", in.Want, want.Digest)
	}
}

// The loop wakes up by itself when a renewal falls due, without any change
// to the brain.
func TestRunWakesForRenewal(t *testing.T) {
	r := newRig(t)
	r.write("system.md", "v1\n")
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	first, err := a.SyncOnce(t.Context())
	if err != nil || first.Outcome != Snapshotted {
		t.Fatalf("first sync: %+v %v", first, err)
	}
	// Not due at the loop's first pass; due from a moment later on.
	dueFrom := time.Now().Add(200 * time.Millisecond)
	r.pipe.setRenewal(func(now time.Time) snapshot.Renewal {
		if now.Before(dueFrom) {
			return snapshot.Renewal{At: dueFrom}
		}
		return snapshot.Renewal{Due: true, At: now, Reason: "test"}
	})
	r.run(a)
	wait.For(t, "the renewal snapshot", func() bool { return r.pipe.Takes() >= 2 })
	if st := a.Status(); st.Last == nil || st.Last.BundleHash != first.Hash.String() {
		t.Errorf("last snapshot %+v, want a renewal of %s", st.Last, first.Hash)
	}
}
