package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
	"github.com/hermesd/hermesd/internal/hash"
	"github.com/hermesd/hermesd/internal/sqlite"
)

// freezer keeps the SQLite databases of a brain consistent while they are
// hashed and snapshotted: each changed database family is copied under
// SQLite's own locks into the spool (sqlite.Freeze), and the pass reads
// the copies through an overlay instead of racing the writer. Only the
// sync goroutine uses it.
type freezer struct {
	a *Agent
	// recent are the databases frozen by the previous pass: they are
	// frozen again (a database being written keeps changing).
	recent map[string]bool
	// live are databases that cannot be frozen (another platform, a
	// writer ignoring SQLite's locks): they are read live, and a write in
	// progress holds the watcher's batches back as before.
	live map[string]bool
}

func newFreezer(a *Agent) *freezer {
	return &freezer{a: a, recent: map[string]bool{}, live: map[string]bool{}}
}

// frozenPass is one pass's copies.
type frozenPass struct {
	dir    string
	frozen []*sqlite.Frozen
	ov     *fsys.Overlay
	hold   time.Duration // the longest time writers were kept waiting
}

// release removes the copies.
func (p *frozenPass) release() {
	if p == nil || p.dir == "" {
		return
	}
	os.RemoveAll(p.dir)
}

// freeze copies the databases the pass must read consistently: those whose
// family changed (paths), those frozen last time, and on a full pass every
// database. A database that cannot be frozen now is read live (the pass
// then fails as changed if it is written meanwhile, and is retried).
func (f *freezer) freeze(ctx context.Context, paths []string, all bool) (*frozenPass, error) {
	candidates := make([]string, 0, len(paths)+len(f.recent))
	if all {
		for _, fl := range f.a.cache.Files() {
			candidates = append(candidates, fl.Path)
		}
		if !f.a.cache.Validated() {
			// Nothing hashed yet (a first snapshot that hashes as it
			// reads): the names come from the directory itself.
			names, err := hash.Paths(ctx, f.a.cfg.BrainDir)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, names...)
		}
	}
	candidates = append(candidates, paths...)
	for db := range f.recent {
		candidates = append(candidates, db)
	}
	dbs, err := sqlite.Find(f.a.cfg.BrainDir, candidates)
	if err != nil || len(dbs) == 0 {
		f.recent = map[string]bool{}
		return nil, nil
	}
	var want []string
	for _, db := range dbs {
		if f.live[db] {
			continue
		}
		if all || f.recent[db] || familyChanged(db, paths) {
			want = append(want, db)
		}
	}
	if len(want) == 0 {
		f.recent = map[string]bool{}
		return nil, nil
	}
	dir, err := os.MkdirTemp(f.a.deps.State.SpoolDir(), f.a.cfg.ID+"-sqlite-")
	if err != nil {
		return nil, err
	}
	pass := &frozenPass{dir: dir}
	recent := map[string]bool{}
	for _, db := range want {
		fz, err := sqlite.Freeze(ctx, f.a.cfg.BrainDir, db, dir, sqlite.Options{})
		switch {
		case err == nil:
			pass.frozen = append(pass.frozen, fz)
			recent[db] = true
			pass.hold = max(pass.hold, fz.Hold)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, sqlite.ErrNotDatabase):
		case errors.Is(err, sqlite.ErrUnsupported), errors.Is(err, sqlite.ErrNotFrozen):
			f.live[db] = true
			f.a.log.Warn("cannot take consistent copies of this SQLite database; it is read live", "db", db, "reason", err)
		case errors.Is(err, sqlite.ErrBusy), errors.Is(err, sqlite.ErrHold):
			// Busy for now: read live this pass, try again next time.
			recent[db] = true
			f.a.log.Debug("SQLite database busy; read live this pass", "db", db, "reason", err)
		default:
			if ctx.Err() != nil {
				pass.release()
				return nil, ctx.Err()
			}
			recent[db] = true
			f.a.log.Debug("SQLite database not frozen this pass", "db", db, "error", err)
		}
	}
	f.recent = recent
	if len(pass.frozen) == 0 {
		pass.release()
		return nil, nil
	}
	if pass.ov, err = sqlite.Overlay(pass.frozen...); err != nil {
		pass.release()
		return nil, err
	}
	return pass, nil
}

// familyChanged reports whether db or one of its side files is in paths.
func familyChanged(db string, paths []string) bool {
	for _, p := range paths {
		if p == db || strings.HasPrefix(p, db+"-") && isSideFile(path.Base(p)) {
			return true
		}
	}
	return false
}

func isSideFile(name string) bool {
	for _, s := range []string{"-wal", "-journal", "-shm"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// liveDatabases reports whether some database of the brain is read live
// (cannot be frozen): only then does a write in progress hold batches.
func (f *freezer) liveDatabases() bool { return len(f.live) > 0 || !sqlite.Supported() }
