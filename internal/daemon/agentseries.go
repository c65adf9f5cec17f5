package daemon

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// agentSeries holds the per-agent series the daemon's events update
// (snapshots, failures, pointer writes, ...) as plain numbers, and writes
// them out at scrape time, as ageCollector does the ages. The client
// library's vectors kept ~470 bytes a series for the life of the process
// (label pairs, a created time, a map entry): 28 series an agent, 13 MB
// of a daemon of a thousand agents. Here a series is 32 bytes, and an
// agent's label pair and created time are made once and shared by its
// series, so a scrape does not make them again (it allocates about what
// the vectors' did: +15%, none of it kept).
type agentSeries struct {
	fams []agentFamily

	mu     sync.RWMutex
	agents map[string]*agentVals
	order  []*agentVals // in creation order, for Collect
	pairs  map[[2]string]*dto.LabelPair
}

// agentFamily is one metric of the agent label and at most one more.
type agentFamily struct {
	desc    *prometheus.Desc
	counter bool   // else a gauge
	label   string // the second label's name ("" for none)
}

// agentVals are one agent's series.
type agentVals struct {
	id      string
	pair    *dto.LabelPair         // agent="<id>"
	created *timestamppb.Timestamp // the counters' created time

	mu     sync.Mutex
	series []agentValue
}

type agentValue struct {
	fam   uint8
	label string // the second label's value ("" for a family without one)
	v     float64
}

func newAgentSeries() *agentSeries {
	return &agentSeries{agents: map[string]*agentVals{}, pairs: map[[2]string]*dto.LabelPair{}}
}

// family adds a metric: a counter or a gauge labelled by agent and, when
// label is set, by label.
func (s *agentSeries) family(name, help, label string, counter bool) agentVec {
	labels := []string{"agent"}
	if label != "" {
		labels = append(labels, label)
	}
	s.fams = append(s.fams, agentFamily{desc: prometheus.NewDesc(name, help, labels, nil), counter: counter, label: label})
	return agentVec{s: s, fam: uint8(len(s.fams) - 1)}
}

// vals returns id's series, made when missing.
func (s *agentSeries) vals(id string) *agentVals {
	return lookupOrAdd(&s.mu, s.agents, id, func() *agentVals {
		a := &agentVals{id: id, pair: labelPair("agent", id), created: timestamppb.New(time.Now())}
		s.order = append(s.order, a)
		return a
	})
}

// lookupOrAdd returns m[k], or adds mk() (called under mu's write lock)
// when it is missing.
func lookupOrAdd[K comparable, V comparable](mu *sync.RWMutex, m map[K]V, k K, mk func() V) V {
	var zero V
	mu.RLock()
	v := m[k]
	mu.RUnlock()
	if v != zero {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v = m[k]; v == zero {
		v = mk()
		m[k] = v
	}
	return v
}

// update applies f to the series, made at zero when missing. A label
// that is not UTF-8 would fail the whole scrape: such an update is
// dropped (ids are checked by the configuration, the values are the
// daemon's own).
func (s *agentSeries) update(fam uint8, id, label string, f func(*float64)) {
	if !utf8.ValidString(id) || !utf8.ValidString(label) {
		return
	}
	a := s.vals(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.series {
		if v := &a.series[i]; v.fam == fam && v.label == label {
			f(&v.v)
			return
		}
	}
	a.series = append(a.series, agentValue{fam: fam, label: label})
	f(&a.series[len(a.series)-1].v)
}

func (s *agentSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range s.fams {
		ch <- f.desc
	}
}

func (s *agentSeries) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	agents := s.order[:len(s.order):len(s.order)]
	s.mu.RUnlock()
	var series []agentValue
	for _, a := range agents {
		a.mu.Lock()
		series = append(series[:0], a.series...)
		a.mu.Unlock()
		for _, v := range series {
			f := &s.fams[v.fam]
			m := &agentMetric{desc: f.desc, v: v.v}
			switch { // sorted by name, as the exposition wants them
			case f.label == "":
				m.labels = []*dto.LabelPair{a.pair}
			case f.label < "agent":
				m.labels = []*dto.LabelPair{s.pair(f.label, v.label), a.pair}
			default:
				m.labels = []*dto.LabelPair{a.pair, s.pair(f.label, v.label)}
			}
			if f.counter {
				m.created = a.created
			}
			ch <- m
		}
	}
}

// pair returns the shared label pair name="value".
func (s *agentSeries) pair(name, value string) *dto.LabelPair {
	return lookupOrAdd(&s.mu, s.pairs, [2]string{name, value}, func() *dto.LabelPair { return labelPair(name, value) })
}

func labelPair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)}
}

// agentMetric is one series at a scrape: a counter when created is set,
// else a gauge. Its label pairs and created time are shared, never
// written.
type agentMetric struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair // sorted by name
	created *timestamppb.Timestamp
	v       float64
}

func (m *agentMetric) Desc() *prometheus.Desc { return m.desc }

func (m *agentMetric) Write(out *dto.Metric) error {
	out.Label = m.labels
	if m.created != nil {
		out.Counter = &dto.Counter{Value: &m.v, CreatedTimestamp: m.created}
	} else {
		out.Gauge = &dto.Gauge{Value: &m.v}
	}
	return nil
}

// agentVec is one family's series of every agent.
type agentVec struct {
	s   *agentSeries
	fam uint8
}

// add adds d to the series of agent id (and label value label: "" for a
// family of the agent label alone).
func (v agentVec) add(id, label string, d float64) {
	v.s.update(v.fam, id, label, func(x *float64) { *x += d })
}

// set sets the series to x.
func (v agentVec) set(id, label string, x float64) {
	v.s.update(v.fam, id, label, func(p *float64) { *p = x })
}
