package agent

import (
	"path/filepath"
	"testing"

	"github.com/hermesd/hermesd/internal/bundlelock"
	"github.com/hermesd/hermesd/internal/headref"
	"github.com/hermesd/hermesd/internal/state"
)

const (
	tBlob  = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUk"
	tPatch = "M4hsZGQ1oCktdzegB6HnI6Mi28S2nqOPHxK-W7_4BUkBAwAFAA"
	tOld   = "E7_nNXvFU_3qZVu3OH1yycRG7LZlyn1-UxEDCDDqGGU"
)

// TestBind: a bare id takes the digest a known reference of the same id
// carries (the state's, the lock's, a handover's); a reference with a
// digest, an id nothing knows and text that is no reference stay as
// they are.
func TestBind(t *testing.T) {
	d1, d2 := headref.Digest{1}, headref.Digest{2}
	patch := headref.Bind(tPatch, d1).String()
	st := &state.AgentState{
		Last:      &state.Snapshot{BlobID: patch},
		Pending:   &state.Pointer{Value: headref.Bind(tBlob, d2).String()},
		Published: tOld,
	}
	known := KnownHeads(st, nil)
	for _, tc := range []struct{ in, want string }{
		{tPatch, patch},
		{tBlob, headref.Bind(tBlob, d2).String()},
		{headref.Bind(tPatch, d2).String(), headref.Bind(tPatch, d2).String()}, // its own digest decides
		{tOld, tOld}, // known bare only
		{"E7_nNXvFU_3qZVu3OH1yycRG7LZlyn1-UxEDCDDqGGX", "E7_nNXvFU_3qZVu3OH1yycRG7LZlyn1-UxEDCDDqGGX"},
		{"not a ref", "not a ref"},
	} {
		if got := Bind(tc.in, known); got != tc.want {
			t.Errorf("Bind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}

	// The lock's newest upload and its lineage count too.
	l := &bundlelock.Lock{}
	l.Uploaded(bundlelock.LineageEntry{BlobID: headref.Bind(tOld, d1).String()})
	l.Uploaded(bundlelock.LineageEntry{BlobID: patch})
	if got := Bind(tOld, KnownHeads(nil, l)); got != headref.Bind(tOld, d1).String() {
		t.Errorf("from the lock's lineage: %q", got)
	}
}

// TestLineageKnows: the lock's lineage knows a head by its reference,
// and by its id alone (a record written before heads carried their
// digest), never under another digest.
func TestLineageKnows(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{cfg: Config{BrainDir: dir}}
	l := &bundlelock.Lock{}
	old := headref.Bind(tOld, headref.Digest{1}).String()
	l.Uploaded(bundlelock.LineageEntry{BlobID: old})
	l.Uploaded(bundlelock.LineageEntry{BlobID: headref.Bind(tPatch, headref.Digest{2}).String()})
	if err := bundlelock.Write(filepath.Join(dir, bundlelock.FileName), l); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{old, true},
		{tOld, true},
		{tPatch, true},
		{headref.Bind(tOld, headref.Digest{3}).String(), false},
		{tBlob, false},
		{"", false},
	} {
		if got := (lineage{a}).Knows(tc.v); got != tc.want {
			t.Errorf("Knows(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
