package agent

import (
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/pointer"
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
