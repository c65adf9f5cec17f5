package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
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
	r.chain.set(r.name, ref("blobX"))
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
		if rep == nil || rep.BlobID != ref("blobX") || rep.At.IsZero() || len(rep.Stripped) != state.MaxRestoredLines || rep.Omitted != 8 ||
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

// TestValidatePointer: an ENS record is followed only when it is a blob id
// or a QuiltV1 patch id; every other text is ErrInvalidPointer.
func TestValidatePointer(t *testing.T) {
	quilt := make([]byte, 32)
	for i := range quilt {
		quilt[i] = byte(i * 7)
	}
	enc := base64.RawURLEncoding.EncodeToString
	patch := append(append([]byte(nil), quilt...), 1, 3, 0, 5, 0)
	good := enc(patch)
	wrongVersion := append([]byte(nil), patch...)
	wrongVersion[32] = 2
	nonCanonical := []byte(good)
	nonCanonical[len(nonCanonical)-1] = 'B' // the last character's low bits are not zero
	for _, tc := range []struct {
		name, v string
		ok      bool
	}{
		{"blob id", enc(quilt), true},
		{"patch id", good, true},
		{"too long", good + strings.Repeat("A", 60), false},
		{"longer than QuiltV1", enc(append(append([]byte(nil), patch...), 0, 0, 0)), false},
		{"bad base64", good[:20] + "!" + good[21:], false},
		{"wrong quilt version", enc(wrongVersion), false},
		{"truncated", good[:48], false},
		{"non-canonical", string(nonCanonical), false},
		{"empty", "", false},
		{"text", "hello", false},
	} {
		err := ValidatePointer(tc.v)
		if (err == nil) != tc.ok || (!tc.ok && !errors.Is(err, ErrInvalidPointer)) {
			t.Errorf("%s (%q): %v", tc.name, tc.v, err)
		}
	}
	// Latest refuses such a record instead of following it, or taking it
	// for none (a fresh start).
	r := newRig(t)
	r.chain.set(r.name, good[:48])
	a := r.open()
	if err := a.Prepare(t.Context()); !errors.Is(err, ErrInvalidPointer) || !errors.Is(err, ErrRestoreFailed) {
		t.Errorf("Prepare with an invalid record: %v", err)
	}
	if _, err := os.Stat(r.brain); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an invalid record started the agent fresh: %v", err)
	}
}
