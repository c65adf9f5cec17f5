// Package drill is the amnesia drill: it proves that an agent's brain comes
// back from chain plus Walrus alone, byte for byte and mode for mode.
//
// Run drives the same code paths as the daemon. It locks the state
// directory (so it refuses to run beside a hermesd on the same state), opens
// the agent as the daemon does, hashes the brain and, if it moved since the
// last verified snapshot, snapshots it (lock + receipts, tar, encrypt,
// upload, read back and verify), then publishes the ENS pointer by
// compare-and-set and records that in the agent's state, so a daemon started
// afterwards carries on from there. Then it forgets everything local: with a
// fresh Walrus client, a fresh read-only chain client and a new spool
// directory it restores the snapshot
//
//   - mode b (default, the "cold boot"): ENS agent-snapshot record → Walrus
//     GET → decrypt → extract → verify the bundle hash;
//   - mode a: the same without ENS, from the key and the blob id only;
//
// into a scratch directory, compares the result with the live brain, and
// re-hashes it with hash.Dir.
//
// Comparison rules. Every entry below the brain's root is compared: the
// sets of paths, entry types, permission bits of files and directories, and
// file contents (non-destructive: literally, byte for byte against the live
// file; destructive: by SHA-256 and size against a manifest taken before the
// wipe, because the data is gone). The brain directory's own mode is not
// part of the snapshot format (a restore creates it 0700); the destructive
// drill puts it back. Two top-level files legitimately differ and get their
// own rule:
//
//   - bundle.lock.json: the lock inside a blob was tarred before the upload,
//     so it names the parent blob; after the verified upload the live lock
//     records the new blob (walrusSnapshotBlobId and a new lineage[0]). The
//     rule: bundleHash and version equal, and the restored lock with that
//     one upload recorded equals the live lock exactly (every other key, the
//     whole older lineage). If the drill restores a blob other than the live
//     lock's newest upload (mode a with --blob), only bundleHash is compared.
//   - receipts.ndjson: receipts that arrive after a snapshot are exported
//     into the live file later, so every restored line must occur in the live
//     file (as a multiset of exact lines); the live file may hold more.
//
// Symlinks and special files are not part of the snapshot format: the
// non-destructive drill lists them as notes, the destructive drill refuses
// to wipe a brain that holds them (they would be lost).
//
// Destructive drill: it refuses to wipe unless the snapshot of the current
// state is verified (uploaded and read back now, or re-read against its
// recorded SHA-256) and, for an agent with an ENS name, the pointer names
// it. The "wipe" has a safety net: the brain is renamed to a sibling
// directory (.<name>.drill-XXXX/<name>), restored in place through the cold
// path, compared, and the moved-aside copy is deleted only when everything
// matched. On any failure after the wipe the restored directory is removed
// and the moved-aside copy renamed back into place. bundle.lock.json and
// receipts.ndjson are then copied from the moved-aside copy (after their rules
// passed), so the brain ends byte-identical to what it was before.
package drill
