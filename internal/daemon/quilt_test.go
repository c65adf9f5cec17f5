package daemon

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/localwalrus"
	"github.com/hermesd/hermesd/internal/wait"
	"github.com/hermesd/hermesd/internal/walrus"
)

// startBatching runs a daemon whose quilt batches wait an hour, so that
// the test decides when a batch is stored (Flush), and whose Walrus
// endpoints edit may change.
func (w *world) startBatching(edit func(c *config.Config)) *Daemon {
	w.t.Helper()
	cfg := *w.dn.Config
	cfg.Walrus.BatchWindow = config.Duration(time.Hour)
	if edit != nil {
		edit(&cfg)
	}
	log := testLogger(w.t)
	d, err := New(w.t.Context(), &cfg, log, compose.Options{Batch: true})
	if err != nil {
		w.t.Fatal(err)
	}
	d.Start(context.Background())
	w.t.Cleanup(func() { closeAtCleanup(d) })
	return d
}

// flushWhen stores the open quilt batch once n packs wait in it.
func flushWhen(t *testing.T, d *Daemon, n int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d packs waiting for their quilt", n), func() bool { return d.svc.Quilts.Pending() >= n })
	d.svc.Quilts.Flush()
}

// settleAll waits until every agent's newest snapshot is published,
// storing batches as they fill.
func settleAll(t *testing.T, d *Daemon) {
	t.Helper()
	wait.For(t, "every agent published", func() bool {
		if d.svc.Quilts.Pending() > 0 {
			d.svc.Quilts.Flush()
		}
		for _, a := range d.Agents() {
			s := a.Status()
			if s.Last == nil || s.Pending != nil || s.Published != s.Last.BlobID || s.LastError != "" {
				return false
			}
			h := dirHashOf(t, s.BrainDir)
			if s.Last.BundleHash != h {
				return false
			}
		}
		return true
	})
}

func dirHashOf(t *testing.T, dir string) string {
	t.Helper()
	h, err := hash.Dir(t.Context(), dir, hash.Options{})
	if err != nil {
		return ""
	}
	return h.Digest.String()
}

func quiltAgentsOf(n int) []devnet.Agent {
	var as []devnet.Agent
	for i := range n {
		id := fmt.Sprintf("q%d", i)
		as = append(as, devnet.Agent{ID: id, ENSName: id + ".hermes.eth"})
	}
	return as
}

// TestQuiltOneBatchForAllAgents: the snapshots of agents taken at one
// moment share one quilt; every pointer names a patch of it, read back
// before it was published, and restores to its brain.
func TestQuiltOneBatchForAllAgents(t *testing.T) {
	t.Parallel()
	agents := quiltAgentsOf(4)
	w := newWorld(t, agents...)
	for _, a := range agents {
		seedBrain(t, w.brain(a.ID))
		writeFile(t, filepath.Join(w.brain(a.ID), "me.md"), a.ID+"\n", 0o644)
	}
	d := w.startBatching(nil)
	flushWhen(t, d, len(agents))
	settleAll(t, d)
	quilts := map[string]bool{}
	for _, a := range agents {
		p := readPointer(t, w, a.ENSName)
		q, err := walrus.PatchQuilt(p)
		if err != nil {
			t.Fatalf("%s names %q, not a patch: %v", a.ENSName, p, err)
		}
		quilts[q] = true
		restoreMatches(t, w, a.ID, p)
	}
	if len(quilts) != 1 || stores(t, w) != 1 {
		t.Errorf("%d agents in %d quilts, %d stores; want one", len(agents), len(quilts), stores(t, w))
	}
	if got := testutil.ToFloat64(d.quiltMetrics.quilts.WithLabelValues("stored")); got != 1 {
		t.Errorf("hermesd_quilts_total{result=stored} = %v", got)
	}
	if n, err := testutil.GatherAndCount(d.metrics.reg, "hermesd_quilt_patches", "hermesd_quilt_batch_wait_seconds", "hermesd_quilt_packs_total"); err != nil || n < 3 {
		t.Errorf("quilt series: %d, %v", n, err)
	}
}

