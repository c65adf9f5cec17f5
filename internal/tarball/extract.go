package tarball

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hermesd/hermesd/internal/fsys"
)

// Default limits of ExtractOptions.
const (
	DefaultMaxEntries   = 1 << 20
	DefaultMaxTotalSize = 64 << 30
)

// maxTrailer bounds the zero padding accepted after the end-of-archive
// marker (GNU tar pads to 10 KiB records; other blocking factors more).
const maxTrailer = 1 << 20

// DefaultMaxSymlinkBytes bounds the symlink targets an archive may make
// Extract hold until it makes the links (after every file): the
// reference's brains have dozens of links of a few bytes.
const DefaultMaxSymlinkBytes = 16 << 20

// ExtractOptions bounds what an archive may make Extract write.
type ExtractOptions struct {
	// MaxEntrySize is the largest file accepted; 0 means MaxTotalSize.
	MaxEntrySize int64
	// MaxTotalSize bounds the sum of all file sizes; 0 means
	// DefaultMaxTotalSize.
	MaxTotalSize int64
	// MaxEntries bounds the number of entries of any type; 0 means
	// DefaultMaxEntries.
	MaxEntries int
	// MaxSymlinkBytes bounds the symlinks' targets in all (they are held
	// until every file is written); 0 means DefaultMaxSymlinkBytes.
	MaxSymlinkBytes int
	// PublicDirs keeps the o+w bit of directories whose headers record it
	// (allow_unsafe_dirs); without it they are made without it and listed
	// in Manifest.Narrowed. (The root's mode is the caller's: Manifest.Root.)
	PublicDirs bool
}

