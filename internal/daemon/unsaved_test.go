package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/sqlite"
	"github.com/hermesd/hermesd/internal/wait"
)

// TestUnwritableSpoolIsUnsaved: with the spool directory unwritable, a
// change to a brain holding a SQLite database (whose consistent copy goes
// to the spool before the brain is hashed) is reported unsaved — in
// /v1/status and hermesd_unsaved_change_age_seconds, not only lastError
// — and every failed attempt is counted in hermesd_failures_total. Once
// the spool is back the change is stored and published within 5 s,
// however long the retry's backoff had grown meanwhile: the directories
// are probed while it waits. A regular file where the spool directory
// should be makes it unwritable for root too.
func TestUnwritableSpoolIsUnsaved(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha", ENSName: "alpha.hermes.eth"})
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
	// Four failed attempts (the backoff doubles from a second: the next
	// retry is 4-8 s away), each counted, by the stage that failed.
	failures := func() float64 {
		return metricValue(t, getMetrics(t, d), `hermesd_failures_total{agent="alpha",stage="sqlite"}`)
	}
	wait.Within(t, time.Minute, "four failed attempts counted", func() bool { return failures() >= 4 })

	if err := os.Remove(spool); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	var took time.Duration
	wait.For(t, "the change to be saved and published", func() bool {
		s := a.Status()
		if s.Last == nil || s.Last.BlobID == first || !s.UnsavedSince.IsZero() || s.LastError != "" ||
			s.Published != s.Last.BlobID || s.Pending != nil {
			return false
		}
		took = time.Since(fixed)
		return true
	})
	t.Logf("published %s after the spool was fixed (%v failed attempts counted)", took.Round(time.Millisecond), failures())
	// The bound is a wall-clock figure of the issue; the race detector
	// slows everything some tenfold, so there the figure is only logged.
	if took > 5*time.Second && !raceEnabled {
		t.Errorf("the change was published %s after the fix; want at most 5s", took.Round(time.Millisecond))
	}
	if got := readPointer(t, w, "alpha.hermes.eth"); got != a.Status().Last.BlobID {
		t.Errorf("the record names %s, not the new snapshot", got)
	}
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

// TestReadyTurnsWhenAStoreHangs: a Walrus publisher that takes every
// store and never answers (a SIGSTOPped server) fails no sync until the
// attempt times out, a minute later. Readiness does not wait for that:
// once a change is unsaved for longer than the configuration promises
// (snapshot_interval + max_lag + batch_window + agent.UnsavedMargin),
// /readyz is 503 and hermesd_agent_healthy 0 for that agent, whatever the
// cause; and when the store answers again it is ready again.
func TestReadyTurnsWhenAStoreHangs(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha"}, devnet.Agent{ID: "beta"})
	for _, id := range []string{"alpha", "beta"} {
		writeFile(t, filepath.Join(w.brain(id), "system.md"), "You are "+id+".\n", 0o644)
	}
	w.dn.Config.HTTP.Readiness = "all"
	d := w.start()
	a, _ := d.Agent("alpha")
	wait.For(t, "the first snapshots", func() bool {
		code, _ := readyz(t, d)
		return code == http.StatusOK && a.Status().Last != nil
	})
	limit := a.Config().UnsavedLimit
	if want := w.dn.Config.MaxLagOf(&w.dn.Config.Agents[0]) + w.dn.Config.Walrus.BatchWindow.D() + agent.UnsavedMargin; limit != want {
		t.Fatalf("unsaved limit %s, want %s", limit, want)
	}

	// The store hangs longer than the limit, shorter than the attempt
	// timeout (1m): no attempt fails meanwhile.
	hang := limit + 15*time.Second
	w.dn.Walrus.SetFaults(localwalrus.Faults{Rate: 1, Target: localwalrus.RoutePublisher, Latency: hang,
		Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultNone}}})
	changed := time.Now()
	writeFile(t, filepath.Join(w.brain("alpha"), "system.md"), "You are alpha, changed.\n", 0o644)
	var why string
	wait.Within(t, 2*hang, "readiness to turn", func() bool {
		code, r := readyz(t, d)
		why = r.agent("alpha").Reason
		return code == http.StatusServiceUnavailable
	})
	turned := time.Since(changed)
	t.Logf("/readyz 503 %s after the change: %s", turned.Round(time.Millisecond), why)
	s := a.Status()
	if !strings.Contains(why, "unsaved for") || s.LastError != "" || s.UnsavedOverdue == "" {
		t.Errorf("the reason %q (last error %q)", why, s.LastError)
	}
	if turned >= hang {
		t.Errorf("readiness turned %s after the change, after the store answered (%s)", turned, hang)
	}
	m := getMetrics(t, d)
	if v := metricValue(t, m, `hermesd_agent_healthy{agent="alpha"}`); v != 0 {
		t.Errorf("hermesd_agent_healthy of alpha %v while its change is overdue", v)
	}
	if v := metricValue(t, m, `hermesd_agent_healthy{agent="beta"}`); v != 1 {
		t.Errorf("hermesd_agent_healthy of beta %v: it has nothing unsaved", v)
	}

	w.dn.Walrus.SetFaults(localwalrus.Faults{}) // lets the held store through
	wait.Within(t, 2*time.Minute, "ready again once the store answers", func() bool {
		code, _ := readyz(t, d)
		return code == http.StatusOK
	})
}
