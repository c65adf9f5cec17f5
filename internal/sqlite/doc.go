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
// 0x40000000, read-lock the 510-byte SHARED range after RESERVED, drop
// PENDING), which keeps any writer from writing the database file (that
// needs EXCLUSIVE); then try a read lock on the RESERVED byte, which keeps
// new write transactions from starting. Writers wait for the whole locked
// copy.
//
// WAL mode (bytes 18/19 are 2, or a -wal file exists, as SQLite decides):
// take SHARED on the database file (so that no closing connection takes
// EXCLUSIVE to checkpoint and delete the WAL, which in that mode ignores
// the WAL-index locks), then the checkpoint lock (byte 121 of the -shm
// file, write lock): nothing can write the database file now, and it is
// copied while writers go on appending to the WAL. Then the WAL write lock
// (byte 120): writers wait while the -wal is copied, and only then. The
// database copy predates the WAL copy, and no checkpoint ran between them,
// so every page the database copy lacks is in the WAL copy. A WAL database
// without a -shm has no connection (an open one keeps its -shm, and only a
// holder of EXCLUSIVE, which SHARED excludes, deletes it): it is copied
// under SHARED, and the attempt starts over if a -shm appears meanwhile.
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
//   - The -wal, when it exists: it holds commits not yet checkpointed, and
//     after an interrupted checkpoint the database is consistent only
//     together with it. SQLite's recovery on first open replays its
//     committed frames and ignores anything after the last commit.
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
//     out while a writer holds RESERVED: then it is that writer's undo log
//     in flux, and the database file holds the last commit (only EXCLUSIVE,
//     which SHARED excludes, writes it). In WAL mode a leftover -journal is
//     copied as it is.
//
// A -wal or -journal that is a symlink (SQLite would follow it; the hasher
// does not) or not a regular file is ErrUnsupported, as is a -shm that is
// not a regular file (leaving it out would take a directory's files with
// it).
//
// # How long writers wait
//
// Frozen.Hold is how long writers were kept from committing: in rollback
// mode the whole locked pass, in WAL mode only the locked pass over the
// -wal. It never exceeds Options.MaxHold plus one 1 MiB chunk: past it the
// copy is abandoned (ErrHold) and the locks dropped. A writer notices the
// release at its busy handler's next try: SQLite's default handler sleeps
// 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 ms, then 100 ms, between tries,
// so a writer waits at most Hold plus that sleep (under 100 ms) plus its own
// commit. Writers need a busy timeout above that (5 s is common): one with
// none fails with SQLITE_BUSY on any lock conflict, with this package as
// with any other reader of its database. TestSoak measures hold times and
// writer latencies under continuous writes in both modes.
//
// # Not covered
//
// Connections in locking_mode=EXCLUSIVE hold their locks for good (ErrBusy
// every time); multi-database transactions (ATTACH, a super-journal) are
// frozen one database at a time; databases reached through a symlink are
// not frozen (the hasher skips symlinks anyway).
package sqlite
