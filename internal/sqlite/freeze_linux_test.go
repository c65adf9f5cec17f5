package sqlite

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFreezeIdle(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			brain, _ := newDB(t, m.pragma, 40)
			spool := t.TempDir()
			fz, err := Freeze(ctx, brain, "memory.db", spool, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if fz.WAL != m.wal || fz.Tries != 1 || fz.Patched != 0 {
				t.Errorf("Frozen = %+v; want WAL %v, one try, nothing changed since the first pass", fz, m.wal)
			}
			wantFiles := []string{"memory.db"}
			wantHidden := []string{"memory.db-journal", "memory.db-shm", "memory.db-wal"}
			if m.wal {
				wantFiles = []string{"memory.db", "memory.db-wal"}
				wantHidden = []string{"memory.db-journal", "memory.db-shm"}
			}
			var files []string
			var bytes int64
			for rel, p := range fz.Files {
				files = append(files, rel)
				if filepath.Dir(p) != spool {
					t.Errorf("copy of %s is %s, outside the spool", rel, p)
				}
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				live, _ := os.Stat(filepath.Join(brain, rel))
				if st.Mode() != live.Mode() {
					t.Errorf("copy of %s has mode %v, the live file %v", rel, st.Mode(), live.Mode())
				}
				bytes += st.Size()
			}
			slices.Sort(files)
			hidden := slices.Sorted(slices.Values(fz.Hidden))
			if !slices.Equal(files, wantFiles) || !slices.Equal(hidden, wantHidden) || bytes != fz.Bytes {
				t.Errorf("files %q, hidden %q, %d bytes; want %q, %q, %d bytes", files, hidden, fz.Bytes, wantFiles, wantHidden, bytes)
			}

			r := snapshotAndRestore(t, ctx, brain, nil, fz)
			if r.files != len(wantFiles)+1 {
				t.Errorf("restored %d files, want %d", r.files, len(wantFiles)+1)
			}
			wantRows(t, filepath.Join(r.dir, "memory.db"), 40)
			if m.wal {
				// A restore may meet a stale -shm (the reference runtime
				// archives it): SQLite's first opener resets it.
				junk := make([]byte, 32<<10)
				rand.Read(junk)
				writeFile(t, r.dir, "memory.db-shm", junk)
				wantRows(t, filepath.Join(r.dir, "memory.db"), 40)
			}
			if err := fz.Remove(); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(spool); len(ents) != 0 {
				t.Errorf("spool holds %d files after Remove", len(ents))
			}
		})
	}
}

// TestFreezeWaitsForWriter: while a writer holds a lock Freeze needs
// (EXCLUSIVE on the database: a rollback-mode commit, or a WAL connection
// in locking_mode=EXCLUSIVE), Freeze waits, within its budget, and then
// fails with ErrBusy leaving nothing behind; once the writer lets go, it
// succeeds and has the new rows.
func TestFreezeWaitsForWriter(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			brain, sh := newDB(t, m.pragma, 10)
			if m.wal {
				sh.exec("PRAGMA locking_mode=EXCLUSIVE")
				insert(sh, 1) // takes EXCLUSIVE, for good
			} else {
				sh.exec("BEGIN EXCLUSIVE")
				sh.exec("INSERT INTO rows(body) VALUES(randomblob(5000))")
				sh.exec("UPDATE meta SET n = n + 1 WHERE k = 'rows'")
			}
			spool := t.TempDir()
			const wait = 300 * time.Millisecond
			fz, err := Freeze(ctx, brain, "memory.db", spool, Options{Wait: wait})
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("Freeze while a writer holds EXCLUSIVE = %+v, %v; want ErrBusy", fz, err)
			}
			if ents, _ := os.ReadDir(spool); len(ents) != 0 {
				t.Errorf("a failed Freeze left %d files in the spool", len(ents))
			}
			if m.wal {
				sh.exec("PRAGMA locking_mode=NORMAL")
				sh.exec("SELECT count(*) FROM rows") // drops EXCLUSIVE
			} else {
				sh.exec("COMMIT")
			}
			fz, err = Freeze(ctx, brain, "memory.db", spool, Options{Wait: wait})
			if err != nil {
				t.Fatal(err)
			}
			r := snapshotAndRestore(t, ctx, brain, nil, fz)
			wantRows(t, filepath.Join(r.dir, "memory.db"), 11)
		})
	}
}

