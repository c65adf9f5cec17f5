// Package sqlite takes consistent copies of live SQLite databases in a
// brain, without SQLite: it holds SQLite's own file locks, exactly as
// SQLite's unix VFS takes them, for as long as it copies, as Litestream
// does instead of racing the writer.
//
// A brain whose agent keeps writing its memory.db is never still long
// enough for hash-then-archive to see one state (the snapshot is discarded
// as changed, retried, backed off). With [Freeze] the daemon copies each
// database family into its spool, consistent as of one instant, and hashes
// and archives the brain through an fsys.Overlay ([Overlay]) that shows the
// copies in place of the live files. The live database goes on changing;
// the snapshot does not.
//
// # Use
//
//	dbs, _ := sqlite.Find(brain, knownPaths)   // cheap: names, then 16 bytes each
//	var frozen []*sqlite.Frozen
//	for _, db := range dbs {
//		fz, err := sqlite.Freeze(ctx, brain, db, spoolDir, sqlite.Options{})
//		// ErrBusy, ErrHold: retry later; ErrUnsupported, ErrNotFrozen:
//		// leave this database live (detect-and-retry); gone: skip.
//		frozen = append(frozen, fz)
//	}
//	ov, _ := sqlite.Overlay(frozen...)
//	res, _ := cache.UpdateOverlay(ctx, changed, ov) // the bundle hash
//	tarball.Write(ctx, w, brain, tarball.WriteOptions{Overlay: ov})
//	for _, fz := range frozen { fz.Remove() }
//
// The locks are held only inside Freeze; the copies stay valid until
// Removed, however long hashing, archiving and uploading take.
//
// # Locks
//
// Locks are Linux open-file-description locks (F_OFD_SETLK): they conflict
// with the POSIX locks SQLite takes, and they belong to the open file, so
// no other descriptor of this process closing the same file (the hasher
// reading the live database, say) can drop them, as it would drop a
// classic POSIX lock. Every lock is tried without blocking and retried
// (50 µs, doubling to 2 ms) within Options.Wait, as SQLite's own busy
// handler does; a lock still refused then is ErrBusy. Elsewhere Freeze
// always returns ErrUnsupported.
//
// Rollback-journal mode (header bytes 18 and 19 are 1, and no -wal file):
// take SHARED on the database file (read-lock the PENDING byte at
// 0x40000000, read-lock the 510-byte SHARED range at 0x40000002, drop
// PENDING), exactly what any SQLite reader holds: no writer can write the
// database file (that needs EXCLUSIVE), so it holds the last commit.
// Writers run their transactions meanwhile and wait, in their busy
// handler, to commit. The RESERVED byte is only tested (F_OFD_GETLK), to
// tell whether a write transaction is open, never locked: SQLite calls no
// busy handler when a read transaction upgrades to a write, so a lock
// there would make such a writer fail at once with SQLITE_BUSY.
//
// WAL mode (bytes 18/19 are 2, or a -wal file exists, as SQLite decides):
// take SHARED on the database file (so that no closing connection takes
// EXCLUSIVE to checkpoint and delete the WAL, which in that mode ignores
// the WAL-index locks), then the checkpoint lock (byte 121 of the -shm
// file, write lock). Now nothing writes the database file, which is copied
// while writers go on appending to the WAL. Then read the WAL-index header
// from the -shm the way SQLite's readers do (two copies that must match,
// with their checksum) for mxFrame, the last frame of the last commit, and
// nBackfill, the frames already in the database; check the WAL against it
// (salts, page size, and frame mxFrame a commit frame with the index's
// checksum); and copy the WAL up to that frame. Frames up to mxFrame are
// never rewritten until the WAL restarts, and it cannot restart while
// nBackfill < mxFrame and no checkpoint can run; if nBackfill ≥ mxFrame
// every commit is in the database copy and the WAL is left out. The
// database copy predates the WAL copy and no checkpoint ran between them,
// so every page the database copy lacks is in the WAL copy. Writers never
// wait for this, not even a read transaction that upgrades to a write
// (which SQLite's busy handler would not cover).
//
// Only when the index cannot be read consistently (a connection died while
// writing it) or the WAL disagrees with it does Freeze take the WAL write
// lock (byte 120) and copy the whole -wal while writers wait; a read
// transaction that upgrades to a write in that moment gets SQLITE_BUSY at
// once, as it would from any other writer. A -shm whose dead-man-switch
// byte (128) nobody holds is stale: no connection is open, and the next one
// must rebuild the index, which takes CKPT, before anyone can write; the
// whole WAL is copied then. A WAL database without a -shm has no
// connection (an open one keeps its -shm, and only a holder of EXCLUSIVE,
// which SHARED excludes, deletes it): it is copied under SHARED, and the
// attempt starts over if a -shm appears meanwhile.
//
// # Copying
//
// Each file is copied in two passes: a first one without locks, then one
// under the locks that compares the live file with the copy in 4 KiB blocks
// and rewrites only what changed meanwhile. Writers therefore wait for the
// family to be read from the page cache (the first pass warmed it), not
// for tens of megabytes to be allocated and written back: no write-back
// throttling can stretch a hold. The locked pass checks each file's size
// and time stamps before and after; a change means a process writes
// without SQLite's locking (ErrNotFrozen). The copies take the live files'
// permission bits, so the archive records the same modes.
//
// # What a snapshot holds
//
// A frozen family covers all four paths, the database and its -wal, -shm
// and -journal: each is either a copy (Frozen.Files) or left out
// (Frozen.Hidden), so a side file that appears after the freeze cannot join
// the snapshot and pair a new WAL with an old database.
//
//   - The database, always.
//   - The -wal, up to its last commit, unless the database copy already
//     holds every commit: it holds commits not yet checkpointed, and after
//     an interrupted checkpoint the database is consistent only together
//     with it. SQLite's recovery on first open replays its committed
//     frames.
//   - The -shm, never. It is a cache of the WAL index: the first connection
//     to open the database (no other holds the dead-man-switch lock)
//     truncates it and rebuilds it from the WAL, so a copy is useless and a
//     stale one is harmless (tested: a restore with a random -shm passes
//     integrity_check). Readers write it (their read marks) under locks
//     that keep no copy consistent, so it would also move the bundle hash
//     on pure reads.
//   - The -journal, in rollback mode, when no write transaction is open: a
//     hot journal (a writer died after writing part of a transaction into
//     the database file) is what a restore needs to roll that back, and an
//     empty or zeroed one (journal_mode TRUNCATE, PERSIST) is harmless. Left
//     out while a writer holds RESERVED (tested before and after the copy):
//     then it is that writer's undo log in flux, and the database file
//     holds the last commit. A transaction that comes and goes between the
//     two tests can leave a torn copy of its journal, which is harmless: it
//     records pages the database file still has unchanged, so rolling it
//     back changes nothing. In WAL mode a leftover -journal is copied as it
//     is.
//
// A -wal or -journal that is a symlink (SQLite would follow it; the hasher
// does not) or not a regular file is ErrUnsupported, as is a -shm that is
// not a regular file (leaving it out would take a directory's files with
// it).
//
// # How long writers wait
//
// Frozen.Hold is how long writers were kept from committing: in rollback
// mode the whole locked pass, in WAL mode nothing (or, in the fallback, the
// locked pass over the -wal). It never exceeds Options.MaxHold plus one
// 1 MiB chunk: past it the copy is abandoned (ErrHold) and the locks
// dropped. A writer notices the release at its busy handler's next try:
// SQLite's default handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50,
// 50 ms, then 100 ms, between tries, so a writer waits at most Hold plus
// that sleep (under 100 ms) plus its own commit. Writers need a busy
// timeout above that (5 s is common): one with none fails with
// SQLITE_BUSY on any lock conflict, with this package as with any other
// reader of its database. In rollback mode readers that start while a
// writer waits (holding PENDING) wait too, as they would for any commit.
// Checkpoints are skipped while CKPT is held (the WAL grows a little
// meanwhile), and a connection that must rebuild the WAL index after a
// crash waits for it. TestSoak measures hold times and writer latencies
// under continuous writes in both modes.
//
// # Not covered
//
// Connections in locking_mode=EXCLUSIVE hold their locks for good (ErrBusy
// every time); multi-database transactions (ATTACH, a super-journal) are
// frozen one database at a time; databases reached through a symlink are
// not frozen (the hasher skips symlinks anyway).
package sqlite