func (o ExtractOptions) withDefaults() ExtractOptions {
	if o.MaxTotalSize <= 0 {
		o.MaxTotalSize = DefaultMaxTotalSize
	}
	if o.MaxEntrySize <= 0 {
		o.MaxEntrySize = o.MaxTotalSize
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxSymlinkBytes <= 0 {
		o.MaxSymlinkBytes = DefaultMaxSymlinkBytes
	}
	return o
}

// node is what a path of the archive became.
type node uint8

const (
	absent node = iota
	nodeFile
	nodeDir
	nodeImplicitDir // created as the parent of a later entry
	nodeSkipped     // a special file that was not created
	nodeSymlink     // a symlink, made after every file
)

// stamp is an entry's recorded time, as Extract applies it.
type stamp struct {
	ns   int64 // ns since the epoch, when fits
	zero bool  // the header says the epoch: no time, unless the archive has times
	fits bool  // representable as ns in an int64 (1678 to 2262)
	none bool  // no header: a directory the archive implies without listing it
	t    time.Time
}

// pendingLink is a symlink to make once every file is written.
type pendingLink struct {
	path, target string
	at           stamp
}

type extractor struct {
	root    *os.Root
	opts    ExtractOptions
	seen    map[string]node
	dirIdx  map[string]int // index in m.Dirs
	fileIdx map[string]int // index in m.Files, of files hard links may name
	m       Manifest
	total   int64 // sum of the sizes of the files so far
	sums    *sumPipe
	stream  *blockReader

	// written counts the bytes written to files. It can never exceed what
	// was read from the archive stream (checked on every chunk), so a
	// blob of n bytes cannot make Extract write more than n bytes, however
	// archive/tar interprets its headers.
	written int64

	// The parent directory of the last file, opened as a Root of its own:
	// archives list a directory's files together, and opening "base" in
	// it costs one openat instead of one per path component.
	lastDir  string
	lastRoot *os.Root

	// times: a header so far had a time other than the epoch (the
	// archive records times, so the epoch is a time too). Files whose
	// header said the epoch before that was known wait in zeroFiles.
	times     bool
	zeroFiles []int // indexes in m.Files
	dirTimes  map[string]stamp
	rootTime  stamp
	links     []pendingLink
	linkBytes int
}

// Extract unpacks the tar stream r into dir, which must be an empty
// directory or not exist yet (its parent must); it is created with mode
// 0700, and the archive's "./" entry (its mode and time) is reported in
// Manifest.Root for the caller to apply. See the package documentation for
// what is accepted, skipped and rejected.
//
// Extract reads r to its very end: after the end-of-archive marker only
// zero padding (up to 1 MiB) may follow, anything else is ErrFormat; a
// stream that ends before the marker is ErrTruncated. So when r is a
// decrypting reader, its final authentication has happened when Extract
// returns nil.
//
// The returned Manifest lists the files written, with the SHA-256 of the
// bytes written, so the caller can verify the bundle hash without reading
// them back. On error, dir may hold a partial tree: the caller removes it.
// Nothing is fsynced (see the package documentation).
func Extract(ctx context.Context, r io.Reader, dir string, opts ExtractOptions) (Manifest, error) {
	if err := prepareTarget(dir); err != nil {
		return Manifest{}, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("tarball: %w", err)
	}
	defer root.Close()
	br := &blockReader{r: r}
	x := newExtractor(root, opts, br)
	defer x.close()
	tr := tar.NewReader(br)
	entries := 0
	for {
		if err := ctx.Err(); err != nil {
			return Manifest{}, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			if !br.atEndMarker() {
				return Manifest{}, fmt.Errorf("%w: no end-of-archive marker after %d bytes: %w", ErrTruncated, br.n, io.ErrUnexpectedEOF)
			}
			break
		}
		if err != nil && !(errors.Is(err, tar.ErrInsecurePath) && hdr != nil) {
			return Manifest{}, readError(err)
		}
		if entries++; entries > x.opts.MaxEntries {
			return Manifest{}, fmt.Errorf("%w: more than %d entries", ErrLimit, x.opts.MaxEntries)
		}
		if err := x.entry(ctx, hdr, tr); err != nil {
			return Manifest{}, err
		}
	}
	if err := drainTrailer(br); err != nil {
		return Manifest{}, err
	}
	if err := x.finishTimes(); err != nil {
		return Manifest{}, err
	}
	// Symlinks after every file and hard link: once one exists nothing
	// more is written below the target but directory modes and times,
	// and no path resolved passes through one (an entry below a link was
	// refused), so a link to /etc or ../.. can take no write there.
	if err := x.makeSymlinks(); err != nil {
		return Manifest{}, err
	}
	if err := x.applyDirModes(); err != nil {
		return Manifest{}, err
	}
	sums := x.sums.finish()
	k := 0
	for i := range x.m.Files {
		f := &x.m.Files[i]
		if f.Link != "" {
			// Another name of a file listed before it.
			f.SHA256 = x.m.Files[x.fileIdx[f.Link]].SHA256
			continue
		}
		f.SHA256 = sums[k]
		k++
	}
	return x.m, nil
}

func newExtractor(root *os.Root, opts ExtractOptions, stream *blockReader) *extractor {
	return &extractor{
		root:     root,
		opts:     opts.withDefaults(),
		seen:     map[string]node{},
		dirIdx:   map[string]int{},
		fileIdx:  map[string]int{},
		dirTimes: map[string]stamp{},
		sums:     newSumPipe(),
		stream:   stream,
	}
}

func (x *extractor) close() {
	if x.lastRoot != nil {
		x.lastRoot.Close()
	}
	x.sums.close()
}

func (x *extractor) entry(ctx context.Context, hdr *tar.Header, tr *tar.Reader) error {
	if isSparse(hdr) {
		return fmt.Errorf("%w: %q is a sparse file entry, which hermesd and the reference runtime never write", ErrFormat, clip(hdr.Name))
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeXGlobalHeader && !headerStamp(hdr).zero {
		x.times = true
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeCont: // (the reader maps the old TypeRegA to TypeReg)
		if name == "" {
			return fmt.Errorf("%w: %q: the root is not a file", ErrUnsafePath, hdr.Name)
		}
		return x.file(ctx, name, hdr, tr)
	case tar.TypeDir:
		if name == "" {
			// "./": the root, which the caller renames into place.
			if x.m.Root != nil {
				return fmt.Errorf("%w: %q: a second entry for the root", ErrDuplicate, clip(hdr.Name))
			}
			x.m.Root, x.rootTime = &Dir{Mode: headerMode(hdr)}, headerStamp(hdr)
			return nil
		}
		return x.dir(name, headerMode(hdr), headerStamp(hdr))
	case tar.TypeLink:
		if name == "" {
			return fmt.Errorf("%w: %q: the root is not a file", ErrUnsafePath, hdr.Name)
		}
		return x.link(name, hdr)
	case tar.TypeSymlink:
		if name == "" {
			return fmt.Errorf("%w: %q: the root is not a directory", ErrUnsafePath, hdr.Name)
		}
		return x.symlink(name, hdr)
	case tar.TypeXGlobalHeader:
		return nil // metadata only
	}
	if name == "" {
		return fmt.Errorf("%w: %q: the root is not a directory", ErrUnsafePath, hdr.Name)
	}
	var reason string
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		reason = "device"
	case tar.TypeFifo:
		reason = "fifo"
	default:
		reason = fmt.Sprintf("unsupported entry type %q", hdr.Typeflag)
	}
	if x.seen[name] != absent {
		return fmt.Errorf("%w: %s", ErrDuplicate, name)
	}
	if err := x.parents(name, false); err != nil {
		return err
	}
	x.seen[name] = nodeSkipped
	x.m.Skipped = append(x.m.Skipped, Skipped{Path: name, Reason: reason})
	return nil
}

// isSparse reports a GNU sparse entry: the old GNU 'S' type, or a PAX
// header with GNU.sparse.* records (formats 0.0, 0.1 and 1.0). archive/tar
// expands the holes of such an entry into zeros, so a few kilobytes of
// archive could make Extract write gigabytes; neither hermesd's writer nor
// the reference runtime's `tar -c` ever produces one.
func isSparse(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// cleanName turns an archive name into a path relative to the target: the
// tar spellings GNU tar uses ("./" prefixes, "." components, repeated and
// trailing slashes) are normalised, then the one name policy of the hasher
// and the writer (fsys.CheckName) decides. Absolute names and ".."
// components are ErrUnsafePath; anything else the policy refuses (invalid
// UTF-8, NUL, a backslash, overlong names) is ErrName. "" means the root.
func cleanName(name string) (string, error) {
	parts := strings.Split(name, "/")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && p != "." {
			out = append(out, p)
		}
	}
	rel := strings.Join(out, "/")
	switch {
	case strings.HasPrefix(name, "/"):
		rel = "/" + rel // keep it absolute for the policy to refuse
	case rel == "" && name != "":
		return "", nil // ".", "./": the root
	}
	if err := fsys.CheckName(rel); err != nil {
		if errors.Is(err, fsys.ErrEscape) {
			return "", fmt.Errorf("%w: %w", ErrUnsafePath, err)
		}
		return "", fmt.Errorf("tarball: %w", err)
	}
	return rel, nil
}

// clip bounds a hostile name quoted in an error.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// parents checks that every ancestor of name is a directory of the
// archive, creating missing ones (mode 0755 in the end) when create is set.
func (x *extractor) parents(name string, create bool) error {
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		p := name[:i]
		switch x.seen[p] {
		case nodeDir, nodeImplicitDir:
		case nodeFile:
			return fmt.Errorf("%w: %s is beneath the file %s", ErrDuplicate, name, p)
		case nodeSkipped, nodeSymlink:
			return fmt.Errorf("%w: %s is beneath %s, a symlink or special file", ErrUnsafePath, name, p)
		default:
			if !create {
				continue
			}
			if err := x.root.Mkdir(p, 0o700); err != nil {
				return fmt.Errorf("tarball: %w", err)
			}
			x.seen[p] = nodeImplicitDir
			x.dirIdx[p] = len(x.m.Dirs)
			x.m.Dirs = append(x.m.Dirs, Dir{Path: p, Mode: 0o755})
			x.dirTimes[p] = stamp{none: true}
		}
	}
	return nil
}

