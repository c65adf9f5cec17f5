// Package hash computes hermesd's bundle hash: the lineage hash of an agent's
// brain directory, bit for bit the reference runtime's hashBundleDir
// (docs/design.md §2).
//
// The bundle hash is keccak256 over the per-file leaves
// keccak256(path ‖ 0x00 ‖ sha256(content)), taken in UTF-16 code-unit order
// of the paths (JavaScript's default sort). Regular files at any depth
// count; symlinks (never followed), sockets, fifos, devices and empty
// directories do not; the top-level bundle.lock.json and receipts.ndjson are
// excluded. A tree with no files left (or no tree at all) hashes to [Null].
//
// Three ways in:
//   - [Dir] walks and hashes a directory, reading files in parallel;
//   - [FromFiles] hashes a list of already-digested files, such as the
//     manifest the tar writer or the extractor produce while they stream the
//     bytes, so a snapshot or a restore never reads a file twice;
//   - [Cache] keeps per-file digests keyed by stat data, so that after a
//     change only the named (or, on a rescan, the stat-changed) files are read
//     again.
//
// File names follow the one name policy of fsys.CheckName, which the tar
// writer and extractor apply too: valid UTF-8, no backslash, no NUL, bounded
// lengths; see [ErrName] for why. The directory walk (openat2 beneath the
// root, never through a symlink) is fsys's as well.
package hash
