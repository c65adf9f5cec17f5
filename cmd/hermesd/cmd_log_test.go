package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// TestLogEndEpochsFromLocalRecord: what the commits do not record (a head
// pack's own end epoch) comes from this machine's record of its uploads:
// the brain's lock lineage and the agent's state.
func TestLogEndEpochsFromLocalRecord(t *testing.T) {
	ac := &config.Agent{ID: "alpha", BrainDir: t.TempDir()}
	stateDir := t.TempDir()
	lock := &bundlelock.Lock{}
	lock.Record("0x01", 1)
	lock.Uploaded(bundlelock.LineageEntry{BlobID: "old", EndEpoch: 7})
	lock.Uploaded(bundlelock.LineageEntry{BlobID: "mid", EndEpoch: 9})
	if err := bundlelock.Write(filepath.Join(ac.BrainDir, bundlelock.FileName), lock); err != nil {
		t.Fatal(err)
	}
	sd := state.AgentPath(stateDir, "alpha")
	if err := os.MkdirAll(sd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := state.SaveAgent(sd, &state.AgentState{Last: &state.Snapshot{BlobID: "new", EndEpoch: 12}}); err != nil {
		t.Fatal(err)
	}
	entries := []snapshot.HistoryEntry{
		{BlobID: "new", EndEpoch: 20}, // the commit's bound is later: the record wins
		{BlobID: "mid", EndEpoch: 8},  // the commit knows an earlier pack
		{BlobID: "old"},               // nothing in the commits
		{BlobID: "elsewhere"},         // nothing anywhere
	}
	fillEndEpochs(entries, localEndEpochs(stateDir, ac))
	for i, want := range []uint64{12, 8, 7, 0} {
		if entries[i].EndEpoch != want {
			t.Errorf("%s: end epoch %d, want %d", entries[i].BlobID, entries[i].EndEpoch, want)
		}
	}
}