// headerMode is a header's permission and special bits.
func headerMode(hdr *tar.Header) fs.FileMode {
	return fsys.FromUnixMode(uint32(hdr.Mode & 0o7777))
}

// headerStamp is a header's modification time. The epoch (as hermesd's
// deterministic archives write every header) is no time unless the
// archive has times (extractor.times); a time an int64 of ns cannot hold
// is kept aside (fits false).
func headerStamp(hdr *tar.Header) stamp {
	t := hdr.ModTime
	if t.IsZero() || t.Unix() == 0 && t.Nanosecond() == 0 {
		return stamp{zero: true, fits: true}
	}
	if t.Before(minTime) || t.After(maxTime) {
		return stamp{t: t}
	}
	return stamp{ns: t.UnixNano(), fits: true, t: t}
}

// The times an int64 of ns since the epoch holds: 1677-09-21 to
// 2262-04-11.
var minTime, maxTime = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

// apply says whether to set the time st records, and which.
func (x *extractor) apply(st stamp) (int64, bool) {
	switch {
	case st.none, !st.fits:
		return 0, false
	case st.zero:
		return 0, x.times
	}
	return st.ns, true
}

// setTime gives the entry p its recorded time through set, and lists it
// when the file system keeps another (stat: what it holds now) or the
// time is beyond an int64 of ns. It returns the time the entry has, and
// whether it is the recorded one (or what the file system made of it)
// rather than the restore's.
func (x *extractor) setTime(p string, st stamp, set func(time.Time) error, stat func() (fs.FileInfo, error)) (int64, bool, error) {
	ns, ok := x.apply(st)
	if !ok {
		if !st.fits && !st.none {
			x.m.Retimed = append(x.m.Retimed, Retimed{Path: p, Recorded: st.t})
		}
		return 0, false, nil
	}
	if err := set(time.Unix(0, ns)); err != nil {
		return 0, false, err
	}
	if !fsys.CommonTime(ns) {
		if fi, err := stat(); err == nil && fi.ModTime().UnixNano() != ns {
			x.m.Retimed = append(x.m.Retimed, Retimed{Path: p, Recorded: time.Unix(0, ns), Kept: fi.ModTime()})
			return fi.ModTime().UnixNano(), true, nil
		}
	}
	return ns, true, nil
}