// TestFreezeMakesWriterWait: a commit that comes while Freeze holds a lock
// that writers need waits (SQLite's busy handler) and succeeds once Freeze
// lets go; the copy holds the database as it was before that transaction.
// In rollback mode the lock is SHARED, and the writer a read transaction
// that upgrades to a write meanwhile: SQLite calls no busy handler for that
// upgrade, so it must not be refused. In WAL mode it is the WAL write lock,
// taken only when the WAL index cannot be read (here: corrupted).
func TestFreezeMakesWriterWait(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			brain, _ := newDB(t, m.pragma, 10)
			dbPath := filepath.Join(brain, "memory.db")
			writer := openShell(t, dbPath)
			writer.exec("SELECT count(*) FROM rows") // connected and ready
			stage := stageShared
			if m.wal {
				stage = stageWrite
				// Both copies of the index header fail their checksum, as
				// after a connection died while writing it.
				f, err := os.OpenFile(dbPath+"-shm", os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, off := range []int64{40, 88} {
					if _, err := f.WriteAt([]byte("garbage!"), off); err != nil {
						t.Fatal(err)
					}
				}
				f.Close()
			} else {
				writer.exec("BEGIN")
				writer.exec("SELECT count(*) FROM rows") // a read transaction: SHARED
			}
			var stages []string
			defer func(old func(string)) { hook = old }(hook)
			hook = func(s string) {
				stages = append(stages, s)
				if s != stage {
					return
				}
				if m.wal {
					writer.send(map[string]any{"sql": "BEGIN IMMEDIATE"})
					// Nothing to watch while SQLite's busy handler polls
					// for the WAL write lock: give it time to try, so that
					// a lock that did not hold would show below.
					time.Sleep(300 * time.Millisecond)
				} else {
					writer.exec("INSERT INTO rows(body) VALUES(randomblob(3000))") // RESERVED
					writer.exec("UPDATE meta SET n = n + 1 WHERE k = 'rows'")
					writer.send(map[string]any{"sql": "COMMIT"})
					waitPending(t, dbPath) // the writer waits for EXCLUSIVE
				}
				select {
				case line := <-writer.lines:
					t.Errorf("the writer went ahead while the freeze held its lock: %s", line)
				default:
				}
			}
			fz, err := Freeze(ctx, brain, "memory.db", t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(stages, []string{stage}) {
				t.Fatalf("stages %q, want %q", stages, stage)
			}
			var r reply
			writer.next(&r)
			if !r.OK {
				t.Fatalf("the writer failed: %s", r.Err)
			}
			if m.wal {
				writer.exec("INSERT INTO rows(body) VALUES(randomblob(3000))")
				writer.exec("UPDATE meta SET n = n + 1 WHERE k = 'rows'")
				writer.exec("COMMIT")
			} else if !slices.Contains(fz.Hidden, "memory.db-journal") {
				t.Errorf("the journal of an open write transaction is in the snapshot: %+v", fz)
			}
			if fz.Hold <= 0 {
				t.Errorf("Hold = %v while a writer waited", fz.Hold)
			}
			t.Logf("writer waited %.0f ms; the freeze held its lock %v", r.MS, fz.Hold)
			restored := snapshotAndRestore(t, ctx, brain, nil, fz)
			wantRows(t, filepath.Join(restored.dir, "memory.db"), 10)
			wantRows(t, dbPath, 11)
		})
	}
}

