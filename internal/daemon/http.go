package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/receipts"
)

// maxReceiptsBody bounds one receipts POST.
const maxReceiptsBody = 32 << 20

// handler routes hermesd's HTTP API:
//
//	GET  /healthz                     200 while the process runs
//	GET  /readyz                      200 when every agent is ready, else 503 (JSON says which)
//	GET  /metrics                     Prometheus
//	GET  /v1/status                   JSON status of every agent
//	POST /v1/agents/{id}/receipts     one JSON receipt or ndjson from the agent runtime
func (d *Daemon) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", d.serveReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Status())
	})
	mux.HandleFunc("POST /v1/agents/{id}/receipts", d.serveReceipts)
	return mux
}

// StatusReport is what /v1/status and `hermesd status` show.
type StatusReport struct {
	Ready  bool           `json:"ready"`
	Agents []agent.Status `json:"agents"`
}

// Status reports every agent.
func (d *Daemon) Status() StatusReport {
	rep := StatusReport{Ready: d.Ready()}
	for _, a := range d.agents {
		rep.Agents = append(rep.Agents, a.Status())
	}
	return rep
}

func (d *Daemon) serveReady(w http.ResponseWriter, r *http.Request) {
	type agentReady struct {
		ID     string      `json:"id"`
		Phase  agent.Phase `json:"phase"`
		Reason string      `json:"reason,omitempty"`
	}
	out := struct {
		Ready  bool         `json:"ready"`
		Agents []agentReady `json:"agents"`
	}{Ready: true}
	for _, a := range d.agents {
		s := a.Status()
		out.Agents = append(out.Agents, agentReady{ID: s.ID, Phase: s.Phase, Reason: s.Reason})
		if s.Phase != agent.PhaseReady {
			out.Ready = false
		}
	}
	code := http.StatusOK
	if !out.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, out)
}

func (d *Daemon) serveReceipts(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, ok := d.byID[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no agent " + id})
		return
	}
	body := http.MaxBytesReader(w, r.Body, maxReceiptsBody)
	cfg := a.Config()
	rep, err := a.Receipts().Import(r.Context(), body, cfg.ImportPolicy, cfg.Trusted)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body larger than 32 MiB"})
		return
	case errors.Is(err, receipts.ErrRejected):
		d.metrics.receiptsIngested.WithLabelValues(id, "rejected").Add(float64(rep.Rejected))
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": err.Error(), "report": rep})
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	m := d.metrics.receiptsIngested
	m.WithLabelValues(id, "added").Add(float64(rep.Imported))
	m.WithLabelValues(id, "duplicate").Add(float64(rep.Duplicates))
	m.WithLabelValues(id, "flagged").Add(float64(rep.Flagged))
	m.WithLabelValues(id, "quarantined").Add(float64(rep.Quarantined))
	writeJSON(w, http.StatusOK, rep)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
