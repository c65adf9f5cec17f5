package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/snapshot"
	"github.com/hermesd/hermesd/internal/state"
)

// TestRestoreReportKept: what a restore stripped (set-id bits) or noted
// is kept in the agent's state, bounded, so a later process — hermesd
// status after a one-shot hermesd restore — still shows it.
func TestRestoreReportKept(t *testing.T) {
	r := newRig(t)
	r.chain.set(r.name, "blobX")
	var stripped []string
	for i := range state.MaxRestoredLines + 8 {
		stripped = append(stripped, fmt.Sprintf("bin/tool%d: setuid not restored (recorded 4755, restored 0755)", i))
	}
	stripped[0] = "bin/" + strings.Repeat("é", 2*state.MaxRestoredLine) + ": setgid not restored"
	r.pipe.restore = func(ctx context.Context, blobID, target string) (snapshot.Restored, error) {
		res, err := restoreInto(target, blobID)
		res.Stripped, res.Notes = stripped, []string{"the brain directory kept its mode 0700 (the snapshot records 0755)"}
		return res, err
	}
	a := r.open()
	if err := a.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	check := func(what string, rep *RestoreReport) {
		t.Helper()
		if rep == nil || rep.BlobID != "blobX" || rep.At.IsZero() || len(rep.Stripped) != state.MaxRestoredLines || rep.Omitted != 8 ||
			len(rep.Notes) != 1 || rep.Stripped[1] != stripped[1] {
			t.Fatalf("%s: %+v", what, rep)
		}
		if l := rep.Stripped[0]; len(l) > state.MaxRestoredLine+len("…") || !strings.HasSuffix(l, "…") || !strings.HasPrefix(l, "bin/é") {
			t.Errorf("%s: a long line kept as %d bytes: %.40q", what, len(l), l)
		}
	}
	check("the restoring process", a.Status().Restore)
	a = r.reopen(a)
	check("the next process", a.Status().Restore)
	st, err := state.LoadAgent(state.AgentPath(r.state, "alpha"))
	if err != nil {
		t.Fatal(err)
	}
	check("the state file", RestoreReportOf(st.Restored))
}