func (x *extractor) dir(name string, mode fs.FileMode, mtime stamp) error {
	switch x.seen[name] {
	case nodeImplicitDir:
		x.seen[name] = nodeDir
		x.m.Dirs[x.dirIdx[name]].Mode, x.dirTimes[name] = mode, mtime
		return nil
	case absent:
	default:
		return fmt.Errorf("%w: %s", ErrDuplicate, name)
	}
	if err := x.parents(name, true); err != nil {
		return err
	}
	// 0700 while filling it; the archive's mode is applied at the end, so
	// a read-only directory can still receive its contents.
	if err := x.root.Mkdir(name, 0o700); err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	x.seen[name] = nodeDir
	x.dirIdx[name] = len(x.m.Dirs)
	x.m.Dirs = append(x.m.Dirs, Dir{Path: name, Mode: mode})
	x.dirTimes[name] = mtime
	return nil
}

// symlink records the symlink name, made after every file (makeSymlinks)
// with its target verbatim. Only what no system can create is left out
// (an empty target, a NUL, more than fsys.MaxSymlinkLen bytes), and a
// link in the place of the top-level lock or receipts, which hermesd
// reads after a restore as the regular files it writes.
func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if x.seen[name] != absent {
		return fmt.Errorf("%w: %s", ErrDuplicate, name)
	}
	reason := ""
	switch {
	case name == "bundle.lock.json" || name == "receipts.ndjson":
		reason = "symlink in the place of a file hermesd keeps"
	case fsys.CheckSymlinkTarget(hdr.Linkname) != nil:
		reason = "symlink whose target no system can create"
	}
	if reason != "" {
		if err := x.parents(name, false); err != nil {
			return err
		}
		x.seen[name] = nodeSkipped
		x.m.Skipped = append(x.m.Skipped, Skipped{Path: name, Reason: reason})
		return nil
	}
	if x.linkBytes += len(hdr.Linkname); x.linkBytes > x.opts.MaxSymlinkBytes {
		return fmt.Errorf("%w: symlink targets of more than %d bytes", ErrLimit, x.opts.MaxSymlinkBytes)
	}
	if err := x.parents(name, true); err != nil {
		return err
	}
	x.seen[name] = nodeSymlink
	x.links = append(x.links, pendingLink{path: name, target: hdr.Linkname, at: headerStamp(hdr)})
	return nil
}

