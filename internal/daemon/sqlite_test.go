package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/compose"
	"github.com/hermesd/hermesd/internal/devnet"
	"github.com/hermesd/hermesd/internal/wait"
)

// sqliteDuration is how long each writer runs at least. The default keeps
// CI quick; a soak run uses -sqlite.duration=2m or more.
var sqliteDuration = flag.Duration("sqlite.duration", 10*time.Second, "how long the SQLite writer of TestLiveSQLiteBrain runs at least per journal mode")

// The writer runs until the daemon has taken minSnapshots snapshots of
// the live database (and sqliteDuration has passed): a count, not a time
// window, so that a loaded machine makes the test slower, not red.
// snapshotsWithin bounds the wait; writerLimit is the writer's own bound,
// should the test die without stopping it.
const (
	minSnapshots    = 3
	snapshotsWithin = 5 * time.Minute
	writerLimit     = 15 * time.Minute
)

func python3(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sqlite3, sys; print(sys.executable)").CombinedOutput()
	exe := strings.TrimSpace(string(out))
	if err != nil || exe == "" {
		t.Fatalf("this test needs python3 with its sqlite3 module as a real SQLite writer; install it "+
			"(Debian/Ubuntu: apt-get install python3): %v: %s", err, out)
	}
	return exe
}

// TestLiveSQLiteBrain: an agent whose memory.db is written continuously
// (WAL, then rollback journal) is snapshotted at least every max_lag plus
// a bounded slack, and every snapshot restores to a database that passes
// integrity_check with no torn transaction.
func TestLiveSQLiteBrain(t *testing.T) {
	t.Parallel()
	py := python3(t)
	for _, mode := range []string{"wal", "delete"} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t, devnet.Agent{ID: "mem"})
			brain := w.brain("mem")
			writeFile(t, filepath.Join(brain, "system.md"), "I remember.\n", 0o644)
			db := filepath.Join(brain, "memory.db")

			writer := exec.Command(py, filepath.Join("testdata", "sqlite_writer.py"), db, mode, fmt.Sprint(writerLimit.Seconds()))
			out, err := writer.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stopWriter, err := writer.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			writer.Stderr = testLog{t}
			if err := writer.Start(); err != nil {
				t.Fatal(err)
			}
			waited := false
			t.Cleanup(func() {
				if !waited {
					writer.Process.Kill()
					writer.Wait()
				}
			})
			lines := bufio.NewScanner(out)
			if !lines.Scan() {
				t.Fatalf("writer did not start: %v", writer.Wait())
			}

			d := w.start()
			a, _ := d.Agent("mem")
			type snap struct {
				at   time.Time
				blob string
			}
			var (
				mu    sync.Mutex
				snaps []snap
			)
			ctx, cancel := context.WithCancel(context.Background())
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				last := ""
				for ctx.Err() == nil {
					if s := a.Status(); s.Last != nil && s.Last.BlobID != last {
						last = s.Last.BlobID
						mu.Lock()
						snaps = append(snaps, snap{time.Now(), last})
						mu.Unlock()
					}
					time.Sleep(5 * time.Millisecond) // sampling the status, not waiting for time to pass
				}
			}()
			started := time.Now()
			taken := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(snaps)
			}
			wait.Within(t, *sqliteDuration+snapshotsWithin, fmt.Sprintf("%d snapshots of the live database", minSnapshots), func() bool {
				return taken() >= minSnapshots && time.Since(started) >= *sqliteDuration
			})
			if err := stopWriter.Close(); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			var stats struct {
				Commits int     `json:"commits"`
				P50     float64 `json:"p50_ms"`
				P99     float64 `json:"p99_ms"`
				Max     float64 `json:"max_ms"`
				Bytes   int64   `json:"bytes"`
			}
			if !lines.Scan() {
				t.Fatalf("writer ended without its report: %v", writer.Wait())
			}
			json.Unmarshal(lines.Bytes(), &stats)
			waited = true
			if err := writer.Wait(); err != nil {
				t.Fatalf("writer: %v", err)
			}
			writing := stopped.Sub(started)
			cancel()
			<-watched
			stop(t, d)

			mu.Lock()
			defer mu.Unlock()
			maxLag := w.dn.Config.MaxLagOf(&w.dn.Config.Agents[0])
			// The longest time the brain went without a snapshot while
			// the writer ran: before the first, between two, after the
			// last.
			worst := snaps[0].at.Sub(started)
			for i := 1; i < len(snaps); i++ {
				if gap := snaps[i].at.Sub(snaps[i-1].at); gap > worst {
					worst = gap
				}
			}
			if last := stopped.Sub(snaps[len(snaps)-1].at); last > worst {
				worst = last
			}
			t.Logf("%s: %d commits (%d MiB), writer commit latency p50 %.1f ms, p99 %.1f ms, max %.1f ms (its longest stall); "+
				"%d snapshots in %v, longest gap %v (max_lag %v)",
				mode, stats.Commits, stats.Bytes>>20, stats.P50, stats.P99, stats.Max, len(snaps), writing.Round(time.Second),
				worst.Round(time.Millisecond), maxLag)
			// The writer never goes quiet, so only max_lag starts these
			// snapshots: minSnapshots of them while it wrote is the
			// property (the wait above). The gaps are a figure, not a
			// bound: each holds a snapshot's own time, which a loaded
			// machine stretches.
			during := 0
			for _, s := range snaps {
				if s.at.Before(stopped) {
					during++
				}
			}
			if during < minSnapshots {
				t.Fatalf("%d snapshots while the writer wrote, want %d", during, minSnapshots)
			}

			// Every snapshot (up to 12, spread over the run) restores to a
			// database that passes integrity_check with every transaction
			// whole.
			svc, err := compose.Build(t.Context(), w.dn.Config, nil, compose.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			pipe := svc.Pipeline(&w.dn.Config.Agents[0], t.TempDir(), nil)
			var dbs []string
			step := max(1, len(snaps)/12)
			for i := 0; i < len(snaps); i += step {
				target := filepath.Join(t.TempDir(), "r")
				if _, err := pipe.Restore(t.Context(), snaps[i].blob, target); err != nil {
					t.Fatalf("restore snapshot %d (%s): %v", i, snaps[i].blob, err)
				}
				dbs = append(dbs, filepath.Join(target, "memory.db"))
			}
			check, err := exec.Command(py, append([]string{filepath.Join("testdata", "sqlite_check.py")}, dbs...)...).Output()
			if err != nil {
				t.Fatalf("integrity check: %v", err)
			}
			results := strings.Split(strings.TrimSpace(string(check)), "\n")
			if len(results) != len(dbs) {
				t.Fatalf("checked %d of %d databases:\n%s", len(results), len(dbs), check)
			}
			for _, line := range results {
				var r struct {
					DB        string
					Integrity string
					Counter   int
					Rows      int
				}
				json.Unmarshal([]byte(line), &r)
				if r.Integrity != "ok" || r.Counter != r.Rows {
					t.Errorf("restored %s: %s", r.DB, line)
				}
			}
		})
	}
}

// testLog sends a subprocess's stderr to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("writer: %s", strings.TrimSpace(string(p)))
	return len(p), nil
}