// TestFreezeWALWritersGoOn: in WAL mode writers never wait for a freeze: a
// writer without any busy timeout commits between the moment Freeze reads
// the WAL index and the moment it copies the WAL, and also keeps a write
// transaction open across the whole freeze. The snapshot holds exactly the
// commits the index named.
func TestFreezeWALWritersGoOn(t *testing.T) {
	ctx := t.Context()
	brain, sh := newDB(t, "WAL", 10)
	dbPath := filepath.Join(brain, "memory.db")
	writer := openShell(t, dbPath)
	writer.exec("PRAGMA busy_timeout=0")
	sh.exec("BEGIN IMMEDIATE") // the WAL write lock, for the whole freeze
	sh.exec("INSERT INTO rows(body) VALUES(randomblob(3000))")
	calls := 0
	defer func(old func(string)) { hook = old }(hook)
	hook = func(s string) {
		if s != stageIndex {
			t.Errorf("stage %s", s)
			return
		}
		calls++
		sh.exec("UPDATE meta SET n = n + 1 WHERE k = 'rows'")
		sh.exec("COMMIT")    // frames after the ones the index names
		writer.exec("BEGIN") // and a read-then-write transaction, no busy handler
		writer.exec("SELECT count(*) FROM rows")
		writer.exec("INSERT INTO rows(body) VALUES(randomblob(3000))")
		writer.exec("UPDATE meta SET n = n + 1 WHERE k = 'rows'")
		writer.exec("COMMIT")
	}
	fz, err := Freeze(ctx, brain, "memory.db", t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || fz.Hold != 0 || fz.Files["memory.db-wal"] == "" {
		t.Fatalf("Frozen = %+v after %d index reads; want writers never held, the WAL copied", fz, calls)
	}
	restored := snapshotAndRestore(t, ctx, brain, nil, fz)
	wantRows(t, filepath.Join(restored.dir, "memory.db"), 10)
	wantRows(t, dbPath, 12)
}

// waitPending waits until some process holds SQLite's PENDING lock on db:
// a writer waiting for EXCLUSIVE.
func waitPending(t *testing.T, db string) {
	t.Helper()
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deadline := time.Now().Add(replyTimeout)
	for {
		lk := unix.Flock_t{Type: unix.F_RDLCK, Start: pendingByte, Len: 1}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
			t.Fatal(err)
		}
		if lk.Type == unix.F_WRLCK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never asked for EXCLUSIVE")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFreezeHotJournal: a writer that died after writing part of a
// transaction into the database file leaves a hot journal; the snapshot
// holds it, and the restore rolls the transaction back.
func TestFreezeHotJournal(t *testing.T) {
	ctx := t.Context()
	brain, sh := newDB(t, "DELETE", 10)
	sh.exec("PRAGMA cache_size=5") // pages: the transaction spills into the database file
	sh.exec("BEGIN IMMEDIATE")
	for range 200 {
		sh.exec("INSERT INTO rows(body) VALUES(randomblob(4000))")
	}
	sh.crash()
	if st, err := os.Stat(filepath.Join(brain, "memory.db-journal")); err != nil || st.Size() == 0 {
		t.Fatalf("no hot journal: %v", err)
	}
	fz, err := Freeze(ctx, brain, "memory.db", t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fz.Files["memory.db-journal"]; !ok {
		t.Fatalf("the hot journal is not in the snapshot: %+v", fz)
	}
	r := snapshotAndRestore(t, ctx, brain, nil, fz)
	wantRows(t, filepath.Join(r.dir, "memory.db"), 10)
}

// TestFreezeWALWithoutIndex: a WAL database nobody has open (its -shm
// gone) is copied under SHARED alone, with its WAL, which holds commits.
func TestFreezeWALWithoutIndex(t *testing.T) {
	ctx := t.Context()
	brain, sh := newDB(t, "WAL", 10)
	insert(sh, 5)
	sh.crash() // no checkpoint on close: the commits stay in the WAL
	if err := os.Remove(filepath.Join(brain, "memory.db-shm")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(brain, "memory.db-wal")); err != nil || st.Size() == 0 {
		t.Fatalf("no WAL: %v", err)
	}
	fz, err := Freeze(ctx, brain, "memory.db", t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !fz.WAL || fz.Hold != 0 || fz.Files["memory.db-wal"] == "" {
		t.Fatalf("Frozen = %+v; want WAL mode, its WAL, no writer held", fz)
	}
	r := snapshotAndRestore(t, ctx, brain, nil, fz)
	wantRows(t, filepath.Join(r.dir, "memory.db"), 15)
}

// TestFreezeHoldLimit: a locked pass that would keep writers waiting past
// MaxHold is abandoned, locks dropped and copies removed. In WAL mode
// writers never wait, so the bound never bites.
func TestFreezeHoldLimit(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			brain, _ := newDB(t, m.pragma, 300) // over a megabyte in either file
			spool := t.TempDir()
			fz, err := Freeze(t.Context(), brain, "memory.db", spool, Options{MaxHold: time.Nanosecond})
			if m.wal {
				if err != nil || fz.Hold != 0 {
					t.Fatalf("Freeze = %+v, %v; want success without holding writers", fz, err)
				}
				return
			}
			if !errors.Is(err, ErrHold) {
				t.Fatalf("Freeze = %v, want ErrHold", err)
			}
			if ents, _ := os.ReadDir(spool); len(ents) != 0 {
				t.Errorf("an abandoned Freeze left %d files in the spool", len(ents))
			}
			// The locks are gone: a writer commits at once.
			sh := openShell(t, filepath.Join(brain, "memory.db"))
			sh.exec("PRAGMA busy_timeout=0")
			insert(sh, 1)
		})
	}
}

func TestFreezeRefuses(t *testing.T) {
	ctx := t.Context()
	brain, _ := newDB(t, "WAL", 1)
	if _, err := Freeze(ctx, brain, "memory.db", filepath.Join(brain, "skills"), Options{}); err == nil {
		t.Error("Freeze put its copies inside the tree")
	}
	writeFile(t, brain, "text.db", []byte("no database here, just a long enough text file for a header......................................"))
	if _, err := Freeze(ctx, brain, "text.db", t.TempDir(), Options{}); !errors.Is(err, ErrNotDatabase) {
		t.Errorf("Freeze(text file) = %v, want ErrNotDatabase", err)
	}
	if _, err := Freeze(ctx, brain, "missing.db", t.TempDir(), Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Freeze(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := Freeze(ctx, brain, "../memory.db", t.TempDir(), Options{}); err == nil {
		t.Error("Freeze(../memory.db) succeeded")
	}
	if err := os.Symlink("memory.db", filepath.Join(brain, "link.db")); err != nil {
		t.Fatal(err)
	}
	if _, err := Freeze(ctx, brain, "link.db", t.TempDir(), Options{}); err == nil {
		t.Error("Freeze followed a symlink")
	}
	// A WAL that SQLite would follow but a snapshot cannot hold.
	brain, _ = newDB(t, "DELETE", 1)
	if err := os.Symlink("system.md", filepath.Join(brain, "memory.db-wal")); err != nil {
		t.Fatal(err)
	}
	if _, err := Freeze(ctx, brain, "memory.db", t.TempDir(), Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Freeze with a symlinked WAL = %v, want ErrUnsupported", err)
	}
}
