// Package fsys is the file-system layer shared by the bundle hasher and the
// tar writer and extractor: one policy for the file names a brain may hold,
// and one directory walk that never follows a symlink below its root. It
// also owns the rules for which paths hermesd trusts (Trust, below).
//
// # Names
//
// [CheckName] and [Join] decide which relative paths exist for hermesd. The
// hasher, the tar writer and the tar extractor all call them, so a name the
// extractor accepts is one the hasher will hash, and the other way round. A
// path is valid UTF-8, relative ('/'-separated, not absolute), without NUL
// bytes or backslashes, without empty, "." or ".." components, with no
// component longer than [MaxNameLen] bytes and at most [MaxPathLen] bytes in
// all. Errors match [ErrName], and also [ErrEscape] when the name climbs out
// of the root (absolute, or a ".." component).
//
// # Walking
//
// [OpenRoot] opens a directory tree; [Root.ReadDir], [Root.Open] and
// [Root.Stat] resolve paths relative to it without following any symlink
// and without leaving it, so a tree that changes during a walk can never
// make a walker read a file from elsewhere. Paths given to a Root are
// '/'-separated and relative, as CheckName and Join produce them; a ".."
// component never leaves the root (openat2 resolves one that stays inside
// it, the fallbacks refuse it with EXDEV).
//
// On Linux this works on raw file descriptors (os.Open costs three extra
// syscalls per file, a visible share of the ~5 µs budget of a small file):
// openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, getdents64 and fstat.
// Where openat2 is missing (kernels before 5.6, or a seccomp filter that
// refuses it) paths are resolved one component at a time with
// openat(O_NOFOLLOW). Other systems use a portable implementation on
// os.Root that resolves one component at a time too and checks, with
// os.SameFile, that what it opened is what it looked at; it is slower and
// its [Info] carries no inode, device or change time. Building with the tag
// fsys_portable selects the portable implementation on Linux as well, so
// its tests run here.
//
// Files are opened with O_NONBLOCK where the system has it, so a file
// swapped for a fifo after the listing cannot block the walk.
//
// # Trust
//
// [CheckOwner] is the one ownership rule for what hermesd trusts (secret
// files, via package secretfile, with [CheckLinkOwners] for the links on
// the way to them; the state directory): it belongs to the user hermesd
// runs as, or to root. [CheckNoSymlink] refuses a brain, seed or state
// path through a link someone other than root could change.
// [CheckSystemDir], [CheckSystemSource] and [CheckNotHome] refuse system
// directories and the home directory as such paths, [CheckNotPublic] a
// brain or seed directory anyone may add files to; errors match
// [ErrForeignOwner], [ErrSymlink] or [ErrUnsafeDir].
//
// # Overlays
//
// [OpenRootOverlay] opens a Root that shows the tree through an [Overlay]:
// a few paths substituted by other files, or hidden. The hasher and the tar
// writer read a brain through the same Overlay, so both see copies of its
// SQLite databases that were taken under SQLite's own locks instead of the
// live files (package sqlite). A substitute's [Info] has Overlay set, so
// it never equals an Info of the tree's own file and a stat-keyed cache
// cannot mistake one for the other. A substitute that cannot be opened is
// an error, never "gone": a walk must not silently leave out a file the
// overlay promised.
package fsys
