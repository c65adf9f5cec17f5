package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
	"golang.org/x/sys/unix"
)

// Lock bytes of SQLite's unix VFS (os_unix.c). On the database file: a
// reader holds a read lock on the SHARED range; a writer holds a write
// lock on RESERVED for its whole transaction, then PENDING (which keeps new
// readers out) and a write lock on the whole SHARED range (EXCLUSIVE) to
// write the database file. A reader takes SHARED by read-locking PENDING
// first and dropping it once it has the range, so it never slips in while
// a writer waits for EXCLUSIVE.
const (
	pendingByte  = 0x40000000
	reservedByte = pendingByte + 1
	sharedFirst  = pendingByte + 2
	sharedSize   = 510
)

// WAL-index locks (wal.c, os_unix.c): byte 120+i of the -shm file is lock
// i. A writer holds WRITE for its whole write transaction; a checkpoint,
// the only thing that writes the database file in WAL mode, holds CKPT;
// every connection read-locks DMS while it has the -shm open.
const (
	shmLockBase = 120 // (22 + SQLITE_SHM_NLOCK) * 4
	shmWrite    = shmLockBase + 0
	shmCkpt     = shmLockBase + 1
	shmDMS      = shmLockBase + 8 // read-locked by every connection with the -shm open
)

// headerSize is the database header; bytes 18 and 19 are the file format
// write and read versions, 2 for WAL.
const headerSize = 100

// chunk is the unit of the locked copy: the MaxHold bound is checked
// before each one. block is the unit compared with the first pass and
// rewritten when it differs (SQLite's default page size).
const (
	chunk = 1 << 20
	block = 4 << 10
)

// Stages at which Freeze calls hook (tests use it to act at that moment).
const (
	stageShared = "shared" // rollback mode: SHARED held, writers wait to commit
	stageIndex  = "index"  // WAL mode: the WAL index read, the WAL not yet copied
	stageWrite  = "write"  // WAL mode, fallback: the WAL write lock held
)

var hook = func(stage string) {}

// errRetry: the attempt saw something that needs a fresh start (a -shm
// file appeared, or the database was replaced).
var errRetry = errors.New("retry")

// Freeze makes a consistent copy of the live SQLite database db (relative
// to root, never reached through a symlink) and of the side files a restore
// needs, in dir (an existing directory outside root, on any file system:
// the daemon's spool). It holds SQLite's
// own locks, exactly as SQLite's unix VFS takes them, only while it copies:
// see the package documentation for the protocol and the bound on how long
// writers wait.
//
// Errors: ErrBusy (locked for all of opts.Wait: try later), ErrHold (the
// locked copy took longer than opts.MaxHold: abandoned), ErrNotFrozen (a
// writer ignores SQLite's locks), ErrUnsupported, ErrNotDatabase, an error
// matching fs.ErrNotExist when db is gone, or the context's error. On error
// no copy is left in dir.
func Freeze(ctx context.Context, root, db, dir string, opts Options) (*Frozen, error) {
	if err := fsys.CheckName(db); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if absRoot, err := filepath.Abs(root); err == nil {
		if rel, err := filepath.Rel(absRoot, absDir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("sqlite: copies of %s would land inside the tree (%s)", db, dir)
		}
	}
	r, err := fsys.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	defer r.Close()
	c := &copier{
		root:   r,
		dir:    absDir,
		opts:   opts.withDefaults(),
		fz:     &Frozen{DB: db, Files: map[string]string{}},
		copies: map[string]*os.File{},
		a:      make([]byte, chunk),
		b:      make([]byte, chunk),
	}
	err = c.run(ctx)
	for _, f := range c.copies {
		f.Close()
	}
	if err != nil {
		for _, f := range c.copies {
			os.Remove(f.Name())
		}
		return nil, fmt.Errorf("sqlite: %s: %w", db, err)
	}
	return c.fz, nil
}

