// Package tarball writes deterministic tar archives of a brain directory and
// extracts untrusted ones defensively (docs/design.md §4).
//
// # Archive format (a contract: identical trees give identical bytes)
//
// Write emits GNU-format tar (archive/tar FormatGNU, the format the
// reference runtime's GNU tar produces):
//
//   - The first entry is the root itself, named "./" as GNU tar names it,
//     carrying the root's mode. Then the directories, regular files and
//     hard links below it. A file with several names (st_nlink > 1, the
//     same device and inode) is archived once, under its first name in
//     archive order; every later name is a hard link entry ('1') whose
//     Linkname is that first name, as GNU tar writes them (the manifest
//     lists it with the file's size and SHA-256: the bundle hash hashes
//     every name). Symlinks (never followed), sockets, fifos and devices
//     are left out and listed in Manifest.Skipped. Nothing is excluded:
//     bundle.lock.json and receipts.ndjson are archived too. (Archives
//     written before 2026-11-27 have no "./" entry and no links.)
//   - Names are relative, '/'-separated, without a "./" prefix; directory
//     names end in '/'. They are stored verbatim and must pass the name
//     policy the hasher applies too (fsys.CheckName: valid UTF-8, no
//     backslash, no NUL, bounded lengths); a tree with any other name of a
//     file or directory is not archived (ErrName).
//   - Entries are sorted by the bytes of their full names (directories with
//     their trailing '/'), which puts every directory before its contents.
//     For example: "a-b/", "a.md", "a/", "a/x", "b".
//   - Headers: typeflag '0' (file), '5' (directory) or '1' (hard link),
//     mode = permission bits and the setuid, setgid and sticky bits
//     (mode & 0o7777, as stat(2) spells them), uid = gid = 0, empty user
//     and group names, mtime 0 (the epoch): no times, so that identical
//     trees give identical archives; no access or change time, no devices,
//     no PAX records or xattrs.
//   - A name longer than 100 bytes is preceded by a GNU "././@LongLink"
//     ('L') entry holding the full name, exactly as GNU tar writes it; a file
//     of 8 GiB or more has a base-256 size field. Both are fixed functions of
//     the name and size, so the output stays deterministic. GNU (not PAX)
//     because it stores names as raw bytes: GNU tar extracts them unchanged
//     in any locale, whereas PAX names are UTF-8 that GNU tar converts to the
//     locale's charset.
//   - The archive ends with two zero blocks and no further padding.
//
// Write reads every file exactly once: the same bytes go into the archive
// and into a SHA-256 recorded in the Manifest, from which the caller
// computes the bundle hash (from Path and SHA256, as hash.File). A file
// whose size changes while it is archived, or that vanishes after the
// directory listing, fails the write with ErrChanged; the caller retries.
// With WriteOptions.Overlay the tree is archived as an fsys.Overlay shows
// it, e.g. with consistent copies of SQLite databases in place of files a
// writer keeps changing; the hasher reads through the same overlay.
//
// # Extraction
//
// Extract treats the archive as hostile. It writes only below its target
// directory, through os.Root, and rejects absolute names, ".." components
// (ErrUnsafePath), every name the hasher would refuse (ErrName: the same
// fsys.CheckName policy, so a restored brain always hashes), duplicate
// entries (including a file and a directory of the same name), entries
// beneath a file or a skipped link, sparse entries (ErrFormat), and
// archives over the configured limits. It accepts GNU tar output from the
// reference runtime ("./"-prefixed names, a "./" entry for the root, real
// mtimes, hard links, numeric owners, GNU long names, PAX records).
// Symlinks, devices and fifos are skipped with a warning in the Manifest;
// nothing is ever created but regular files, directories and hard links,
// and no link is followed. A hard link entry is made (linkat, following
// nothing) only to a regular file this archive wrote before it, looked up
// in what was extracted, never on disk: its target can be neither outside
// the target directory, nor a directory, the root, a skipped entry or a
// path not yet written. Entries beneath a hard link are refused like
// entries beneath a file.
//
// Extract never writes more file bytes than it read from the archive
// stream. Sparse entries (GNU 'S', or PAX GNU.sparse.* records) are refused
// because archive/tar would expand their holes into zeros, and every chunk
// written is checked against the bytes consumed, so the bytes extracted are
// bounded by the blob size, whatever else a header claims.
//
// Modes are set to exactly the archive's permission bits, whatever the
// umask, with the special bits: directories keep setgid and sticky, files
// keep sticky but not setuid or setgid (fsys.Restorable: a set-id program
// from a snapshot would be a privilege for whoever runs it), and every
// file stripped is listed in Manifest.Stripped. Modification times are set
// when the header has one (mtime 0, as hermesd's own archives write every
// header, means none: the file keeps the time it was written).
// Directories get their modes and times after their contents are written,
// deepest first, so read-only ones can be filled and no later entry moves
// a time; a directory the archive implies without listing it gets 0755.
// Ownership is not restored. The "./" entry is reported in Manifest.Root
// for the caller, which renames the directory into place, to apply.
//
// Extraction hashes the files on a second goroutine while it writes them;
// the SHA-256 of every file written is in the returned Manifest.
//
// Extract does not fsync: syncing 50,000 files one by one is slow, so the
// caller syncs the temporary directory once (syncfs or a walk) before
// renaming it into place.
package tarball

