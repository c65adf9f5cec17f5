package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/snapshot"
)

// A new owner restores the fleet head only when it descends from the
// record; anything else the record says wins (never a rollback of it).
func TestPlanTakeOver(t *testing.T) {
	head := &pointer.FleetHead{Value: "B2", BundleHash: "0x02", Published: "B1"}
	for _, tc := range []struct {
		name    string
		fleet   *pointer.FleetHead
		record  string
		hasName bool
		blob    string
		source  string
	}{
		{"nothing anywhere", nil, "", true, "", ""},
		{"no fleet head", nil, "B1", true, "B1", SourceENS},
		{"no record yet", head, "", true, "B2", SourceFleetHead},
		{"no name", head, "", false, "B2", SourceFleetHead},
		{"the record names the head", head, "B2", true, "B2", SourceFleetHead},
		{"the head came after the record", head, "B1", true, "B2", SourceFleetHead},
		{"the record was written outside the fleet", head, "X9", true, "X9", SourceENS},
		{"the record is newer (a failed head write)", head, "B3", true, "B3", SourceENS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanTakeOver(tc.fleet, tc.record, tc.hasName)
			if p.Blob != tc.blob || p.Source != tc.source || p.Record != tc.record || p.Why == "" {
				t.Fatalf("plan %+v, want blob %q from %q", p, tc.blob, tc.source)
			}
			if tc.source == SourceENS && tc.fleet != nil && !strings.Contains(p.Why, "does not descend") {
				t.Fatalf("why %q", p.Why)
			}
		})
	}
}

// lineagePipeline walks a fixed lineage (newest first), or fails.
type lineagePipeline struct {
	*fakePipeline
	lineage []string
	err     error
	walks   int
}

func (p *lineagePipeline) History(_ context.Context, head string, limit int) ([]snapshot.HistoryEntry, error) {
	p.walks++
	if p.err != nil {
		return nil, p.err
	}
	var out []snapshot.HistoryEntry
	for i, v := range p.lineage {
		if len(out) == 0 && v != head {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, snapshot.HistoryEntry{N: len(out), BlobID: p.lineage[i]})
	}
	return out, nil
}

// TestCheckDescent: a plan that would restore the record over a fleet
// head whose writer did not know the record (it moved after the head
// was written) restores the fleet head when the record is in its
// lineage; not when it is not; and a walk that fails is an error, never
// the older record.
func TestCheckDescent(t *testing.T) {
	head := &pointer.FleetHead{Value: "B4", Published: "B1"}
	for _, tc := range []struct {
		name   string
		record string
		err    error
		blob   string
		source string
		failed bool
		walked bool
	}{
		{"the record is an ancestor", "B2", nil, "B4", SourceFleetHead, false, true},
		{"the record is elsewhere", "X9", nil, "X9", SourceENS, false, true},
		{"the walk fails", "B2", errors.New("walrus down"), "B2", SourceENS, true, true},
		{"the head came after the record", "B1", nil, "B4", SourceFleetHead, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			lp := &lineagePipeline{fakePipeline: r.pipe, lineage: []string{"B4", "B3", "B2", "B1"}, err: tc.err}
			a := r.open()
			a.deps.Pipeline = lp
			p, err := a.CheckDescent(t.Context(), PlanTakeOver(head, tc.record, true))
			if (err != nil) != tc.failed || p.Blob != tc.blob || p.Source != tc.source || (lp.walks > 0) != tc.walked {
				t.Fatalf("plan %+v, error %v, walks %d; want blob %q from %q", p, err, lp.walks, tc.blob, tc.source)
			}
		})
	}
}
