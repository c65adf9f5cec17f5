package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/sqlite"
	"github.com/hermesd/hermesd/internal/wait"
)

// TestUnwritableSpoolIsUnsaved: with the spool directory unwritable, a
// change to a brain holding a SQLite database (whose consistent copy goes
// to the spool before the brain is hashed) is reported unsaved — in
// /v1/status and hermesd_unsaved_change_age_seconds, not only lastError
// — and saved once the spool is back. A regular file
// where the spool directory should be makes it unwritable for root too.
func TestUnwritableSpoolIsUnsaved(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha"})
	brain := w.brain("alpha")
	writeFile(t, filepath.Join(brain, "system.md"), "You are a test agent.\n", 0o644)
	writeFile(t, filepath.Join(brain, "memory.db"), sqlite.Magic+strings.Repeat("\x00", 4096-len(sqlite.Magic)), 0o644)
	d := w.start()
	a, _ := d.Agent("alpha")
	wait.For(t, "the first snapshot", func() bool {
		s := a.Status()
		return s.Last != nil && s.UnsavedSince.IsZero() && s.LastError == ""
	})
	first := a.Status().Last.BlobID

	spool := filepath.Join(w.dn.Config.StateDir, "spool")
	if err := os.RemoveAll(spool); err != nil {
		t.Fatal(err)
	}
	writeFile(t, spool, "not a directory\n", 0o600)
	writeFile(t, filepath.Join(brain, "memory.db"), sqlite.Magic+strings.Repeat("\x01", 4096-len(sqlite.Magic)), 0o644)

	var st agent.Status
	wait.For(t, "the change to be reported unsaved", func() bool {
		st = statusOf(t, d, "alpha")
		return st.LastError != "" && !st.UnsavedSince.IsZero()
	})
	if st.Last == nil || st.Last.BlobID != first {
		t.Errorf("the last snapshot moved while the spool was unwritable: %+v", st.Last)
	}
	wait.For(t, "hermesd_unsaved_change_age_seconds to count", func() bool {
		return metricValue(t, getMetrics(t, d), `hermesd_unsaved_change_age_seconds{agent="alpha"}`) > 0
	})
	t.Logf("unsaved while the spool is unwritable: %s", st.LastError)

	if err := os.Remove(spool); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the change to be saved", func() bool {
		s := a.Status()
		return s.Last != nil && s.Last.BlobID != first && s.UnsavedSince.IsZero() && s.LastError == ""
	})
	if v := metricValue(t, getMetrics(t, d), `hermesd_unsaved_change_age_seconds{agent="alpha"}`); v != 0 {
		t.Errorf("unsaved age %v after the change was saved", v)
	}
}

// statusOf is one agent's line of /v1/status.
func statusOf(t *testing.T, d *Daemon, id string) agent.Status {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep StatusReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Agents {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no agent %s in /v1/status", id)
	return agent.Status{}
}
