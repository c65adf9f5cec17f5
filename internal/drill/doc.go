// Package drill is the amnesia drill: it proves that an agent's brain comes
// back from chain plus Walrus alone, byte for byte and mode for mode.
//
// The drill (Run without Destructive) runs beside a running daemon as well
// as without one, the way restic checks a repository while backups run:
// it takes no lock and changes nothing outside its scratch directory. With
// fresh Walrus and chain clients, read-only, and a spool of its own, it
// restores
//
//   - mode b (default, the "cold boot"): the snapshot the ENS record
//     agent-snapshot names, as a fresh machine would find it: ENS → Walrus
//     GET → decrypt → extract → verify the bundle hash;
//   - mode a: the same without ENS, from the key and a blob id only: the
//     newest verified snapshot the state directory records (read without
//     its lock), or --blob. Mode a needs no chain at all.
//
// into a scratch directory, and checks it three ways: against the snapshot
// itself (the pipeline verifies every object, file SHA-256 and the bundle
// hash; the drill re-hashes the tree with hash.Dir, and for v3 compares
// every file's size, SHA-256 and mode, every directory's mode, every hard
// link and the brain directory's mode with the snapshot's trees), and
// against the live brain.
//
// The live brain may have moved on since the snapshot (a daemon snapshots
// it again shortly). Each difference between the restore and the live
// brain is therefore judged by the live entry's change time (ctime; mtime
// where there is none): one that changed at or after the snapshot was
// taken (its commit's time; a v1/v2 lock's lastUpdated, both written
// before any file was read), or whose directory did for one that is gone,
// is the brain moving on (Report.MovedOn, not a failure); any other is
// unexplained (Report.Mismatches: the brain changed behind its timestamps,
// or the snapshot does not hold what the brain was) and fails the drill.
//
// Comparison rules. Every entry below the brain's root is compared: the
// sets of paths, entry types, permission bits of files and directories, and
// file contents (non-destructive: literally, byte for byte against the live
// file; destructive: by SHA-256 and size against a manifest taken before the
// wipe, because the data is gone). What a restore gives back by policy, or
// an older snapshot does not record, is a note, never a difference:
// special bits (a restore never sets setuid or setgid on a file and lists
// each; snapshots before revision 2 trees and hermesd's archives before
// 2026-11-27 record no special bits, links or brain directory mode), hard
// links (a file under several names compares as its content; one restored
// as a link is no difference at all), and a brain directory kept narrower
// than the snapshot's (a restore never widens an existing one nor makes it
// writable by everyone). What a v3 snapshot does record of them is checked
// exactly against its trees. The destructive drill puts back what the
// restore did not give (the directory's own mode, stripped special bits,
// hard links stored as files), noting each, so the brain ends as it was;
// its final check compares modes with their special bits and hard links.
// Two top-level files legitimately differ and get their own rule:
//
//   - bundle.lock.json: the lock inside a blob was tarred before the upload,
//     so it names the parent blob; after the verified upload the live lock
//     records the new blob (walrusSnapshotBlobId and a new lineage[0]). The
//     rule: bundleHash and version equal, and the restored lock with that
//     one upload recorded equals the live lock exactly (every other key, the
//     whole older lineage). If the drill restores a blob other than the live
//     lock's newest upload, only bundleHash is compared (and a lock the
//     brain rewrote since, for a newer snapshot, has moved on).
//   - receipts.ndjson: receipts that arrive after a snapshot are exported
//     into the live file later, so every restored line must occur in the live
//     file (as a multiset of exact lines); the live file may hold more.
//
// A symlink is compared as a symlink: its target, verbatim (and, for a v3
// snapshot, against the trees). A live symlink the snapshot does not hold
// is a note (a symlink alone changes no bundle hash, so no snapshot is
// taken for it, and snapshots before 2026-11-29 hold none); the
// destructive drill refuses to wipe a brain whose v3 snapshot lacks one of
// its symlinks, and its final exact check compares targets. Sockets,
// fifos and devices are not part of the snapshot format: the
// non-destructive drill lists them as notes, the destructive drill refuses
// to wipe a brain that holds them (they would be lost). A directory a
// restore made without o+w (it makes none writable by everyone unless
// allow_unsafe_dirs) is a note; the destructive drill puts the bit back.
//
// Destructive drill (Destructive): it changes the brain, so it locks the
// state directory (a running daemon makes it fail, saying so), opens the
// agent as the daemon does, hashes the brain and, if it moved since the
// last verified snapshot, snapshots it (lock + receipts, pack, encrypt,
// upload, read back and verify), then publishes the ENS pointer by
// compare-and-set and records that in the agent's state, so a daemon
// started afterwards carries on from there. It refuses to wipe unless the
// snapshot of the current state is verified (uploaded and read back now, or
// re-read against its recorded SHA-256) and, for an agent with an ENS name,
// the pointer names it. The "wipe" has a safety net: the brain is renamed
// to a sibling directory (.<name>.drill-XXXX/<name>), restored in place
// through the cold path, compared, and the moved-aside copy is deleted only
// when everything matched. On any failure after the wipe the restored
// directory is removed and the moved-aside copy renamed back into place.
// bundle.lock.json and receipts.ndjson are then copied from the moved-aside
// copy (after their rules passed), so the brain ends byte-identical to what
// it was before.
package drill