// finishTimes gives the files whose headers said the epoch before the
// archive turned out to have times the epoch, and the root its time.
func (x *extractor) finishTimes() error {
	x.m.Times = x.times
	if x.times {
		epoch := time.Unix(0, 0)
		for _, i := range x.zeroFiles {
			f := &x.m.Files[i]
			if err := x.root.Chtimes(f.Path, time.Time{}, epoch); err != nil {
				return fmt.Errorf("tarball: %w", err)
			}
			f.Mtime, f.HasMtime = 0, true
		}
		for i := range x.m.Files {
			if f := &x.m.Files[i]; f.Link != "" {
				t := x.m.Files[x.fileIdx[f.Link]]
				f.Mtime, f.HasMtime = t.Mtime, t.HasMtime
			}
		}
	}
	if r := x.m.Root; r != nil {
		r.Mtime, r.HasMtime = x.apply(x.rootTime)
		if !x.rootTime.fits {
			x.m.Retimed = append(x.m.Retimed, Retimed{Path: ".", Recorded: x.rootTime.t})
		}
	}
	return nil
}

// makeSymlinks makes the symlinks the archive holds, with their targets
// verbatim and their own times. Their parents are directories of the
// archive; symlinkat and utimensat(AT_SYMLINK_NOFOLLOW) follow nothing.
func (x *extractor) makeSymlinks() error {
	for _, l := range x.links {
		if err := x.root.Symlink(l.target, l.path); err != nil {
			return fmt.Errorf("tarball: %w", err)
		}
		s := Symlink{Path: l.path, Target: l.target}
		var err error
		s.Mtime, s.HasMtime, err = x.setTime(l.path, l.at, func(t time.Time) error {
			if err := fsys.SetSymlinkMtime(x.root, l.path, t); !errors.Is(err, errors.ErrUnsupported) {
				return err
			}
			return nil
		}, func() (fs.FileInfo, error) { return x.root.Lstat(l.path) })
		if err != nil {
			return fmt.Errorf("tarball: %w", err)
		}
		x.m.Symlinks = append(x.m.Symlinks, s)
	}
	return nil
}

// link makes name another name of a regular file this archive wrote
// before (GNU tar's hard link entry). The target is looked up in what was
// extracted, never on disk: it must be a regular file of this archive,
// so a link can neither reach outside the target, nor name a directory,
// a skipped entry or a path not yet written; linkat follows no symlink.
// Its data, if any, is not read.
func (x *extractor) link(name string, hdr *tar.Header) error {
	if x.seen[name] != absent {
		return fmt.Errorf("%w: %s", ErrDuplicate, name)
	}
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return err
	}
	ti, ok := x.fileIdx[target]
	if !ok || x.seen[target] != nodeFile {
		return fmt.Errorf("%w: %s is a hard link to %q, which is not a file extracted before it", ErrUnsafePath, name, clip(hdr.Linkname))
	}
	if err := x.parents(name, true); err != nil {
		return err
	}
	if err := x.root.Link(target, name); err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	t := x.m.Files[ti]
	x.seen[name] = nodeFile
	x.fileIdx[name] = len(x.m.Files)
	x.m.Files = append(x.m.Files, File{Path: name, Size: t.Size, Mode: t.Mode, Mtime: t.Mtime, HasMtime: t.HasMtime, Link: t.Path})
	x.m.Bytes += t.Size
	x.m.Links++
	return nil
}