type copier struct {
	root     fsys.Root
	dir      string
	opts     Options
	fz       *Frozen
	copies   map[string]*os.File // family path → its copy, kept across attempts
	deadline time.Time           // end of the Wait budget, set by the first wait
	a, b     []byte
}

func (c *copier) run(ctx context.Context) error {
	for {
		c.fz.Tries++
		err := c.attempt(ctx)
		if !errors.Is(err, errRetry) {
			return err
		}
		if !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
			return fmt.Errorf("%w: it kept changing shape (a connection opened or the file was replaced) for %v", ErrBusy, c.opts.Wait)
		}
	}
}

// attempt copies the family once: an unlocked first pass, then the locked
// pass that rewrites what changed meanwhile.
func (c *copier) attempt(ctx context.Context) error {
	db := c.fz.DB
	wal, shm, journal := family(db)
	dbf, err := c.root.OpenFile(db, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer dbf.Close() // also drops every lock taken on it
	dbSt, err := fstat(dbf)
	if err != nil {
		return err
	}
	if dbSt.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: not a regular file", ErrNotDatabase)
	}
	var hdr [headerSize]byte
	if n, err := dbf.ReadAt(hdr[:len(Magic)], 0); n < len(Magic) || !bytes.Equal(hdr[:len(Magic)], []byte(Magic)) {
		if err != nil && err != io.EOF {
			return err
		}
		return ErrNotDatabase
	}

	// First pass, without locks: most of the bytes, so that the locked pass
	// only compares (reads from the page cache) and rewrites what changed.
	if err := c.pass(ctx, db, dbf, time.Time{}, false, -1); err != nil {
		return err
	}
	for _, side := range []string{wal, journal} {
		if err := c.prepass(ctx, side); err != nil {
			return err
		}
	}

	if err := c.wait(ctx, "a connection holding EXCLUSIVE (committing, or in locking_mode=EXCLUSIVE)", func() (bool, error) { return lockShared(dbf) }); err != nil {
		return err
	}
	sharedAt := time.Now()
	if n, err := dbf.ReadAt(hdr[:], 0); n < len(hdr) || !bytes.Equal(hdr[:len(Magic)], []byte(Magic)) {
		if err != nil && err != io.EOF {
			return err
		}
		return ErrNotDatabase
	}
	// SQLite opens a database with a -wal file in WAL mode, whatever its
	// header says (right after PRAGMA journal_mode=WAL the new header is
	// still in the WAL).
	_, err = c.root.Lstat(wal)
	if err != nil && !fsys.IsGone(err) {
		return err
	}
	c.fz.WAL = err == nil || hdr[18] == 2 || hdr[19] == 2
	// The -shm is always left out; a directory there would take files
	// with it.
	if st, err := c.root.Lstat(shm); err == nil && !st.Mode.IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsupported, shm)
	}

	var hidden []string
	if c.fz.WAL {
		hidden, err = c.lockedWAL(ctx, dbf)
	} else {
		hidden, err = c.lockedRollback(ctx, dbf, sharedAt)
	}
	if err != nil {
		return err
	}
	// Still under SHARED: the path must still name the file we copied.
	if cur, err := c.root.Lstat(db); err != nil || cur.Ino != dbSt.Ino || cur.Dev != dbSt.Dev {
		return errRetry
	}
	if err := unlock(dbf, 0, 0); err != nil {
		return err
	}
	if !c.fz.WAL {
		c.fz.Hold = time.Since(sharedAt)
	}

	c.fz.Hidden = append(hidden, shm)
	c.fz.Files, c.fz.Bytes = map[string]string{}, 0
	for p, f := range c.copies {
		if slices.Contains(hidden, p) {
			f.Close()
			os.Remove(f.Name())
			delete(c.copies, p)
			continue
		}
		st, err := fstat(f)
		if err != nil {
			return err
		}
		c.fz.Files[p] = f.Name()
		c.fz.Bytes += st.Size
	}
	return nil
}

