package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hermesd/hermesd/internal/agent"
	"github.com/hermesd/hermesd/internal/daemon"
)

// TestFetchStatus: what `hermesd status` makes of a daemon's answer. A
// daemon of many agents answers more than the 16 MiB the command used to
// read (and then called the daemon "not running"); an answer it cannot
// read is an error, never "not running"; only no answer is.
func TestFetchStatus(t *testing.T) {
	const agents = 6000 // ~3 KB each: past the old fixed 16 MiB
	big := daemon.StatusReport{Ready: true}
	for i := range agents {
		big.Agents = append(big.Agents, agent.Status{ID: fmt.Sprintf("agent-%05d", i), Phase: agent.PhaseReady,
			LastError: strings.Repeat("x", 3000)})
	}
	body, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) <= statusBodyBase {
		t.Fatalf("the test's answer is %d bytes, not past the old limit", len(body))
	}
	serve := func(b []byte) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/status" {
				http.NotFound(w, r)
				return
			}
			w.Write(b)
		}))
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	closed := freePort(t) // nothing listens there

	for _, c := range []struct {
		name    string
		listen  string
		agents  int
		ok      bool
		errWant string // "" = no error
	}{
		{"many agents, whole", serve(body), agents, true, ""},
		{"more than the agents configured can send", serve(body), 1, false, "more than"},
		{"not JSON", serve([]byte("<html>proxy error</html>")), 1, false, "could not be read"},
		{"cut short", serve(body[:len(body)/2]), agents, false, "could not be read"},
		{"nothing listening", closed, 1, false, ""},
		{"no listen address", "", 1, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, ok, err := fetchStatus(context.Background(), c.listen, c.agents)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v (err %v)", ok, c.ok, err)
			}
			switch {
			case c.errWant == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case c.errWant != "" && (err == nil || !strings.Contains(err.Error(), c.errWant)):
				t.Fatalf("err = %v, want one saying %q", err, c.errWant)
			}
			if ok && (len(rep.Agents) != agents || rep.Agents[agents-1].ID != big.Agents[agents-1].ID) {
				t.Fatalf("got %d agents, want %d", len(rep.Agents), agents)
			}
		})
	}
}