func (x *extractor) file(ctx context.Context, name string, hdr *tar.Header, tr *tar.Reader) error {
	if x.seen[name] != absent {
		return fmt.Errorf("%w: %s", ErrDuplicate, name)
	}
	size := hdr.Size
	switch {
	case size < 0:
		return fmt.Errorf("%w: %s: negative size", ErrFormat, name)
	case size > x.opts.MaxEntrySize:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrLimit, name, size, x.opts.MaxEntrySize)
	case size > x.opts.MaxTotalSize-x.total:
		return fmt.Errorf("%w: files total more than %d bytes", ErrLimit, x.opts.MaxTotalSize)
	}
	x.total += size
	if err := x.parents(name, true); err != nil {
		return err
	}
	dir, base := x.root, name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		if x.lastRoot == nil || x.lastDir != name[:i] {
			if x.lastRoot != nil {
				x.lastRoot.Close()
				x.lastRoot = nil
			}
			r, err := x.root.OpenRoot(name[:i])
			if err != nil {
				return fmt.Errorf("tarball: %w", err)
			}
			x.lastDir, x.lastRoot = name[:i], r
		}
		dir, base = x.lastRoot, name[i+1:]
	}
	f, err := dir.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("tarball: %s: %w", name, err)
	}
	x.seen[name] = nodeFile
	n, err := x.copy(ctx, name, f, tr, size)
	if err == nil && n != size {
		err = fmt.Errorf("%w: %s: %d of %d bytes", ErrTruncated, name, n, size)
	}
	mode, stripped := fsys.Restorable(headerMode(hdr), false)
	at := headerStamp(hdr)
	var mtime int64
	var timed bool
	if err == nil {
		// fchmod: exactly the archive's bits, whatever the umask (less
		// setuid and setgid: fsys.Restorable).
		err = f.Chmod(mode)
	}
	if err == nil {
		mtime, timed, err = x.setTime(name, at, func(t time.Time) error { return fsys.SetMtime(dir, f, base, t) }, f.Stat)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tarball: %w", cerr)
	}
	if err != nil {
		return err
	}
	if stripped != 0 {
		x.m.Stripped = append(x.m.Stripped, Stripped{Path: name, Mode: mode | stripped, Restored: mode})
	}
	if at.zero && !timed {
		// The epoch, or no time: which, the rest of the archive says.
		x.zeroFiles = append(x.zeroFiles, len(x.m.Files))
	}
	x.fileIdx[name] = len(x.m.Files)
	x.m.Files = append(x.m.Files, File{Path: name, Size: size, Mode: mode.Perm(), Mtime: mtime, HasMtime: timed}) // SHA256 filled in at the end
	x.m.Bytes += size
	return nil
}

// copy streams one entry's data into f; the sum pipe hashes it.
func (x *extractor) copy(ctx context.Context, name string, f *os.File, tr *tar.Reader, size int64) (n int64, err error) {
	for n < size {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		buf := x.sums.space()
		buf = buf[:min(int64(len(buf)), size-n)]
		m, rerr := tr.Read(buf)
		if m > 0 {
			if x.written += int64(m); x.written > x.stream.n {
				return n, fmt.Errorf("%w: %s: more file data than the archive holds", ErrFormat, name)
			}
			x.sums.fill(m)
			if _, werr := f.Write(buf[:m]); werr != nil {
				return n, fmt.Errorf("tarball: %w", werr)
			}
			n += int64(m)
		}
		if rerr == io.EOF && n < size {
			rerr = io.ErrUnexpectedEOF
		}
		if rerr != nil && rerr != io.EOF {
			return n, readError(rerr)
		}
	}
	x.sums.endFile()
	return n, nil
}