// lockedRollback is the locked pass of a database in rollback-journal
// mode: SHARED is held, so no writer can write the database file (that
// takes EXCLUSIVE) and the file holds the last commit.
func (c *copier) lockedRollback(ctx context.Context, dbf *os.File, since time.Time) (hidden []string, err error) {
	db := c.fz.DB
	wal, _, journal := family(db)
	hook(stageShared)
	deadline := since.Add(c.opts.MaxHold)
	if err := c.pass(ctx, db, dbf, deadline, true, -1); err != nil {
		return nil, err
	}
	hidden = []string{wal}
	// A journal is needed only without an open write transaction: then it
	// is a leftover, empty or zeroed (journal_mode TRUNCATE, PERSIST) or
	// hot (a writer died after writing part of a transaction into the
	// database file), which a restore must roll back. A writer holding
	// RESERVED is writing its journal: that undo log of changes the
	// database file does not have yet is left out. RESERVED is only looked
	// at, never locked: a lock there would make a connection that upgrades
	// a read transaction to a write fail at once with SQLITE_BUSY (SQLite
	// calls no busy handler for that upgrade). A transaction that starts
	// and ends between the two looks can leave a torn copy of its journal,
	// which is harmless: the pages it records are those of the database
	// file, which it never wrote, so rolling it back changes nothing.
	writing, err := heldByOther(dbf, reservedByte, unix.F_RDLCK)
	if err != nil || writing {
		return append(hidden, journal), err
	}
	ok, err := c.passLocked(ctx, journal, deadline)
	if err != nil {
		return nil, err
	}
	if writing, err = heldByOther(dbf, reservedByte, unix.F_RDLCK); err != nil {
		return nil, err
	}
	if !ok || writing {
		hidden = append(hidden, journal)
	}
	return hidden, nil
}

// lockedWAL is the locked pass of a database in WAL mode. SHARED on the
// database keeps a closing connection from checkpointing and deleting the
// WAL (it takes EXCLUSIVE, and then ignores the WAL-index locks); CKPT
// keeps checkpoints out. Nothing writes the database file then, while
// writers go on appending to the WAL. The WAL is copied up to the last
// commit the index names: frames up to there are never rewritten until the
// WAL restarts, and it cannot restart while frames remain to be
// checkpointed and CKPT is held. Writers never wait, unless the index
// cannot be read, when the WAL is copied under the WAL write lock instead.
func (c *copier) lockedWAL(ctx context.Context, dbf *os.File) (hidden []string, err error) {
	db := c.fz.DB
	wal, shm, journal := family(db)
	shmf, err := c.root.OpenFile(shm, os.O_RDWR)
	switch {
	case err == nil:
		defer shmf.Close()
		if err := c.wait(ctx, "a checkpoint", func() (bool, error) { return trylock(shmf, unix.F_WRLCK, shmCkpt, 1) }); err != nil {
			return nil, err
		}
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%w: the WAL index %s is a symlink", ErrUnsupported, shm)
	case fsys.IsGone(err):
		shmf = nil
	case errors.Is(err, os.ErrPermission) || errors.Is(err, unix.EROFS):
		return nil, fmt.Errorf("%w: the WAL index %s cannot be opened for locking: %v", ErrUnsupported, shm, err)
	default:
		return nil, err
	}
	if err := c.pass(ctx, db, dbf, time.Time{}, true, -1); err != nil {
		return nil, err
	}
	if ok, err := c.passLocked(ctx, journal, time.Time{}); err != nil { // a leftover nobody writes
		return nil, err
	} else if !ok {
		hidden = append(hidden, journal)
	}

	whole := func() error { // the whole WAL, which nobody can write
		ok, err := c.passLocked(ctx, wal, time.Time{})
		if !ok && err == nil {
			hidden = append(hidden, wal)
		}
		return err
	}
	if shmf == nil {
		// No connection has the database open: an open one keeps its
		// -shm, and only a holder of EXCLUSIVE deletes it. Start again if
		// one appears meanwhile.
		if err := whole(); err != nil {
			return nil, err
		}
		if _, err := c.root.Lstat(shm); !fsys.IsGone(err) {
			return nil, errRetry
		}
		return hidden, nil
	}
	live, err := heldByOther(shmf, shmDMS, unix.F_WRLCK)
	if err != nil {
		return nil, err
	}
	if !live {
		// The index is stale: the next connection will find nobody holding
		// its dead-man switch, reset it and rebuild it from the WAL, which
		// takes CKPT. Until then nobody can write.
		return hidden, whole()
	}
	ix, backfilled, ok, err := readIndex(ctx, shmf)
	if err != nil {
		return nil, err
	}
	if ok && backfilled >= ix.mxFrame {
		// Every commit is in the database (the WAL may be restarting).
		hook(stageIndex)
		return append(hidden, wal), nil
	}
	if ok {
		hook(stageIndex)
		ok, err = c.walPrefix(ctx, wal, ix)
		if err != nil || ok {
			return hidden, err
		}
	}
	// The index cannot be read (a connection died while updating it), or
	// the WAL disagrees with it: copy the WAL under the write lock.
	if err := c.wait(ctx, "a writer's transaction", func() (bool, error) { return trylock(shmf, unix.F_WRLCK, shmWrite, 1) }); err != nil {
		return nil, err
	}
	since := time.Now()
	defer func() { c.fz.Hold = time.Since(since) }()
	hook(stageWrite)
	ok, err = c.passLocked(ctx, wal, since.Add(c.opts.MaxHold))
	if err != nil {
		return nil, err
	}
	if !ok {
		hidden = append(hidden, wal)
	}
	return hidden, unlock(shmf, shmWrite, 1) // writers go on
}

