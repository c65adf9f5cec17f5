package daemon

import (
	"fmt"
	"math/rand"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAgentSeriesAsVectors: what agentSeries writes out is what the
// client library's vectors wrote for the same updates, byte for byte in
// the text format (series made at zero, counters added to, gauges set, in
// any order, over several agents).
func TestAgentSeriesAsVectors(t *testing.T) {
	ours := newAgentSeries()
	ref := prometheus.NewRegistry()
	type fam struct {
		vec   agentVec
		label string
		cv    *prometheus.CounterVec
		gv    *prometheus.GaugeVec
	}
	var fams []fam
	for i, f := range []struct {
		name, label string
		counter     bool
	}{{"x_results_total", "result", true}, {"x_bytes_total", "", true}, {"x_size", "", false},
		{"x_stage_state", "stage", false}, {"x_accounts_total", "account", true}} {
		help := fmt.Sprintf("Family %d.", i)
		labels := []string{"agent"}
		if f.label != "" {
			labels = append(labels, f.label)
		}
		x := fam{vec: ours.family(f.name, help, f.label, f.counter), label: f.label}
		if f.counter {
			x.cv = prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.name, Help: help}, labels)
			ref.MustRegister(x.cv)
		} else {
			x.gv = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.name, Help: help}, labels)
			ref.MustRegister(x.gv)
		}
		fams = append(fams, x)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(ours)

	rng := rand.New(rand.NewSource(1))
	agents := []string{"beta", "alpha", "gamma-ünï"}
	values := []string{"ok", "failed", "held"}
	for range 500 {
		f := fams[rng.Intn(len(fams))]
		id := agents[rng.Intn(len(agents))]
		lv := ""
		if f.label != "" {
			lv = values[rng.Intn(len(values))]
		}
		lvs := []string{id}
		if f.label != "" {
			lvs = append(lvs, lv)
		}
		x := float64(rng.Intn(1000)) / 8
		switch {
		case f.cv != nil && rng.Intn(5) == 0: // made at zero
			f.vec.add(id, lv, 0)
			f.cv.WithLabelValues(lvs...)
		case f.cv != nil:
			f.vec.add(id, lv, x)
			f.cv.WithLabelValues(lvs...).Add(x)
		default:
			f.vec.set(id, lv, x)
			f.gv.WithLabelValues(lvs...).Set(x)
		}
		if got, want := f.vec.get(id, lv), valueOf(t, f.cv, f.gv, lvs); got != want {
			t.Fatalf("%v: get = %v, the library's vector holds %v", lvs, got, want)
		}
	}
	// A label the text format cannot carry is dropped, not a failed scrape.
	fams[0].vec.add("bad\xff", "ok", 1)
	fams[0].vec.add("alpha", "bad\xff", 1)

	if got, want := text(t, reg), text(t, ref); got != want {
		t.Fatalf("agentSeries wrote\n%s\nthe library's vectors\n%s", got, want)
	}
}

func valueOf(t *testing.T, cv *prometheus.CounterVec, gv *prometheus.GaugeVec, lvs []string) float64 {
	t.Helper()
	if cv != nil {
		return testutil.ToFloat64(cv.WithLabelValues(lvs...))
	}
	return testutil.ToFloat64(gv.WithLabelValues(lvs...))
}

// text is what /metrics answers for g (the daemon's handler options).
func text(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestAgentSeriesConcurrent: updates from many goroutines while scrapes
// run lose nothing (run with -race in CI's race pass).
func TestAgentSeriesConcurrent(t *testing.T) {
	s := newAgentSeries()
	c := s.family("x_total", "X.", "result", true)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				c.add(fmt.Sprintf("agent-%d", i%16), []string{"a", "b"}[g%2], 1)
			}
		}()
	}
	for range 20 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	total := 0.0
	for i := range 16 {
		total += c.get(fmt.Sprintf("agent-%d", i), "a") + c.get(fmt.Sprintf("agent-%d", i), "b")
	}
	if total != 8000 {
		t.Fatalf("%v updates counted, want 8000", total)
	}
}

// TestAgentSeriesMemory: a thousand agents' series, as the daemon makes
// them, stay a small part of what the library's vectors kept (13 MB).
func TestAgentSeriesMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := newMetrics()
	o := (*observer)(m)
	for i := range 1000 {
		id := fmt.Sprintf("agent-%04d", i)
		m.zeroAgent(id, true)
		o.Phase(id, "ready")
		o.Hashed(id, 2, 100, 0)
		m.snapshotLast.set(id, "", 1)
		m.snapshotSize.set(id, "", 1)
		m.publishLast.set(id, "", 1)
		m.restores.add(id, "fresh", 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	series := 0
	for _, a := range m.perAgent.order {
		series += len(a.series)
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d series of 1,000 agents: %d KB, %d B a series", series, grew>>10, grew/int64(series))
	if series < 28000 {
		t.Fatalf("%d series, want the daemon's 28 an agent", series)
	}
	if grew > 3<<20 {
		t.Fatalf("a thousand agents' series take %d bytes", grew)
	}
}

// get returns the series' value, 0 when it does not exist: the tests'
// view of what a scrape would show.
func (v agentVec) get(id, label string) float64 {
	v.s.mu.RLock()
	a := v.s.agents[id]
	v.s.mu.RUnlock()
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, x := range a.series {
		if x.fam == v.fam && x.label == label {
			return x.v
		}
	}
	return 0
}
