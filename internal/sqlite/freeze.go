package sqlite

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

var (
	// ErrBusy: a writer or a checkpointer held SQLite's locks for all of
	// Options.Wait. Try again later.
	ErrBusy = errors.New("sqlite: database stayed locked")
	// ErrHold: the copy could not be finished within Options.MaxHold while
	// writers waited, so it was abandoned. A later try may be faster (a
	// warmer page cache); a database that is always too big for the bound
	// is better left to detect-and-retry.
	ErrHold = errors.New("sqlite: copy would keep writers waiting too long")
	// ErrNotFrozen: a file of the database changed while its locks were
	// held, so some process writes it without SQLite's locking (the
	// unix-none or unix-dotfile VFS, nolock=1, or not SQLite at all).
	// Freezing cannot work for it.
	ErrNotFrozen = errors.New("sqlite: database changed while its locks were held")
	// ErrUnsupported: this system cannot take SQLite's locks the way
	// Freeze must (no open-file-description locks, or the -shm file is not
	// writable by this process). Fall back to detect-and-retry.
	ErrUnsupported = errors.New("sqlite: cannot freeze a database here")
	// ErrNotDatabase: the file is not a SQLite 3 database (yet).
	ErrNotDatabase = errors.New("sqlite: not a SQLite database")
)

// Options bounds a Freeze.
type Options struct {
	// Wait bounds the total time spent waiting for SQLite's locks (a
	// rollback-mode writer committing, a checkpoint running); past it
	// Freeze fails with ErrBusy. 0 means 2 s.
	Wait time.Duration
	// MaxHold bounds how long Freeze keeps writers waiting: the copy made
	// under the lock that blocks them is abandoned (ErrHold) once it has
	// taken this long. 0 means 1 s. Keep it well below the writers' busy
	// timeout.
	MaxHold time.Duration
}

func (o Options) withDefaults() Options {
	if o.Wait <= 0 {
		o.Wait = 2 * time.Second
	}
	if o.MaxHold <= 0 {
		o.MaxHold = time.Second
	}
	return o
}

// Frozen is a consistent copy of one database family, as SQLite would see
// it at one instant: the database and the side files a restore needs.
type Frozen struct {
	// DB is the database's path relative to the root.
	DB string
	// WAL reports whether the database was in WAL mode.
	WAL bool
	// Files maps each family path the snapshot holds to its copy (an
	// absolute path); Hidden lists the family paths it leaves out. Together
	// they cover the database and its -wal, -shm and -journal.
	Files  map[string]string
	Hidden []string
	// Bytes is the size of the copies; Patched counts the bytes copied
	// again under the locks (what changed since the unlocked first pass).
	Bytes   int64
	Patched int64
	// Wait is the time spent waiting for SQLite's locks.
	Wait time.Duration
	// Hold is how long writers were kept from committing: in rollback
	// mode the whole locked copy; in WAL mode none, unless the WAL index
	// could not be read and the -wal was copied under the write lock.
	Hold time.Duration
	// Tries counts the attempts (a database whose -shm appeared, or that
	// was replaced, during an attempt is tried again).
	Tries int
}

// Remove deletes the copies.
func (f *Frozen) Remove() error {
	var errs []error
	for _, p := range f.Files {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Overlay returns the fsys.Overlay that shows the frozen copies in place of
// the live database families. Hash and archive through it, then Remove the
// copies.
func Overlay(frozen ...*Frozen) (*fsys.Overlay, error) {
	subst := map[string]string{}
	var hide []string
	for _, f := range frozen {
		maps.Copy(subst, f.Files)
		hide = append(hide, f.Hidden...)
	}
	ov, err := fsys.NewOverlay(subst, hide)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return ov, nil
}