// applyDirModes sets every directory's final mode and time, deepest
// first, so that search permission on the parents lasts until the
// children are done, and no entry made later changes a time set. o+w is
// cleared unless PublicDirs (listed in Manifest.Narrowed).
func (x *extractor) applyDirModes() error {
	order := make([]int, len(x.m.Dirs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(x.m.Dirs[b].Path, x.m.Dirs[a].Path) })
	for _, i := range order {
		d := &x.m.Dirs[i]
		if d.Mode&0o002 != 0 && !x.opts.PublicDirs {
			x.m.Narrowed = append(x.m.Narrowed, Stripped{Path: d.Path, Mode: d.Mode, Restored: d.Mode &^ 0o002})
			d.Mode &^= 0o002
		}
		if err := x.root.Chmod(d.Path, d.Mode); err != nil {
			return fmt.Errorf("tarball: %w", err)
		}
		var err error
		d.Mtime, d.HasMtime, err = x.setTime(d.Path, x.dirTimes[d.Path], func(t time.Time) error {
			return x.root.Chtimes(d.Path, time.Time{}, t)
		}, func() (fs.FileInfo, error) { return x.root.Lstat(d.Path) })
		if err != nil {
			return fmt.Errorf("tarball: %w", err)
		}
	}
	slices.SortFunc(x.m.Narrowed, func(a, b Stripped) int { return strings.Compare(a.Path, b.Path) })
	return nil
}

func readError(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong):
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return fmt.Errorf("tarball: read archive: %w", err)
}

// prepareTarget makes sure dir is an empty directory (creating it if
// missing). A symlink is refused.
func prepareTarget(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("tarball: create target: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("tarball: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrTargetNotEmpty, dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return fmt.Errorf("%w: %s", ErrTargetNotEmpty, dir)
	}
	if err != nil && err != io.EOF {
		return fmt.Errorf("tarball: %w", err)
	}
	return nil
}

// blockReader counts what archive/tar consumes so Extract can tell a real
// end-of-archive marker from a stream that merely stops at an entry
// boundary: archive/tar reports io.EOF for both (and for a stream cut
// inside the padding of the last entry). archive/tar reads headers with
// exact 512-byte reads, so the marker was read iff the consumed length is
// block-aligned, ends in at least two zero blocks, and the last read
// returned data (a stream that stops makes the last read return nothing).
type blockReader struct {
	r     io.Reader
	n     int64 // bytes consumed
	zeros int64 // length of the run of zero bytes ending at n
	lastN int
}

func (b *blockReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.n += int64(n)
		i := n - 1
		for i >= 0 && p[i] == 0 {
			i--
		}
		if i >= 0 {
			b.zeros = int64(n - 1 - i)
		} else {
			b.zeros += int64(n)
		}
	}
	b.lastN = n
	return n, err
}

func (b *blockReader) atEndMarker() bool {
	return b.lastN > 0 && b.n%512 == 0 && b.zeros >= 1024
}

// drainTrailer consumes what follows the end-of-archive marker: zero
// padding is fine, anything else is a format error.
func drainTrailer(r io.Reader) error {
	buf := make([]byte, 32<<10)
	var total int
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != 0 {
				return fmt.Errorf("%w: data after the end-of-archive marker", ErrFormat)
			}
		}
		if total += n; total > maxTrailer {
			return fmt.Errorf("%w: more than %d bytes of padding after the end-of-archive marker", ErrFormat, maxTrailer)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tarball: read archive: %w", err)
		}
	}
}