import (
	"errors"
	"io/fs"

	"github.com/hermesd/hermesd/internal/fsys"
)

var (
	// ErrChanged: a file changed or vanished while Write archived it.
	ErrChanged = errors.New("tarball: file changed while being archived")
	// ErrName: a file name Write cannot archive or Extract will not create,
	// under the one name policy shared with the hasher (fsys.CheckName). It
	// is fsys.ErrName, so hash.ErrName matches the same errors.
	ErrName = fsys.ErrName
	// ErrUnsafePath: an archive entry would land outside the target or
	// beneath a link.
	ErrUnsafePath = errors.New("tarball: unsafe path in archive")
	// ErrDuplicate: an archive names the same path twice, or a path beneath
	// a file.
	ErrDuplicate = errors.New("tarball: duplicate entry in archive")
	// ErrLimit: an archive exceeds ExtractOptions' limits.
	ErrLimit = errors.New("tarball: archive exceeds a limit")
	// ErrTruncated: the archive ends early (also matches io.ErrUnexpectedEOF).
	ErrTruncated = errors.New("tarball: archive is truncated")
	// ErrFormat: the archive is not a well-formed tar, holds a sparse entry,
	// or non-zero data follows its end marker.
	ErrFormat = errors.New("tarball: malformed archive")
	// ErrTargetNotEmpty: Extract's target exists and is not an empty
	// directory.
	ErrTargetNotEmpty = errors.New("tarball: target is not an empty directory")
)

// File is a regular file of an archive: its path relative to the root
// ('/'-separated), size, permission bits (mode & 0o777), the SHA-256 of
// its contents, and, from Extract, its modification time (ns since the
// epoch; 0 when the archive records none) and, for a hard link, the path
// of the file it is another name of (Link).
type File struct {
	Path   string
	Size   int64
	Mode   fs.FileMode
	SHA256 [32]byte
	Mtime  int64
	Link   string
}

// Dir is a directory of an archive (path without trailing '/'; "" for the
// root), its permission and special bits and its modification time (ns;
// 0 when the archive records none).
type Dir struct {
	Path  string
	Mode  fs.FileMode
	Mtime int64
}

// Skipped is an entry that was left out, and why ("symlink", "fifo",
// "socket", "device", ...).
type Skipped struct {
	Path   string
	Reason string
}

// Stripped is a file Extract wrote without some of the special bits its
// header records (fsys.Restorable: setuid and setgid on files).
type Stripped struct {
	Path     string
	Mode     fs.FileMode // as archived (permission and special bits)
	Restored fs.FileMode // as written
}

// Manifest lists what Write archived or Extract wrote, in archive order.
type Manifest struct {
	Files   []File
	Dirs    []Dir
	Skipped []Skipped
	Bytes   int64 // total size of Files (hard links count their file's size)
	// Root is the root directory's entry ("./") when the archive has one:
	// its mode and time, for the caller to apply.
	Root *Dir
	// Links counts the Files that are hard links.
	Links int
	// Stripped lists the files Extract wrote without their setuid or
	// setgid bits.
	Stripped []Stripped
}
