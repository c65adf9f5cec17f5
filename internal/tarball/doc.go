// Package tarball writes deterministic tar archives of a brain directory and
// extracts untrusted ones defensively (docs/design.md §4).
//
// # Archive format (a contract: identical trees give identical bytes)
//
// Write emits GNU-format tar (archive/tar FormatGNU, the format the
// reference runtime's GNU tar produces):
//
//   - The first entry is the root itself, named "./" as GNU tar names it,
//     carrying the root's mode. Then the directories, regular files, hard
//     links and symlinks below it. A file with several names (st_nlink >
//     1, the same device and inode) is archived once, under its first name
//     in archive order; every later name is a hard link entry ('1') whose
//     Linkname is that first name, as GNU tar writes them (the manifest
//     lists it with the file's size and SHA-256: the bundle hash hashes
//     every name). A symlink is a symlink entry ('2') whose Linkname is
//     its target, verbatim (read with readlink, never followed; listed in
//     Manifest.Symlinks, not in Files: the bundle hash counts no symlink),
//     except one whose name is outside the name policy, or a top-level
//     bundle.lock.json or receipts.ndjson (files hermesd keeps), which is
//     left out. Sockets, fifos and devices are left out. What is left out
//     is listed in Manifest.Skipped. Nothing else is excluded:
//     bundle.lock.json and receipts.ndjson are archived too. (Archives
//     written before 2026-11-27 have no "./" entry and no hard links;
//     before 2026-11-29, no symlinks: an extractor of then skips them.)
//   - Names are relative, '/'-separated, without a "./" prefix; directory
//     names end in '/'. They are stored verbatim and must pass the name
//     policy the hasher applies too (fsys.CheckName: valid UTF-8, no
//     backslash, no NUL, bounded lengths); a tree with any other name of a
//     file or directory is not archived (ErrName).
//   - Entries are sorted by the bytes of their full names (directories with
//     their trailing '/'), which puts every directory before its contents.
//     For example: "a-b/", "a.md", "a/", "a/x", "b".
//   - Headers: typeflag '0' (file), '5' (directory), '1' (hard link) or
//     '2' (symlink), mode = permission bits and the setuid, setgid and
//     sticky bits (mode & 0o7777, as stat(2) spells them; 0o777 for a
//     symlink, which has no mode of its own), uid = gid = 0, empty user
//     and group names, mtime 0 (the epoch): no times, so that identical
//     trees give identical archives; no access or change time, no devices,
//     no PAX records or xattrs.
//   - A name longer than 100 bytes is preceded by a GNU "././@LongLink"
//     ('L') entry holding the full name, and a symlink target longer than
//     100 bytes by one ('K') holding the target, exactly as GNU tar writes
//     them; a file
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
// beneath a file, a symlink or a skipped entry, sparse entries
// (ErrFormat), and archives over the configured limits. It accepts GNU tar
// output from the reference runtime ("./"-prefixed names, a "./" entry
// for the root, real mtimes, hard links, symlinks, numeric owners, GNU
// long names, PAX records). Devices and fifos are skipped with a warning
// in the Manifest; nothing is ever created but regular files,
// directories, hard links and symlinks, and no link is followed. A hard
// link entry is made (linkat, following nothing) only to a regular file
// this archive wrote before it, looked up in what was extracted, never on
// disk: its target can be neither outside the target directory, nor a
// directory, a symlink, the root, a skipped entry or a path not yet
// written. Entries beneath a hard link are refused like entries beneath a
// file.
//
// A symlink entry becomes a symlink with its target verbatim — absolute,
// with "..", dangling or not UTF-8 alike: where a link of the brain
// points is the brain's business — made after every file and hard link
// (symlinkat, then its own time with utimensat(AT_SYMLINK_NOFOLLOW)).
// Since no entry may lie beneath one, and nothing is written once they
// exist but directory modes and times (on paths that are directories of
// the archive), no write of Extract goes through a symlink. Only a target
// no system can create (empty, holding a NUL, longer than
// fsys.MaxSymlinkLen) is skipped, and a top-level bundle.lock.json or
// receipts.ndjson that is a symlink: hermesd reads those after a restore
// and never through a link. Targets are held until the end, at most
// ExtractOptions.MaxSymlinkBytes of them.
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
// file stripped is listed in Manifest.Stripped; directories lose o+w
// unless ExtractOptions.PublicDirs (anyone could add files to the brain's
// next snapshots), listed in Manifest.Narrowed.
//
// Modification times: an archive records times when one of its headers
// has a time other than the epoch (the reference's GNU tar archives
// always do); then every entry gets its time, the epoch and times under a
// second included. hermesd's own archives write the epoch in every header:
// they record none, and every entry keeps the time it was written. A
// time an int64 of ns cannot hold (before 1678, after 2262) is not set,
// and one the file system clamps to its range (ext4: 1901 to 2446) is
// kept as clamped; both are listed in Manifest.Retimed. Directories get
// their modes and times after their contents are written, deepest first,
// so read-only ones can be filled and no later entry moves a time; a
// directory the archive implies without listing it gets 0755 and no time.
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
	"time"

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
// epoch, when HasMtime: the archive records times, and this one fits in
// an int64 of ns) and, for a hard link, the path of the file it is
// another name of (Link).
type File struct {
	Path     string
	Size     int64
	Mode     fs.FileMode
	SHA256   [32]byte
	Mtime    int64
	HasMtime bool
	Link     string
}

// Dir is a directory of an archive (path without trailing '/'; "" for the
// root), its permission and special bits and its modification time (ns,
// when HasMtime, as File's).
type Dir struct {
	Path     string
	Mode     fs.FileMode
	Mtime    int64
	HasMtime bool
}

// Symlink is a symbolic link of an archive: its path, its target verbatim
// and, from Extract, its own modification time (as File's).
type Symlink struct {
	Path     string
	Target   string
	Mtime    int64
	HasMtime bool
}

// Retimed is an entry Extract restored with another modification time
// than its header's: a time outside what the file system holds (the
// kernel clamps it: Kept), or outside what an int64 of ns since the epoch
// holds (before 1678 or after 2262: not set, Kept is zero and the entry
// has the time of the restore).
type Retimed struct {
	Path     string
	Recorded time.Time
	Kept     time.Time
}

// Skipped is an entry that was left out, and why ("fifo", "socket",
// "device", a symlink that cannot be kept, ...).
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
	// Symlinks lists the symlinks archived or made, in archive order.
	Symlinks []Symlink
	// Times: the archive records modification times (one of its headers
	// has a time other than the epoch, as every archive of the reference
	// runtime's GNU tar has; hermesd's own write the epoch in every
	// header: no times). Extract then gives every entry its time, the
	// epoch included.
	Times bool
	// Narrowed lists the directories Extract made without the o+w bit
	// their headers record (ExtractOptions.PublicDirs).
	Narrowed []Stripped
	// Retimed lists the entries Extract could not give their recorded
	// time.
	Retimed []Retimed
}
