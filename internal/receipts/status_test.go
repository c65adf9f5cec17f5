package receipts

import (
	"encoding/json"
	"testing"
)

// TestStatusJSONRoundTrip: a report the daemon sends decodes again (the
// CLI asks the daemon), and a status hermesd does not know is an error.
func TestStatusJSONRoundTrip(t *testing.T) {
	for st := range statusNames {
		b, err := json.Marshal(LineResult{Line: 1, Status: st})
		if err != nil {
			t.Fatal(err)
		}
		var back LineResult
		if err := json.Unmarshal(b, &back); err != nil || back.Status != st {
			t.Errorf("%v: %s decodes as %v, %v", st, b, back.Status, err)
		}
	}
	var s Status
	if err := json.Unmarshal([]byte(`"forged"`), &s); err == nil {
		t.Error("an unknown status decoded")
	}
}
