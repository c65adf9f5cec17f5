package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// A change to a symlink alone — created, retargeted, removed — starts a
// snapshot although the bundle hash, which leaves symlinks out, does not
// move; an unchanged brain starts none, also after a first snapshot taken
// as the hash and after a restart.
func TestSymlinkChangeSnapshots(t *testing.T) {
	for _, asHash := range []bool{false, true} {
		name := "hash first"
		if asHash {
			name = "first snapshot as the hash"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			r.name = ""
			r.pipe.hashes = asHash
			r.write("system.md", "v1\n")
			if err := os.Symlink("system.md", filepath.Join(r.brain, "old")); err != nil {
				t.Fatal(err)
			}
			a := r.open()
			if err := a.Prepare(t.Context()); err != nil {
				t.Fatal(err)
			}
			sync := func(what string, want Outcome) {
				t.Helper()
				res, err := a.SyncOnce(t.Context())
				if err != nil || res.Outcome != want {
					t.Fatalf("%s: %v %v, want %s", what, res.Outcome, err, want)
				}
			}
			sync("first", Snapshotted)
			hash := a.Status().Last.BundleHash
			sync("unchanged", Unchanged)
			a = r.reopen(a)
			if err := a.Prepare(t.Context()); err != nil {
				t.Fatal(err)
			}
			sync("unchanged after a restart", Unchanged)
			link := filepath.Join(r.brain, "current")
			for _, step := range []struct {
				what   string
				change func() error
			}{
				{"created", func() error { return os.Symlink("system.md", link) }},
				{"retargeted", func() error {
					os.Remove(link)
					return os.Symlink("skills/next.md", link)
				}},
				{"removed", func() error { return os.Remove(link) }},
			} {
				takes := r.pipe.Takes()
				if err := step.change(); err != nil {
					t.Fatal(err)
				}
				sync(step.what, Snapshotted)
				if r.pipe.Takes() != takes+1 || a.Status().Last.BundleHash != hash {
					t.Fatalf("%s: %d takes, bundle hash %s (was %s)", step.what, r.pipe.Takes()-takes, a.Status().Last.BundleHash, hash)
				}
				sync(step.what+", then nothing", Unchanged)
			}
		})
	}
}
