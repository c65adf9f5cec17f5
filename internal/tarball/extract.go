package tarball

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	return o
}

// node is what a path of the archive became.
type node uint8

const (
	absent node = iota
	nodeFile
	nodeDir
	nodeImplicitDir // created as the parent of a later entry
	nodeSkipped     // a link or special file that was not created
)

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
		root:    root,
		opts:    opts.withDefaults(),
		seen:    map[string]node{},
		dirIdx:  map[string]int{},
		fileIdx: map[string]int{},
		sums:    newSumPipe(),
		stream:  stream,
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
			x.m.Root = &Dir{Mode: headerMode(hdr), Mtime: headerTime(hdr)}
			return nil
		}
		return x.dir(name, headerMode(hdr), headerTime(hdr))
	case tar.TypeLink:
		if name == "" {
			return fmt.Errorf("%w: %q: the root is not a file", ErrUnsafePath, hdr.Name)
		}
		return x.link(name, hdr)
	case tar.TypeXGlobalHeader:
		return nil // metadata only
	}
	if name == "" {
		return fmt.Errorf("%w: %q: the root is not a directory", ErrUnsafePath, hdr.Name)
	}
	var reason string
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		reason = "symlink"
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
		case nodeSkipped:
			return fmt.Errorf("%w: %s is beneath %s, a link or special file", ErrUnsafePath, name, p)
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
		}
	}
	return nil
}

// headerMode is a header's permission and special bits.
func headerMode(hdr *tar.Header) fs.FileMode {
	return fsys.FromUnixMode(uint32(hdr.Mode & 0o7777))
}

// headerTime is a header's modification time in ns since the epoch; 0
// (the epoch itself, as hermesd's deterministic archives write every
// header) means none is recorded.
func headerTime(hdr *tar.Header) int64 {
	if hdr.ModTime.IsZero() || hdr.ModTime.Unix() == 0 && hdr.ModTime.Nanosecond() == 0 {
		return 0
	}
	return hdr.ModTime.UnixNano()
}

func (x *extractor) dir(name string, mode fs.FileMode, mtime int64) error {
	switch x.seen[name] {
	case nodeImplicitDir:
		x.seen[name] = nodeDir
		x.m.Dirs[x.dirIdx[name]].Mode, x.m.Dirs[x.dirIdx[name]].Mtime = mode, mtime
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
	x.m.Dirs = append(x.m.Dirs, Dir{Path: name, Mode: mode, Mtime: mtime})
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
	x.m.Files = append(x.m.Files, File{Path: name, Size: t.Size, Mode: t.Mode, Mtime: t.Mtime, Link: t.Path})
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
	mtime := headerTime(hdr)
	if err == nil {
		// fchmod: exactly the archive's bits, whatever the umask (less
		// setuid and setgid: fsys.Restorable).
		err = f.Chmod(mode)
	}
	if err == nil && mtime != 0 {
		err = fsys.SetMtime(dir, f, base, time.Unix(0, mtime))
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
	x.fileIdx[name] = len(x.m.Files)
	x.m.Files = append(x.m.Files, File{Path: name, Size: size, Mode: mode.Perm(), Mtime: mtime}) // SHA256 filled in at the end
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
// children are done, and no entry made later changes a time set.
func (x *extractor) applyDirModes() error {
	dirs := slices.Clone(x.m.Dirs)
	slices.SortFunc(dirs, func(a, b Dir) int { return strings.Compare(b.Path, a.Path) })
	for _, d := range dirs {
		if err := x.root.Chmod(d.Path, d.Mode); err != nil {
			return fmt.Errorf("tarball: %w", err)
		}
		if d.Mtime != 0 {
			if err := x.root.Chtimes(d.Path, time.Time{}, time.Unix(0, d.Mtime)); err != nil {
				return fmt.Errorf("tarball: %w", err)
			}
		}
	}
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
