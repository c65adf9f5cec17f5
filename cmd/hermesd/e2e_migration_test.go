package main

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/repo"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/wait"
)

// TestE2EMigrationV2ToV3: an agent whose daemon wrote v2 snapshots is
// restarted with the default format v3; its first v3 snapshot stores the
// whole brain and names the v2 blob as its parent, `hermesd log` goes on
// through the v2 snapshot, and both restore.
func TestE2EMigrationV2ToV3(t *testing.T) {
	t.Parallel()
	w := newE2EWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
	bw := newBrainWriter(t, w.brain("alpha"), rand.New(rand.NewPCG(16, 16)))
	v2cfg := rewriteConfig(t, w, "encryption:\n", "encryption:\n  format: v2\n")
	settleAgentsWith(t, w, v2cfg, "alpha")
	v2blob, v2state := w.pointer("alpha.hermes.eth"), hashedTree(t, w.brain("alpha"))

	bw.put(t, "notes/after-upgrade.md", []byte("written after the upgrade to v3\n"), 0o644)
	want := dirHash(t, w.brain("alpha"))
	p := w.run() // the devnet's configuration: the default format
	wait.Within(t, 30*time.Second, "the daemon to publish "+want, func() bool {
		rep, err := w.status()
		if err != nil || len(rep.Agents) != 1 {
			return false
		}
		a := rep.Agents[0]
		return a.Last != nil && a.Last.BundleHash == want && a.Pending == nil && a.Published == a.Last.BlobID
	})
	p.signal(syscall.SIGTERM)
	if code := p.wait(15 * time.Second); code != 0 {
		t.Fatalf("hermesd exited %d on SIGTERM", code)
	}
	v3blob, v3state := w.pointer("alpha.hermes.eth"), hashedTree(t, w.brain("alpha"))

	restorer := w.restorer("alpha")
	r, err := restorer.OpenV3(t.Context(), v3blob)
	if err != nil {
		t.Fatalf("the snapshot after the upgrade is not v3: %v", err)
	}
	c := r.Commit()
	if c.Parent != v2blob || c.ParentFormat != repo.ParentV2 {
		t.Errorf("first v3 commit: parent %q (%s), want the v2 blob %s", c.Parent, c.ParentFormat, v2blob)
	}
	if c.Added < c.Bytes || len(c.Packs) != 0 || c.BundleHash.String() != want {
		t.Errorf("first v3 commit: %d bytes, %d added, %d other packs, bundle hash %s; want the whole brain (%s) stored anew",
			c.Bytes, c.Added, len(c.Packs), c.BundleHash, want)
	}

	var out struct {
		Snapshots []snapshot.HistoryEntry `json:"snapshots"`
	}
	code, stdout, stderr := w.runOnce("log", "-config", w.dn.ConfigPath, "--json", "alpha")
	if code != 0 {
		t.Fatalf("log: exit %d: %s", code, lastLine(stderr))
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Snapshots) < 2 || out.Snapshots[0].BlobID != v3blob || out.Snapshots[0].Format != snapshot.FormatV3 ||
		out.Snapshots[1].BlobID != v2blob || out.Snapshots[1].Format != snapshot.FormatV2 {
		t.Errorf("log after the upgrade: %+v", out.Snapshots)
	}
	for _, tc := range []struct {
		at   string
		want map[string]hashedFile
	}{{"0", v3state}, {"1", v2state}} {
		dir := filepath.Join(t.TempDir(), "at"+tc.at)
		if code, _, stderr := w.runOnce("restore", "-config", w.dn.ConfigPath, "--at", tc.at, "--dir", dir, "alpha"); code != 0 {
			t.Fatalf("restore --at %s: exit %d: %s", tc.at, code, lastLine(stderr))
		}
		got := hashedTree(t, dir)
		delete(got, "bundle.lock.json")
		want := map[string]hashedFile{}
		for k, v := range tc.want {
			if k != "bundle.lock.json" {
				want[k] = v
			}
		}
		if d := sameTree(want, got); len(d) > 0 {
			t.Errorf("restore --at %s: %v", tc.at, d)
		}
	}
}
