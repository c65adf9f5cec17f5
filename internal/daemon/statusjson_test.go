package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/ledger"
	"github.com/hermesd/hermesd/internal/wait"
)

// TestStatusStreamIsStatus: /v1/status, written one agent at a time, is
// byte for byte what encoding Status() whole gives (with a clock held
// still, so the cost report's projections agree), for agents with and
// without spend, and what `hermesd status` decodes.
func TestStatusStreamIsStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t, devnet.Agent{ID: "alpha"}, devnet.Agent{ID: "beta"}, devnet.Agent{ID: "gamma"})
	for _, id := range []string{"alpha", "beta"} {
		writeFile(t, filepath.Join(w.brain(id), "system.md"), "hello "+id+"\n", 0o644)
	}
	// gamma brings a book of earlier spend (a week ago: a projection).
	frozen := time.Now().UTC().Truncate(time.Second)
	book := `{"version":1,"agent":"gamma","since":"` + frozen.AddDate(0, 0, -7).Format(time.RFC3339) +
		`","total":{"snapshots":3,"blobs":2,"encodedBytes":123456,"encodedByteEpochs":246912,"suiTransactions":4,"chains":{"1337":{"transactions":2,"gas":90000,"feeWei":1800000000000000}}}}`
	p := ledger.Path(w.dn.Config.StateDir, "gamma")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(book), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, w, func(d *Daemon) { d.now = func() time.Time { return frozen } })
	for _, id := range []string{"alpha", "beta"} {
		a, _ := d.Agent(id)
		wait.For(t, id+" snapshotted", func() bool { return a.Status().Last != nil })
		// The ledger counts the snapshot after the status shows it.
		wait.For(t, id+"'s snapshot in the ledger", func() bool { return d.ledger.Book(id).Total.Snapshots >= 1 })
	}

	var whole, streamed []byte
	// An agent's status can move between the two reads (a pointer check):
	// the two must agree on some pair of reads.
	wait.For(t, "the streamed status to equal the whole one", func() bool {
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, d.Status())
		whole = rec.Body.Bytes()
		var b bytes.Buffer
		if err := d.writeStatus(&b); err != nil {
			t.Fatal(err)
		}
		streamed = b.Bytes()
		return bytes.Equal(whole, streamed)
	})
	var st StatusReport
	if err := json.Unmarshal(streamed, &st); err != nil {
		t.Fatalf("streamed status: %v\n%s", err, streamed)
	}
	if len(st.Agents) != 3 || st.Cost == nil || len(st.Cost.Agents) != 3 || st.Cost.Total.Recorded.Snapshots < 3+2 ||
		st.Cost.Agents[2].Hermesd.PerDay == nil {
		t.Fatalf("status: %d agents, cost %+v", len(st.Agents), st.Cost)
	}

	// Over HTTP: the same body, as JSON.
	resp, err := http.Get("http://" + d.Addr() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/status: %d %q %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if err := json.Unmarshal(body, &st); err != nil || len(st.Agents) != 3 {
		t.Fatalf("GET /v1/status: %v %s", err, body)
	}
}

// TestJSONStreamArrays: arrays written element by element read as
// json.MarshalIndent writes them, empty ones included.
func TestJSONStreamArrays(t *testing.T) {
	type row struct {
		N int    `json:"n"`
		S string `json:"s,omitempty"`
	}
	for _, rows := range [][]row{{}, {{N: 1}}, {{N: 1, S: "<a>"}, {N: 2}, {N: 3, S: "x"}}} {
		var b bytes.Buffer
		s := jsonStream{w: bufio.NewWriter(&b)}
		s.raw("{\n  \"rows\": [")
		for i, r := range rows {
			s.elem(i, r, "    ")
		}
		s.close(len(rows), "  ")
		s.raw("\n}")
		if err := s.w.Flush(); err != nil || s.err != nil {
			t.Fatal(err, s.err)
		}
		want, _ := json.MarshalIndent(map[string][]row{"rows": rows}, "", "  ")
		if b.String() != string(want) {
			t.Errorf("%d rows:\n%s\nwant\n%s", len(rows), b.String(), want)
		}
	}
}