// restoreMatches restores blob with the agent's own pipeline into a
// scratch directory and compares it with the brain.
func restoreMatches(t *testing.T, w *world, id, blob string) {
	t.Helper()
	svc, err := compose.Build(t.Context(), w.dn.Config, nil, compose.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ac, _ := w.dn.Config.Agent(id)
	out := filepath.Join(t.TempDir(), "restored")
	if _, err := svc.Pipeline(ac, t.TempDir(), nil).Restore(t.Context(), blob, out); err != nil {
		t.Fatalf("%s: restore %s: %v", id, blob, err)
	}
	want, got := tree(t, ac.BrainDir), tree(t, out)
	if len(want) != len(got) {
		t.Errorf("%s: restored %d files, brain has %d", id, len(got), len(want))
	}
	for p, f := range want {
		if got[p] != f {
			t.Errorf("%s: %s differs after restore", id, p)
		}
	}
}

// TestWalrusPublisherOutageDuringBatch: the publisher fails while the
// agents' packs wait in their batch: the quilt is not stored, no pointer
// moves, nothing local is lost, and once Walrus answers again every
// change is stored and published.
func TestWalrusPublisherOutageDuringBatch(t *testing.T) {
	t.Parallel()
	agents := quiltAgentsOf(3)
	w := newWorld(t, agents...)
	for _, a := range agents {
		seedBrain(t, w.brain(a.ID))
	}
	d := w.startBatching(nil)
	flushWhen(t, d, len(agents))
	settleAll(t, d)
	before := map[string]string{}
	for _, a := range agents {
		before[a.ID] = readPointer(t, w, a.ENSName)
		writeFile(t, filepath.Join(w.brain(a.ID), "skills/during-outage.md"), a.ID+" changed\n", 0o644)
	}
	waiting := len(agents)
	wait.For(t, "the changes to wait in a batch", func() bool { return d.svc.Quilts.Pending() == waiting })
	w.dn.Walrus.SetFaults(localwalrus.Faults{Rate: 1, Target: localwalrus.RoutePublisher,
		Kinds: []localwalrus.Fault{{Kind: localwalrus.FaultStatus, Status: 503}}})
	d.svc.Quilts.Flush()
	for _, a := range agents {
		ag, _ := d.Agent(a.ID)
		wait.For(t, a.ID+" to fail its sync", ag.Failing)
		s := ag.Status()
		if s.Last.BlobID != before[a.ID] || s.Pending != nil || s.UnsavedSince.IsZero() {
			t.Errorf("%s during the outage: last %s, pending %+v", a.ID, s.Last.BlobID, s.Pending)
		}
		if got := readPointer(t, w, a.ENSName); got != before[a.ID] {
			t.Errorf("%s moved during the outage to %s", a.ENSName, got)
		}
	}
	w.dn.Walrus.SetFaults(localwalrus.Faults{})
	settleAll(t, d)
	for _, a := range agents {
		p := readPointer(t, w, a.ENSName)
		if p == before[a.ID] {
			t.Errorf("%s did not move after the outage", a.ENSName)
		}
		restoreMatches(t, w, a.ID, p)
	}
}

// hostileWalrus stands in front of the devnet's Walrus: in a hostile
// mode it rewrites quilt store answers or patch reads.
type hostileWalrus struct {
	srv  *httptest.Server
	mode atomic.Value // string
	hits atomic.Int32
}

func newHostileWalrus(t *testing.T, target string) *hostileWalrus {
	u, _ := url.Parse(target)
	h := &hostileWalrus{}
	h.mode.Store("")
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		mode := h.mode.Load().(string)
		if mode == "" || resp.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		switch {
		case resp.Request.Method == http.MethodPut && resp.Request.URL.Path == "/v1/quilts":
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				return err
			}
			ps := m["storedQuiltBlobs"].([]any)
			p := ps[0].(map[string]any)
			switch mode {
			case "foreign patch id":
				raw, _ := base64.RawURLEncoding.DecodeString(p["quiltPatchId"].(string))
				raw[5] ^= 1 // another quilt's blob id
				p["quiltPatchId"] = base64.RawURLEncoding.EncodeToString(raw)
			case "wrong identifier":
				p["identifier"] = "p999"
			case "oversized":
				m["padding"] = strings.Repeat("x", 2<<20)
			}
			b, _ = json.Marshal(m)
			h.hits.Add(1)
		case resp.Request.Method == http.MethodGet && strings.HasPrefix(resp.Request.URL.Path, "/v1/blobs/by-quilt-patch-id/") && mode == "patch differs":
			b = bytes.Clone(b)
			b[len(b)-1] ^= 1
			h.hits.Add(1)
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", fmt.Sprint(len(b)))
		return nil
	}
	h.srv = httptest.NewServer(rp)
	t.Cleanup(h.srv.Close)
	return h
}

// TestHostileQuiltAnswersRefused: a quilt answer naming a patch of
// another quilt or an identifier not sent, an oversized answer, and a
// patch that reads back differently are refused before any pointer moves;
// the agent keeps its last snapshot and publishes once Walrus is honest.
func TestHostileQuiltAnswersRefused(t *testing.T) {
	t.Parallel()
	agents := quiltAgentsOf(1)
	w := newWorld(t, agents...)
	seedBrain(t, w.brain("q0"))
	hw := newHostileWalrus(t, w.dn.Walrus.URL())
	d := w.startBatching(func(c *config.Config) {
		c.Walrus.Publishers = []string{hw.srv.URL}
		c.Walrus.Aggregators = []string{hw.srv.URL}
		c.Walrus.RetryMax = 1
	})
	flushWhen(t, d, 1)
	settleAll(t, d)
	a, _ := d.Agent("q0")
	for i, mode := range []string{"foreign patch id", "wrong identifier", "oversized", "patch differs"} {
		last := a.Status().Last.BlobID
		hw.mode.Store(mode)
		hits := hw.hits.Load()
		writeFile(t, filepath.Join(w.brain("q0"), "skills/hostile.md"), fmt.Sprintf("change %d\n", i), 0o644)
		wait.For(t, mode+": the sync to fail", func() bool {
			if d.svc.Quilts.Pending() > 0 {
				d.svc.Quilts.Flush()
			}
			return a.Failing() && hw.hits.Load() > hits
		})
		if s := a.Status(); s.Last.BlobID != last || s.Pending != nil {
			t.Errorf("%s: last %s (was %s), pending %+v", mode, s.Last.BlobID, last, s.Pending)
		}
		if got := readPointer(t, w, "q0.hermes.eth"); got != last {
			t.Errorf("%s: the pointer moved to %s", mode, got)
		}
		hw.mode.Store("")
		settleAll(t, d)
		restoreMatches(t, w, "q0", readPointer(t, w, "q0.hermes.eth"))
	}
}