// walPrefix copies the WAL up to the last commit ix names, after checking
// that the WAL agrees with the index, and checks the copy again. ok is
// false when they do not agree.
func (c *copier) walPrefix(ctx context.Context, wal string, ix walIndex) (ok bool, err error) {
	f, err := c.root.OpenFile(wal, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return false, fmt.Errorf("%w: %s is a symlink", ErrUnsupported, wal)
		}
		if fsys.IsGone(err) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	agree := func(f *os.File) (int64, bool, error) {
		var hdr [walHeaderSize]byte
		var frame [frameHeaderSize]byte
		if _, err := f.ReadAt(hdr[:], 0); err != nil {
			return 0, false, ignoreEOF(err)
		}
		if _, err := f.ReadAt(frame[:], frameOffset(ix, ix.mxFrame)); err != nil {
			return 0, false, ignoreEOF(err)
		}
		n, ok := walPrefix(ix, hdr[:], frame[:])
		return n, ok, nil
	}
	n, ok, err := agree(f)
	if err != nil || !ok {
		return false, err
	}
	if err := c.pass(ctx, wal, f, time.Time{}, true, n); err != nil {
		return false, err
	}
	// The frames copied must still be the ones the index named.
	_, ok, err = agree(c.copies[wal])
	return ok, err
}

