package daemon

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/wait"
)

// A clean stop stores what snapshot_interval (an hour here) and the
// debounce still hold back, in the quilt batches the stop flushes, and
// publishes it: what a cold restore then finds is the brain as the stop
// left it, not as it was at the last upload.
func TestStopStoresHeldChanges(t *testing.T) {
	t.Parallel()
	dn, err := devnet.Start(t.Context(), devnet.Options{
		Dir:    t.TempDir(),
		Shards: testShards,
		Agents: []devnet.Agent{
			{ID: "alpha", ENSName: "alpha.hermes.eth"},
			{ID: "beta", ENSName: "beta.hermes.eth"},
		},
		Quiet:            50 * time.Millisecond,
		MaxLag:           200 * time.Millisecond,
		SnapshotInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dn.Close() })
	w := &world{t: t, dn: dn}
	for _, id := range []string{"alpha", "beta"} {
		seedBrain(t, w.brain(id))
	}
	d := w.startBatching(nil) // batches wait an hour unless flushed
	settleAll(t, d)
	first := map[string]string{}
	for _, a := range d.Agents() {
		first[a.ID()] = a.Status().Last.BlobID
	}

	// alpha's edit is released by the debounce and then held by the
	// interval; beta's is written just before the stop.
	writeFile(t, filepath.Join(w.brain("alpha"), "skills", "held.md"), "held by snapshot_interval\n", 0o644)
	a, _ := d.Agent("alpha")
	wait.For(t, "alpha's edit seen and held", func() bool { return !a.Status().UnsavedSince.IsZero() })
	writeFile(t, filepath.Join(w.brain("beta"), "skills", "late.md"), "written just before the stop\n", 0o644)
	stop(t, d)

	for _, a := range d.Agents() {
		s := a.Status()
		switch {
		case s.Last == nil || s.Last.BlobID == first[a.ID()]:
			t.Errorf("%s: no snapshot taken at the stop", a.ID())
		case s.Last.BundleHash != dirHashOf(t, s.BrainDir):
			t.Errorf("%s: the last snapshot is not the brain at the stop", a.ID())
		case s.Published != s.Last.BlobID || s.Pending != nil:
			t.Errorf("%s: the stop's snapshot %s not published (pointer %s)", a.ID(), s.Last.BlobID, s.Published)
		}
	}
}
