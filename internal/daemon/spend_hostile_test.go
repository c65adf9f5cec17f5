package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ledger"
)

// TestHostileLedgerStatusAndMetrics: a cost.json holding amounts no
// record makes neither breaks /v1/status (the handler used to panic and
// reset the connection) nor /metrics (500, or ±Inf exported); it is moved
// aside to cost.json.bad once, and the next start finds nothing to move.
func TestHostileLedgerStatusAndMetrics(t *testing.T) {
	t.Parallel()
	books := map[string]string{
		"nullchain": `{"version":1,"agent":"nullchain","total":{"chains":{"1337":null}}}`,
		"nullhour":  `{"version":1,"agent":"nullhour","since":"2026-11-27T10:00:00Z","total":{},"hours":[{"start":"2026-11-27T10:00:00Z","chains":{"1337":null}}]}`,
		"infsui":    `{"version":1,"agent":"infsui","since":"2026-11-27T10:00:00Z","total":{"suiTransactions":1e308,"chains":{"1":{"transactions":-1e308,"gas":1,"feeWei":1}}}}`,
		"hugefee":   `{"version":1,"agent":"hugefee","since":"2026-11-27T10:00:00Z","total":{"chains":{"1":{"transactions":1,"gas":1,"feeWei":1` + strings.Repeat("0", 400) + `}}}}`,
	}
	var agents []devnet.Agent
	for id := range books {
		agents = append(agents, devnet.Agent{ID: id})
	}
	w := newWorld(t, agents...)
	sd := w.dn.Config.StateDir
	for id, b := range books {
		p := ledger.Path(sd, id)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	get := func(t *testing.T, d *Daemon, path string) string {
		t.Helper()
		resp, err := http.Get("http://" + d.Addr() + path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v: %.300s", path, resp.StatusCode, err, b)
		}
		return string(b)
	}
	check := func(t *testing.T, d *Daemon) {
		t.Helper()
		var st StatusReport
		if err := json.Unmarshal([]byte(get(t, d, "/v1/status")), &st); err != nil || st.Cost == nil || len(st.Cost.Agents) != len(books) {
			t.Fatalf("/v1/status: %v %+v", err, st.Cost)
		}
		for _, l := range strings.Split(get(t, d, "/metrics"), "\n") {
			if f := strings.Fields(l); len(f) == 2 && !strings.HasPrefix(l, "#") && (strings.Contains(f[1], "Inf") || strings.Contains(f[1], "NaN")) {
				t.Errorf("/metrics: %s", l)
			}
		}
	}

	d := w.start()
	check(t, d)
	for id, b := range books {
		if got, err := os.ReadFile(ledger.Path(sd, id) + ".bad"); err != nil || string(got) != b {
			t.Errorf("%s: not moved aside: %v", id, err)
		}
	}
	stop(t, d)

	for id := range books {
		if err := os.WriteFile(ledger.Path(sd, id)+".bad", []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d = w.start()
	check(t, d)
	stop(t, d)
	for id := range books {
		if got, _ := os.ReadFile(ledger.Path(sd, id) + ".bad"); string(got) != "kept" {
			t.Errorf("%s: moved aside again", id)
		}
	}
}