func ignoreEOF(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// readIndex reads the WAL-index header and nBackfill, the way SQLite's
// readers do: retry while a writer is updating the header, and accept it
// only if nBackfill did not change around it (a WAL restart resets both).
// ok is false if no consistent header turned up in a few tries.
func readIndex(ctx context.Context, f *os.File) (ix walIndex, backfilled uint32, ok bool, err error) {
	var b [indexReadSize]byte
	for try := 0; try < 20; try++ {
		if try > 0 {
			if err := sleep(ctx, 100*time.Microsecond); err != nil {
				return walIndex{}, 0, false, err
			}
		}
		if _, err := f.ReadAt(b[nBackfillOffset:], nBackfillOffset); err != nil {
			if err == io.EOF {
				continue // being reset by a new connection
			}
			return walIndex{}, 0, false, err
		}
		n1 := nBackfill(b[:])
		if _, err := f.ReadAt(b[:nBackfillOffset], 0); err != nil {
			if err == io.EOF {
				continue
			}
			return walIndex{}, 0, false, err
		}
		ix, ok := parseIndex(b[:nBackfillOffset])
		if _, err := f.ReadAt(b[nBackfillOffset:], nBackfillOffset); err != nil && err != io.EOF {
			return walIndex{}, 0, false, err
		}
		if ok && nBackfill(b[:]) == n1 {
			return ix, n1, true, nil
		}
	}
	return walIndex{}, 0, false, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// passLocked makes the locked pass over the side file rel; ok is false if
// it does not exist. A symlink there is refused: SQLite would follow it,
// the hasher does not, so no snapshot could hold what a restore needs.
func (c *copier) passLocked(ctx context.Context, rel string, deadline time.Time) (ok bool, err error) {
	f, err := c.root.OpenFile(rel, os.O_RDONLY)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return false, fmt.Errorf("%w: %s is a symlink", ErrUnsupported, rel)
		}
		if fsys.IsGone(err) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	st, err := fstat(f)
	if err != nil {
		return false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, fmt.Errorf("%w: %s is not a regular file", ErrUnsupported, rel)
	}
	return true, c.pass(ctx, rel, f, deadline, true, -1)
}

// prepass makes the unlocked pass over the side file rel if it is there
// (the locked pass decides what to make of anything else).
func (c *copier) prepass(ctx context.Context, rel string) error {
	f, err := c.root.OpenFile(rel, os.O_RDONLY)
	if err != nil {
		if fsys.IsGone(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	if st, err := fstat(f); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return err
	}
	return c.pass(ctx, rel, f, time.Time{}, false, -1)
}

// pass brings the copy of rel up to date with src, rewriting only the
// blocks that differ. Locked, src must not change: its stat is compared
// before and after, and a non-zero deadline bounds the pass (ErrHold).
// Unlocked, src may change under it; the locked pass fixes that up. With
// prefix >= 0 (locked) only that many bytes are copied, and must not change
// while the rest of the file may.
func (c *copier) pass(ctx context.Context, rel string, src *os.File, deadline time.Time, locked bool, prefix int64) error {
	dst := c.copies[rel]
	if dst == nil {
		f, err := os.CreateTemp(c.dir, path.Base(rel)+".*")
		if err != nil {
			return err
		}
		c.copies[rel] = f
		dst = f
	}
	before, err := fstat(src)
	if err != nil {
		return err
	}
	// Up to the size at the start: what an unlocked source grows by
	// meanwhile is the locked pass's to copy.
	size := before.Size
	if prefix >= 0 {
		size = prefix
	}
	var off int64
	for off < size {
		if err := ctx.Err(); err != nil {
			return err
		}
		if locked && !deadline.IsZero() && time.Now().After(deadline) {
			return fmt.Errorf("%w: more than %v to copy %s", ErrHold, c.opts.MaxHold, rel)
		}
		want := min(int64(len(c.a)), size-off)
		n, err := src.ReadAt(c.a[:want], off)
		if err != nil && err != io.EOF {
			return err
		}
		if int64(n) < want && locked {
			return fmt.Errorf("%w: %s shrank", ErrNotFrozen, rel)
		}
		patched, err := patch(dst, off, c.a[:n], c.b[:n])
		if err != nil {
			return err
		}
		if locked {
			c.fz.Patched += patched
		}
		off += int64(n)
		if int64(n) < want {
			break // unlocked, and it shrank
		}
	}
	if err := dst.Truncate(off); err != nil {
		return err
	}
	if !locked {
		return nil
	}
	after, err := fstat(src)
	if err != nil {
		return err
	}
	if prefix < 0 && (after.Size != before.Size || after.Mtim != before.Mtim || after.Ctim != before.Ctim) {
		return fmt.Errorf("%w: %s was written", ErrNotFrozen, rel)
	}
	// The copy stands for the database in snapshots (fsys.Overlay): it
	// shows its mode, special bits included, and its modification time.
	if err := dst.Chmod(fsys.FromUnixMode(after.Mode)); err != nil {
		return err
	}
	return fsys.Futimens(dst, time.Unix(after.Mtim.Unix()))
}

// patch writes data at off into dst where dst's bytes differ (compared by
// block, through scratch), and returns how many bytes it wrote.
func patch(dst *os.File, off int64, data, scratch []byte) (int64, error) {
	m, err := dst.ReadAt(scratch, off)
	if err != nil && err != io.EOF {
		return 0, err
	}
	var written int64
	runStart := -1
	flush := func(end int) error {
		if runStart < 0 {
			return nil
		}
		if _, err := dst.WriteAt(data[runStart:end], off+int64(runStart)); err != nil {
			return err
		}
		written += int64(end - runStart)
		runStart = -1
		return nil
	}
	for i := 0; i < len(data); i += block {
		end := min(i+block, len(data))
		same := end <= m && bytes.Equal(data[i:end], scratch[i:end])
		if same {
			if err := flush(i); err != nil {
				return written, err
			}
		} else if runStart < 0 {
			runStart = i
		}
	}
	return written, flush(len(data))
}

// wait retries try until it succeeds, within the Freeze's Wait budget.
// Polling, not F_OFD_SETLKW: a blocked lock request cannot be given up
// when the budget ends, and SQLite itself polls the same way.
func (c *copier) wait(ctx context.Context, holder string, try func() (bool, error)) error {
	start := time.Now()
	if c.deadline.IsZero() {
		c.deadline = start.Add(c.opts.Wait)
	}
	defer func() { c.fz.Wait += time.Since(start) }()
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 2*time.Millisecond) {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if !time.Now().Before(c.deadline) {
			return fmt.Errorf("%w: %s held SQLite's lock for %v", ErrBusy, holder, c.opts.Wait)
		}
		if err := sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// lockShared takes SQLite's SHARED lock: read-lock PENDING (refused while
// a writer holds or waits for EXCLUSIVE), read-lock the SHARED range, drop
// PENDING.
func lockShared(f *os.File) (bool, error) {
	ok, err := trylock(f, unix.F_RDLCK, pendingByte, 1)
	if !ok || err != nil {
		return false, err
	}
	ok, err = trylock(f, unix.F_RDLCK, sharedFirst, sharedSize)
	if uerr := unlock(f, pendingByte, 1); err == nil {
		err = uerr
	}
	return ok && err == nil, err
}

// trylock takes an open-file-description lock without waiting; false means
// another process holds a conflicting lock. OFD locks belong to the open
// file, not the process, so no other descriptor of ours closing the same
// file can drop them (classic POSIX locks would go), and they conflict with
// the POSIX locks SQLite takes.
func trylock(f *os.File, typ int16, start, n int64) (bool, error) {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: start, Len: n}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		switch err {
		case nil:
			return true, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.EACCES:
			return false, nil
		case unix.EINVAL:
			return false, fmt.Errorf("%w: no open file description locks (Linux 3.15 or later): %v", ErrUnsupported, err)
		}
		return false, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
}

// heldByOther reports whether another process holds a lock on the byte at
// off that conflicts with a lock of type typ (F_RDLCK: a write lock is held;
// F_WRLCK: any lock). F_OFD_GETLK sees POSIX and OFD locks alike.
func heldByOther(f *os.File, off int64, typ int16) (bool, error) {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: off, Len: 1}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk)
		switch err {
		case nil:
			return lk.Type != unix.F_UNLCK, nil
		case unix.EINTR:
			continue
		}
		return false, fmt.Errorf("test lock on %s: %w", f.Name(), err)
	}
}

// unlock drops our locks on n bytes from start (n == 0: to the end and
// beyond).
func unlock(f *os.File, start, n int64) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: start, Len: n}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("unlock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

// family returns the database's side files.
func family(db string) (wal, shm, journal string) {
	return db + walSuffix, db + shmSuffix, db + journalSuffix
}

func fstat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstat(int(f.Fd()), &st)
		if err != unix.EINTR {
			return st, err
		}
	}
}

// Supported reports whether Freeze can work on this platform.
func Supported() bool { return true }
