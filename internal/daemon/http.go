package daemon

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/config"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/pointer"
	"github.com/hermesd/hermesd/internal/receipts"
)

// Bounds of the HTTP API.
const (
	maxReceiptsBody   = 32 << 20 // one POST of receipts
	maxHeaderBytes    = 64 << 10
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds the whole request, body included: a slow client
	// cannot hold a receipt import (the body is spooled before the log is
	// touched, so it never holds the log's lock either).
	readTimeout  = 60 * time.Second
	writeTimeout = 60 * time.Second
	idleTimeout  = 60 * time.Second
)

// api is hermesd's HTTP API:
//
//	GET  /healthz                     200 while the process runs
//	GET  /readyz                      200 when ready (http.readiness), else 503; JSON says which agent and why
//	GET  /metrics                     Prometheus
//	GET  /v1/status                   JSON status of every agent
//	GET  /v1/fleet                    JSON: the fleet as this node sees it; ?wait=REV long-polls past revision REV
//	POST /v1/agents/{id}/receipts     ndjson or one JSON receipt from the agent runtime   (authenticated)
//	POST /v1/agents/{id}/pointer/adopt|override   resolve a held pointer                  (authenticated)
//	POST /v1/agents/{id}/quarantine/purge         delete the quarantined receipt lines    (authenticated)
//
// A request that changes state must carry "Authorization: Bearer
// <http.token>" (compared in constant time) or arrive on the Unix socket,
// whose file mode decides who may connect; it must name the listener in
// its Host header (a page that reached loopback through DNS rebinding
// names its own host), carry no Origin header (browsers add one to
// cross-site requests) and declare its body as JSON or ndjson (a form or
// text/plain post, which browsers send without asking, is refused).
type api struct {
	d     *Daemon
	token []byte // nil: no TCP client may change state
	mux   *http.ServeMux
}

type viaSocketKey struct{}

func newAPI(d *Daemon) (*api, error) {
	a := &api{d: d, mux: http.NewServeMux()}
	if !d.cfg.HTTP.Token.IsZero() {
		tok, err := config.ReadSecret(d.cfg.HTTP.Token)
		if err != nil {
			return nil, fmt.Errorf("http.token: %w", err)
		}
		if len(tok) < 16 {
			return nil, errors.New("http.token: shorter than 16 characters; make one with: head -c 32 /dev/urandom | base64")
		}
		a.token = []byte(tok)
	}
	m := a.mux
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	m.HandleFunc("GET /readyz", a.serveReady)
	m.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{}))
	m.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		d.writeStatus(w) // an error is the client gone: nothing to tell it
	})
	m.HandleFunc("GET /v1/fleet", a.serveFleet)
	m.HandleFunc("POST /v1/agents/{id}/receipts", a.guard(a.serveReceipts, "application/x-ndjson", "application/json"))
	m.HandleFunc("POST /v1/agents/{id}/pointer/{action}", a.guard(a.servePointer, "application/json"))
	m.HandleFunc("POST /v1/agents/{id}/quarantine/purge", a.guard(a.servePurge, "application/json"))
	return a, nil
}

// listen binds the TCP listener and the Unix socket the configuration
// names.
func (d *Daemon) listen() error {
	srv := func(viaSocket bool) *http.Server {
		h := d.api.sameHost(d.api.mux)
		if viaSocket {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				d.api.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viaSocketKey{}, true)))
			})
		}
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
		}
	}
	if l := d.cfg.HTTP.Listen; l != "" {
		ln, err := net.Listen("tcp", l)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", l, err)
		}
		d.listeners = append(d.listeners, ln)
		d.servers = append(d.servers, srv(false))
	}
	if p := d.cfg.HTTP.Socket; p != "" {
		ln, err := listenUnix(p, fs.FileMode(d.cfg.HTTP.SocketMode))
		if err != nil {
			return fmt.Errorf("http.socket: %w", err)
		}
		d.listeners = append(d.listeners, ln)
		d.servers = append(d.servers, srv(true))
	}
	return nil
}

