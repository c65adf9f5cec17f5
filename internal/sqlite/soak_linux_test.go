package sqlite

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hermesd/hermesd/internal/hash"
)

var (
	soakFor = flag.Duration("sqlite.soak", 12*time.Second, "how long TestSoak snapshots each journal mode under continuous writes")
	soakMB  = flag.Int("sqlite.mb", 24, "size in MiB TestSoak's database starts at (it grows by a third)")
)

// writerStats is what driver.py writer reports when it stops.
type writerStats struct {
	Txns        int      `json:"txns"`
	Rows        int      `json:"rows"`
	Errors      int      `json:"errors"`
	FirstErrors []string `json:"first_errors"`
	Bytes       int64    `json:"bytes"`
	// Lat holds every transaction's start (Unix seconds) and latency (ms).
	Lat [][2]float64 `json:"lat"`
}

// window is the span of one Freeze call.
type window struct{ from, to time.Time }

// latencies splits the writer's commit latencies into those of
// transactions that overlapped a Freeze call (where its locks may have
// made them wait) and the others (the cost of the commits themselves,
// fsync included, on a machine busy with the snapshots).
func (st writerStats) latencies(ws []window) (during, other []time.Duration) {
	for _, l := range st.Lat {
		from := time.Unix(0, int64(l[0]*1e9))
		d := time.Duration(l[1] * float64(time.Millisecond))
		to := from.Add(d)
		_, hit := slices.BinarySearchFunc(ws, from, func(w window, t time.Time) int {
			switch {
			case w.to.Before(t):
				return -1
			case w.from.After(to):
				return +1
			}
			return 0
		})
		if hit {
			during = append(during, d)
		} else {
			other = append(other, d)
		}
	}
	return during, other
}

// TestSoak snapshots a brain again and again while a separate process
// commits to its SQLite database without pause (bursts of 1 to 8 rows of
// 100 to 8,000 bytes, 5 s busy timeout), in rollback-journal and in WAL
// mode: freeze, hash through the overlay (cache and Dir), archive through
// it, extract into a fresh directory, and require that the extracted tree
// hashes to the snapshot's hash, that SQLite's integrity_check says "ok"
// on the extracted database and that its rows match its counter (no torn
// transaction). The writer must never fail. It logs the lock hold times and
// the writer's commit latencies. -sqlite.soak and -sqlite.mb lengthen it.
func TestSoak(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			brain := t.TempDir()
			writeFile(t, brain, "system.md", []byte("You are a test agent.\n"))
			writeFile(t, brain, "skills/reentrancy.md", []byte("---\nname: reentrancy\n---\nLook for re-entrant calls.\n"))
			db := filepath.Join(brain, "memory.db")
			w := start(t, "writer", db, m.pragma, strconv.Itoa(*soakMB), strconv.Itoa(*soakMB*4/3), "1")
			var ready struct {
				Bytes int64 `json:"bytes"`
			}
			w.next(&ready)

			cache := hash.NewCache(brain, hash.Options{})
			if _, err := cache.Rescan(ctx); err != nil {
				t.Fatal(err)
			}
			spool := t.TempDir()
			var holds, waits []time.Duration
			var calls []window
			var patched, copied int64
			busy, snaps := 0, 0
			var maxGap time.Duration
			last := time.Now()
			for end := last.Add(*soakFor); time.Now().Before(end); {
				from := time.Now()
				fz, err := Freeze(ctx, brain, "memory.db", spool, Options{})
				calls = append(calls, window{from, time.Now()})
				if errors.Is(err, ErrBusy) {
					busy++
					continue
				}
				if err != nil {
					t.Fatalf("freeze %d: %v", snaps+1, err)
				}
				r := snapshotAndRestore(t, ctx, brain, cache, fz)
				c := check(t, filepath.Join(r.dir, "memory.db"))
				if c.Integrity != "ok" || c.Rows == nil || c.N == nil || *c.Rows != *c.N {
					t.Fatalf("snapshot %d: integrity %q, %v rows, counter %v", snaps+1, c.Integrity, deref(c.Rows), deref(c.N))
				}
				if err := fz.Remove(); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(r.dir); err != nil {
					t.Fatal(err)
				}
				snaps++
				holds = append(holds, fz.Hold)
				waits = append(waits, fz.Wait)
				patched += fz.Patched
				copied += fz.Bytes
				maxGap = max(maxGap, time.Since(last))
				last = time.Now()
			}
			w.in.Close()
			var st writerStats
			w.next(&st)
			if st.Errors != 0 {
				t.Errorf("the writer failed %d of %d transactions: %q", st.Errors, st.Txns+st.Errors, st.FirstErrors)
			}
			if snaps < 3 {
				t.Errorf("%d snapshots in %v (%d freezes found the database busy)", snaps, *soakFor, busy)
			}
			if snaps > 0 {
				t.Logf("%d snapshots of a %.0f→%.0f MiB database (%.1f MiB copied on average, %.2f MiB of it again in the locked pass), %d busy; longest gap between snapshots %v",
					snaps, mib(ready.Bytes), mib(st.Bytes), mib(copied)/float64(snaps), mib(patched)/float64(snaps), busy, maxGap.Round(time.Millisecond))
				t.Logf("lock held (writers waiting): p50 %v, p99 %v, max %v; waiting for the lock: p50 %v, p99 %v, max %v",
					pct(holds, 0.5), pct(holds, 0.99), pct(holds, 1), pct(waits, 0.5), pct(waits, 0.99), pct(waits, 1))
			}
			during, other := st.latencies(calls)
			if len(during) > 0 && len(other) > 0 {
				t.Logf("writer: %d transactions, %d rows; commit latency of the %d that overlapped a freeze: p50 %v, p99 %v, max %v; of the others: p50 %v, p99 %v, max %v",
					st.Txns, st.Rows, len(during), pct(during, 0.5), pct(during, 0.99), pct(during, 1), pct(other, 0.5), pct(other, 0.99), pct(other, 1))
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	i := min(len(s)-1, int(p*float64(len(s))))
	return s[i].Round(10 * time.Microsecond)
}