// listenUnix listens on a Unix socket at path with the given mode. A stale
// socket of an earlier run is replaced; any other file there is not.
//
// The socket is bound in a private directory, given its mode, and only
// then renamed to path: bound in place it would exist with the umask's
// mode until the chmod, and a client that connected in that instant would
// be served as if the mode allowed it.
func listenUnix(path string, mode fs.FileMode) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s is in use by another process", path)
		}
	}
	private, err := os.MkdirTemp(filepath.Dir(path), ".hs")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // it is unlinked at path, below
	if err := os.Chmod(tmp, mode); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	return &unixListener{UnixListener: ln, path: path}, nil
}

// unixListener removes its socket file when closed.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

// Addr is the socket's path, not where it was bound.
func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}

// guard authenticates a state-changing request and checks where it comes
// from and what it carries, before h runs.
func (a *api) guard(h http.HandlerFunc, types ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		viaSocket, _ := r.Context().Value(viaSocketKey{}).(bool)
		if !viaSocket {
			if a.token == nil {
				apiError(w, http.StatusForbidden, "this endpoint needs http.token (send it as a bearer token) or a request on http.socket")
				return
			}
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), a.token) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="hermesd"`)
				apiError(w, http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
			if !a.hostAllowed(r.Host) {
				apiError(w, http.StatusMisdirectedRequest, "the Host header does not name this server")
				return
			}
		}
		if r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			apiError(w, http.StatusForbidden, "cross-origin requests are refused")
			return
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || !contains(types, mt) {
			apiError(w, http.StatusUnsupportedMediaType, "Content-Type must be one of "+strings.Join(types, ", "))
			return
		}
		h(w, r)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sameHost refuses, on a loopback listener, any request whose Host header
// names another server: a page that reached loopback through DNS
// rebinding names its own host, and must not read status or metrics
// either. (A listener on another interface answers probes and scrapes
// that name it however they reach it; its state-changing endpoints still
// check the Host in guard.)
func (a *api) sameHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.loopback() && !a.hostAllowed(r.Host) {
			apiError(w, http.StatusMisdirectedRequest, "the Host header does not name this server")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopback reports whether the TCP listener is on a loopback address.
func (a *api) loopback() bool {
	h, _, err := net.SplitHostPort(a.d.Addr())
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed accepts the listen address itself, and for a loopback
// listener localhost, 127.0.0.1 and [::1] with its port.
func (a *api) hostAllowed(host string) bool {
	addr := a.d.Addr()
	if addr == "" {
		return false
	}
	if strings.EqualFold(host, addr) || strings.EqualFold(host, a.d.cfg.HTTP.Listen) {
		return true
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil || p != port {
		return false
	}
	lh, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(lh); ip != nil && ip.IsLoopback() {
		return strings.EqualFold(h, "localhost") || h == "127.0.0.1" || h == "::1"
	}
	return false
}

// StatusReport is what /v1/status and `hermesd status` show.
type StatusReport struct {
	Ready  bool           `json:"ready"`
	Agents []agent.Status `json:"agents"`
	// Cost is what each agent has spent and spends per day and month at
	// its recent rate (the cost ledger).
	Cost *ledger.Report `json:"cost,omitempty"`
}

// Status reports every agent.
func (d *Daemon) Status() StatusReport {
	rep := StatusReport{Ready: d.Ready()}
	for _, a := range d.agents {
		rep.Agents = append(rep.Agents, d.agentStatus(a))
	}
	c := d.CostReport()
	rep.Cost = &c
	return rep
}

// AgentReady is one agent's line of /readyz.
type AgentReady struct {
	ID     string      `json:"id"`
	Ready  bool        `json:"ready"`
	Phase  agent.Phase `json:"phase"`
	Reason string      `json:"reason,omitempty"`
	// Note says what is in progress or not known without making the
	// agent unready: a pointer written on an L2, not yet visible from L1;
	// a pointer not read back for longer than chain.check_interval
	// ("unverified since ...").
	Note string `json:"note,omitempty"`
}

func (a *api) serveReady(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Ready     bool         `json:"ready"`
		Readiness string       `json:"readiness"`
		Agents    []AgentReady `json:"agents"`
	}{Ready: a.d.Ready(), Readiness: a.d.cfg.HTTP.Readiness}
	for _, ag := range a.d.owned() {
		s := a.d.agentStatus(ag)
		ok, why := healthy(s)
		note := s.PointerNote
		if s.PointerUnverified != "" {
			note = strings.TrimPrefix(note+"; pointer "+s.PointerUnverified, "; ")
		}
		out.Agents = append(out.Agents, AgentReady{ID: s.ID, Ready: ok, Phase: s.Phase, Reason: why, Note: note})
	}
	code := http.StatusOK
	if !out.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, out)
}

func (a *api) serveReceipts(w http.ResponseWriter, r *http.Request) {
	id, ag, ok := a.agentOf(w, r)
	if !ok {
		return
	}
	if why := a.d.notRunHere(id); why != "" {
		// The runtime must send its receipts to the node that runs the
		// agent: a log written here would fork the owner's.
		apiError(w, http.StatusConflict, why)
		return
	}
	// Spool the body first (bounded, within the read timeout), so the
	// import never waits on a slow client.
	spool, err := os.CreateTemp(a.d.state.SpoolDir(), "receipts-*.ndjson")
	if err != nil {
		apiError(w, http.StatusInternalServerError, "spool receipts: "+err.Error())
		return
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	if _, err := io.Copy(spool, http.MaxBytesReader(w, r.Body, maxReceiptsBody)); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxReceiptsBody))
			return
		}
		apiError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	cfg := ag.Config()
	// Receipts of another agent's token go to that agent's log.
	route := compose.ReceiptRoute(a.d.cfg, id, func(holder string) *receipts.Log {
		if h, ok := a.d.byID[holder]; ok {
			return h.Receipts()
		}
		return nil
	})
	rep, err := ag.Receipts().ImportRouted(r.Context(), spool, cfg.ImportPolicy, cfg.Trusted, route)
	m := a.d.metrics.receiptsIngested
	m.add(id, "rejected", float64(rep.Rejected))
	switch {
	case errors.Is(err, receipts.ErrRejected):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": err.Error(), "report": rep})
		return
	case err != nil:
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	m.add(id, "added", float64(rep.Imported))
	m.add(id, "duplicate", float64(rep.Duplicates))
	m.add(id, "quarantined", float64(rep.Quarantined))
	m.add(id, "dropped", float64(rep.Dropped))
	for _, f := range rep.Forwarded {
		m.add(f.Agent, "added", float64(f.Imported))
		m.add(f.Agent, "duplicate", float64(f.Duplicates))
	}
	writeJSON(w, http.StatusOK, rep)
}

// servePurge deletes an agent's quarantined receipt lines (the daemon
// holds the log, so `hermesd receipts quarantine purge` asks it).
func (a *api) servePurge(w http.ResponseWriter, r *http.Request) {
	id, ag, ok := a.agentOf(w, r)
	if !ok {
		return
	}
	n, err := ag.Receipts().PurgeQuarantine()
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	a.d.log.Info("receipt quarantine purged", "agent", id, "removed", n)
	writeJSON(w, http.StatusOK, map[string]any{"agent": id, "removed": n})
}

// servePointer resolves a held pointer: adopt the other writer's snapshot,
// or override it with ours.
func (a *api) servePointer(w http.ResponseWriter, r *http.Request) {
	id, ag, ok := a.agentOf(w, r)
	if !ok {
		return
	}
	var (
		out = map[string]string{"agent": id}
		err error
	)
	switch r.PathValue("action") {
	case "adopt":
		out["setAside"], err = ag.Adopt(r.Context())
	case "override":
		err = ag.Override(r.Context())
	default:
		apiError(w, http.StatusNotFound, "unknown pointer action (adopt, override)")
		return
	}
	switch {
	case errors.Is(err, pointer.ErrNotHeld):
		apiError(w, http.StatusConflict, err.Error())
	case err != nil:
		apiError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

// agentOf finds the agent a request names, answering 404 when there is none.
func (a *api) agentOf(w http.ResponseWriter, r *http.Request) (string, *agent.Agent, bool) {
	id := r.PathValue("id")
	ag, ok := a.d.byID[id]
	if !ok {
		apiError(w, http.StatusNotFound, "no agent "+id)
	}
	return id, ag, ok
}

func apiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
